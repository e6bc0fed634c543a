//! The SQLite adapter: one file, the reference's schema (a file the
//! reference created opens here, and the reverse), WAL.
//!
//! **Durability.** WAL with `synchronous=FULL`: a write is acknowledged only
//! after the transaction holding it committed and its WAL frames were
//! synced, so it survives `kill -9` of the process and a power loss.
//!
//! **Concurrency.** One writer thread owns the only write connection of the
//! process and commits queued writes in batches (see [`writer`]); reads run
//! on a small pool of read connections, each in one read transaction, off
//! the async runtime. WAL lets them read while the writer writes.

mod connection;
mod error;
mod ops;
mod readers;
mod told;
pub mod writer;

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use abi_document_model::validate::{validate_name, validate_version};
use abi_document_model::{
    BatchFailure, CollectionSpec, Data, Decided, Document, DocumentError, DocumentStore, FindQuery,
    Page, Predicate, Write,
};
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

pub use connection::{COLLECTIONS_TABLE, DOCUMENTS_TABLE, SqliteQuote};
pub use error::translate;
pub use ops::normalized_ddl;

use ops::Shared;
use readers::Readers;
use writer::{Prepared, WriteCmd, WriteOp, WriteOutput};

/// Read connections by default: reads are short, and the machine has few
/// cores; more connections mostly add memory.
pub const DEFAULT_READ_CONNECTIONS: usize = 4;
/// Queued writes at most before callers wait: enough for a batch in flight
/// and the next one filling.
pub const DEFAULT_WRITE_QUEUE: usize = 1024;
/// Writes per transaction at most: bounds a batch's latency while one
/// sync still covers hundreds of puts.
pub const DEFAULT_MAX_BATCH: usize = 256;
/// WAL pages after which a commit of the writer copies the WAL back into
/// the database file (`PRAGMA wal_autocheckpoint`; SQLite's default is
/// 1000). A checkpoint syncs the WAL and the database file and copies each
/// page the WAL holds once, however many times it was rewritten: at 10,000
/// pages (a WAL of ~40 MiB) the hot pages (the table's and the indexes' last
/// leaves) are copied once per ten thousand frames instead of once per
/// thousand, which took the writer's commit from ~1.0 to ~0.5 ms per batch
/// and put throughput at 64 callers up ~15% (docs/benchmarks.md). The file
/// stays in WAL mode and readable by the reference; only the WAL file is
/// larger, and a restart replays it.
pub const DEFAULT_CHECKPOINT_PAGES: u32 = 10_000;
/// How long a transaction waits for another process's lock on the file
/// (the reference's timeout).
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how the adapter opens its file.
#[derive(Debug, Clone)]
pub struct SqliteConfig {
    /// The database file (its directory is created when missing).
    pub path: PathBuf,
    /// See [`DEFAULT_READ_CONNECTIONS`].
    pub read_connections: usize,
    /// See [`DEFAULT_WRITE_QUEUE`].
    pub write_queue: usize,
    /// See [`DEFAULT_MAX_BATCH`].
    pub max_batch: usize,
    /// See [`DEFAULT_CHECKPOINT_PAGES`].
    pub checkpoint_pages: u32,
    /// See [`DEFAULT_BUSY_TIMEOUT`].
    pub busy_timeout: Duration,
}

impl SqliteConfig {
    /// The defaults, on `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            read_connections: DEFAULT_READ_CONNECTIONS,
            write_queue: DEFAULT_WRITE_QUEUE,
            max_batch: DEFAULT_MAX_BATCH,
            checkpoint_pages: DEFAULT_CHECKPOINT_PAGES,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
        }
    }
}

/// The SQLite document store.
#[derive(Debug)]
pub struct SqliteStore {
    write_tx: mpsc::Sender<WriteCmd>,
    readers: Arc<Readers>,
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
}

fn closed() -> DocumentError {
    DocumentError::Storage("Document adapter is closed".to_owned())
}

impl SqliteStore {
    /// A read of one document by `read`: not from before a commit whose
    /// early word went out already, and at once on this thread unless it
    /// would wait for a connection.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a read handed to the pool runs to its end unobserved.
    async fn point_read<T, F>(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        read: F,
    ) -> Result<T, DocumentError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Shared, &str, &str, &str) -> Result<T, DocumentError>
            + Clone
            + Send
            + 'static,
    {
        validate_name(id)?;
        self.shared.told().settled().await;
        let inline = read.clone();
        if let Some(found) = self
            .readers
            .read_now(|conn, shared| inline(conn, shared, namespace, collection, id))
        {
            return found;
        }
        let (namespace, collection, id) =
            (namespace.to_owned(), collection.to_owned(), id.to_owned());
        self.readers
            .read(move |conn, shared| read(conn, shared, &namespace, &collection, &id))
            .await
    }
}

