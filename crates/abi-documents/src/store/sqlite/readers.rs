//! Read connections: a few, each used by one blocking task at a time, each
//! read in its own read transaction (one snapshot per operation).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_document_model::DocumentError;
use rusqlite::Connection;
use tokio::sync::Semaphore;

use super::connection;
use super::error::Translate;
use super::ops::Shared;

/// A pool of read connections to one file.
#[derive(Debug)]
pub struct Readers {
    path: PathBuf,
    busy_timeout: Duration,
    idle: Mutex<Vec<Connection>>,
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
    conn.execute_batch("BEGIN").translated()?;
    let result = read(conn);
    // Ending a read-only transaction cannot lose data; a failure here means
    // the connection is unusable and the next BEGIN reports it.
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = conn.execute_batch(end).translated();
    let value = result?;
    ended?;
    Ok(value)
}
