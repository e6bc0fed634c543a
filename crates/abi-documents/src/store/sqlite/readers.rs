//! Read connections: a few, each used by one blocking task at a time, each
//! read on one snapshot: a transaction of its own, or a single statement.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_document_model::DocumentError;
use rusqlite::Connection;
use tokio::sync::Semaphore;

use super::connection;
use super::ops::Shared;

/// A pool of read connections to one file.
#[derive(Debug)]
pub struct Readers {
    path: PathBuf,
    busy_timeout: Duration,
    idle: Mutex<Vec<Connection>>,
    /// Connections of [`Readers::read_now`], which never wait for a lock;
    /// one per runtime thread reading at once at most, since such a read
    /// does not yield.
    inline: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
    shared: Arc<Shared>,
}

fn closed() -> DocumentError {
    DocumentError::Storage("Document adapter is closed".to_owned())
}

impl Readers {
    /// At most `size` reads at once, on connections opened when first needed.
    pub fn new(path: PathBuf, busy_timeout: Duration, size: usize, shared: Arc<Shared>) -> Self {
        Self {
            path,
            busy_timeout,
            idle: Mutex::new(Vec::new()),
            inline: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(size.max(1))),
            shared,
        }
    }

    /// Runs `read` in a read transaction on a pooled connection, off the
    /// async runtime. A read started after a write was acknowledged sees it
    /// (WAL: each transaction reads the last commit).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped call leaves the read to finish and the
    /// connection to return to the pool.
    pub async fn read<T, F>(self: &Arc<Self>, read: F) -> Result<T, DocumentError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Shared) -> Result<T, DocumentError> + Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| closed())?;
        let this = Arc::clone(self);
        let task = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let conn = this.take()?;
            let result = in_read_transaction(&conn, |c| read(c, &this.shared));
            this.give_back(conn);
            result
        });
        task.await.map_err(|_| closed())?
    }

    /// Runs `read`, a single statement, at once on the calling thread (the
    /// runtime's), on a connection that never waits for a lock: a point
    /// read of pages in the cache costs less than the two thread hops of
    /// [`Readers::read`]. SQLite runs one statement on one snapshot by
    /// itself, so no `BEGIN` and `COMMIT` surround it. `None` when it failed
    /// on storage (a lock held by another process, say; a read changes
    /// nothing, so it can be repeated): the caller then reads through
    /// [`Readers::read`], which waits.
    pub fn read_now<T>(
        &self,
        read: impl FnOnce(&Connection, &Shared) -> Result<T, DocumentError>,
    ) -> Option<Result<T, DocumentError>> {
        let pooled = self.inline.lock().ok().and_then(|mut idle| idle.pop());
        let conn = match pooled {
            Some(conn) => conn,
            None => connection::open(&self.path, Duration::ZERO).ok()?,
        };
        let result = read(&conn, &self.shared);
        if let Ok(mut idle) = self.inline.lock() {
            idle.push(conn);
        }
        match result {
            Err(DocumentError::Storage(_)) => None,
            done => Some(done),
        }
    }

    fn take(&self) -> Result<Connection, DocumentError> {
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        match idle {
            Some(conn) => Ok(conn),
            None => connection::open(&self.path, self.busy_timeout),
        }
    }

    fn give_back(&self, conn: Connection) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(conn);
        }
    }
}

fn in_read_transaction<T>(
    conn: &Connection,
    read: impl FnOnce(&Connection) -> Result<T, DocumentError>,
) -> Result<T, DocumentError> {
    connection::run_cached(conn, "BEGIN")?;
    let result = read(conn);
    // Ending a read-only transaction cannot lose data; a failure here means
    // the connection is unusable and the next BEGIN reports it.
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = connection::run_cached(conn, end);
    let value = result?;
    ended?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn readers(dir: &tempfile::TempDir) -> Readers {
        let path = dir.path().join("documents.sqlite");
        let conn = connection::open(&path, Duration::from_secs(1)).unwrap();
        connection::initialize(&conn).unwrap();
        Readers::new(
            path,
            Duration::from_secs(1),
            2,
            Arc::new(Shared::new().unwrap()),
        )
    }

    /// A read done at once answers; one failed on storage is left to the
    /// waiting path (`None`); the connection is kept for the next.
    #[test]
    fn reads_now_unless_storage_fails() {
        let dir = tempfile::tempdir().unwrap();
        let readers = readers(&dir);
        let counted = readers.read_now(|conn, _| {
            conn.query_row("SELECT count(*) FROM abi_documents", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(|_| DocumentError::Storage("unreadable".into()))
        });
        assert_eq!(counted, Some(Ok(0)));
        let missing: Option<Result<(), _>> =
            readers.read_now(|_, _| Err(DocumentError::DocumentNotFound("gone".into())));
        assert_eq!(
            missing,
            Some(Err(DocumentError::DocumentNotFound("gone".into())))
        );
        let busy: Option<Result<(), _>> =
            readers.read_now(|_, _| Err(DocumentError::Storage("locked".into())));
        assert_eq!(busy, None);
        assert_eq!(
            readers.inline.lock().unwrap().len(),
            1,
            "one connection reused"
        );
    }
}