impl SqliteStore {
    /// Opens (or creates) the file, in WAL mode, with the reference's
    /// tables, and starts the writer thread.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Storage`] when the file cannot be opened or set up.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped open leaves at most the file and its tables, which the next open reuses.
    pub async fn open(config: SqliteConfig) -> Result<Self, DocumentError> {
        tokio::task::spawn_blocking(move || Self::open_blocking(config))
            .await
            .map_err(|_| closed())?
    }

    /// [`SqliteStore::open`] for callers outside an async context (the
    /// writer thread is a plain thread either way).
    ///
    /// # Errors
    ///
    /// As [`SqliteStore::open`].
    pub fn open_blocking(config: SqliteConfig) -> Result<Self, DocumentError> {
        if config.path.as_os_str().is_empty() || config.path.as_os_str() == ":memory:" {
            return Err(DocumentError::invalid(
                "path must name a file (an in-memory database cannot be shared by the writer and readers)",
            ));
        }
        if let Some(parent) = config.path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|_| {
                DocumentError::Storage("Cannot initialize SQLite document storage".to_owned())
            })?;
        }
        let conn = connection::open(&config.path, config.busy_timeout)?;
        connection::initialize(&conn)?;
        connection::checkpoint_after(&conn, config.checkpoint_pages)?;
        let shared = Arc::new(Shared::new()?);
        let (write_tx, write_rx) = mpsc::channel(config.write_queue.max(1));
        let writer_shared = Arc::clone(&shared);
        let max_batch = config.max_batch.max(1);
        let writer = std::thread::Builder::new()
            .name("abi-documents-sqlite-writer".to_owned())
            .spawn(move || writer::run(conn, writer_shared, write_rx, max_batch))
            .map_err(|_| DocumentError::Storage("Cannot start the SQLite writer".to_owned()))?;
        let readers = Arc::new(Readers::new(
            config.path,
            config.busy_timeout,
            config.read_connections,
            Arc::clone(&shared),
        ));
        Ok(Self {
            write_tx,
            readers,
            shared,
            writer: Some(writer),
        })
    }

    /// Stops taking writes, commits the ones queued, and waits for the
    /// writer thread to end.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: dropping the future still lets the writer
    /// finish on its own, but nothing waits for it.
    pub async fn close(mut self) {
        let writer = self.writer.take();
        drop(self);
        if let Some(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
    }

    async fn write(&self, op: WriteOp) -> Result<WriteOutput, DocumentError> {
        self.write_deciding(op, None).await
    }

    /// [`Self::write`], `decided` told before the commit (see
    /// [`WriteCmd::decided`]).
    async fn write_deciding(
        &self,
        op: WriteOp,
        decided: Option<Decided>,
    ) -> Result<WriteOutput, DocumentError> {
        let (reply, answer) = oneshot::channel();
        self.write_tx
            .send(WriteCmd { op, reply, decided })
            .await
            .map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }
}

impl SqliteStore {
    /// A put through the writer, `decided` told before its commit.
    async fn put_with(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        data: Data,
        if_version: Option<i64>,
        decided: Option<Decided>,
    ) -> Result<Document, DocumentError> {
        validate_name(id)?;
        validate_version(if_version)?;
        let write = Write::Put {
            namespace: namespace.to_owned(),
            collection: collection.to_owned(),
            id: id.to_owned(),
            data,
            if_version,
        };
        let output = self
            .write_deciding(WriteOp::Document(Prepared::new(write)), decided)
            .await?;
        match output {
            WriteOutput::Document(document) => Ok(*document),
            WriteOutput::Done | WriteOutput::Batch(_) => {
                Err(DocumentError::Storage(error::STORAGE_MESSAGE.to_owned()))
            }
        }
    }
}

impl DocumentStore for SqliteStore {
    async fn ensure_collection(
        &self,
        namespace: &str,
        spec: CollectionSpec,
    ) -> Result<(), DocumentError> {
        self.write(WriteOp::Ensure {
            namespace: namespace.to_owned(),
            spec,
        })
        .await
        .map(|_| ())
    }

    async fn drop_collection(
        &self,
        namespace: &str,
        collection: &str,
    ) -> Result<(), DocumentError> {
        self.write(WriteOp::Drop {
            namespace: namespace.to_owned(),
            collection: collection.to_owned(),
        })
        .await
        .map(|_| ())
    }

    async fn collections(&self, namespace: &str) -> Result<Vec<String>, DocumentError> {
        validate_name(namespace)?;
        let namespace = namespace.to_owned();
        self.readers
            .read(move |conn, shared| shared.collections(conn, &namespace))
            .await
    }

    async fn collection_spec(
        &self,
        namespace: &str,
        collection: &str,
    ) -> Result<CollectionSpec, DocumentError> {
        let (namespace, collection) = (namespace.to_owned(), collection.to_owned());
        self.readers
            .read(move |conn, shared| {
                shared
                    .require_collection(conn, &namespace, &collection)
                    .map(Arc::unwrap_or_clone)
            })
            .await
    }

    async fn namespaces(&self) -> Result<Vec<String>, DocumentError> {
        self.readers
            .read(|conn, shared| shared.namespaces(conn))
            .await
    }

    async fn put(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        data: Data,
        if_version: Option<i64>,
    ) -> Result<Document, DocumentError> {
        self.put_with(namespace, collection, id, data, if_version, None)
            .await
    }

    async fn put_deciding(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        data: Data,
        if_version: Option<i64>,
        decided: Decided,
    ) -> Result<Document, DocumentError> {
        self.put_with(namespace, collection, id, data, if_version, Some(decided))
            .await
    }

    async fn get(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
    ) -> Result<Document, DocumentError> {
        self.point_read(namespace, collection, id, |conn, shared, ns, coll, id| {
            shared.get(conn, ns, coll, id)
        })
        .await
    }

    async fn get_encoded(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        tag: u32,
    ) -> Result<Vec<u8>, DocumentError> {
        self.point_read(
            namespace,
            collection,
            id,
            move |conn, shared, ns, coll, id| shared.get_encoded(conn, ns, coll, id, tag),
        )
        .await
    }

    async fn delete(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        if_version: Option<i64>,
    ) -> Result<(), DocumentError> {
        validate_name(id)?;
        validate_version(if_version)?;
        self.write(WriteOp::Document(Prepared::new(Write::Delete {
            namespace: namespace.to_owned(),
            collection: collection.to_owned(),
            id: id.to_owned(),
            if_version,
        })))
        .await
        .map(|_| ())
    }

    async fn batch(&self, writes: Vec<Write>) -> Result<Vec<Option<Document>>, BatchFailure> {
        for (index, write) in writes.iter().enumerate() {
            let (Write::Put { id, if_version, .. } | Write::Delete { id, if_version, .. }) = write;
            validate_name(id)
                .and_then(|()| validate_version(*if_version))
                .map_err(|error| BatchFailure {
                    index: Some(index),
                    error,
                })?;
        }
        // A failure of the whole command (storage, a closed store): nothing
        // of the batch was kept.
        let whole = |error| BatchFailure { index: None, error };
        let writes = writes.into_iter().map(Prepared::new).collect();
        match self.write(WriteOp::Batch(writes)).await.map_err(whole)? {
            WriteOutput::Batch(Ok(outputs)) => Ok(outputs
                .into_iter()
                .map(|output| match output {
                    WriteOutput::Document(document) => Some(*document),
                    WriteOutput::Done | WriteOutput::Batch(_) => None,
                })
                .collect()),
            WriteOutput::Batch(Err((index, error))) => Err(BatchFailure {
                index: Some(index),
                error,
            }),
            WriteOutput::Done | WriteOutput::Document(_) => Err(whole(DocumentError::Storage(
                error::STORAGE_MESSAGE.to_owned(),
            ))),
        }
    }

    async fn find(
        &self,
        namespace: &str,
        collection: &str,
        query: FindQuery,
    ) -> Result<Page, DocumentError> {
        let plan = self
            .shared
            .compiler()
            .plan_find(namespace, collection, query)?;
        let (namespace, collection) = (namespace.to_owned(), collection.to_owned());
        self.shared.told().settled().await;
        loop {
            let attempt = plan.clone();
            let (ns, coll) = (namespace.clone(), collection.clone());
            let (items, more) = self
                .readers
                .read(move |conn, shared| shared.find_once(conn, &ns, &coll, &attempt))
                .await?;
            // Every kept document was deleted between the two reads: read
            // again rather than end the paging early (no cursor is the end).
            if more && items.is_empty() {
                continue;
            }
            return Ok(plan.page(items, more));
        }
    }

    async fn count(
        &self,
        namespace: &str,
        collection: &str,
        where_: Vec<Predicate>,
    ) -> Result<i64, DocumentError> {
        let statement = ops::count_statement(&self.shared, namespace, collection, &where_)?;
        let (namespace, collection) = (namespace.to_owned(), collection.to_owned());
        self.shared.told().settled().await;
        self.readers
            .read(move |conn, shared| shared.count(conn, &namespace, &collection, &statement))
            .await
    }
}
