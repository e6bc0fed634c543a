//! The one writer: a thread owning the write connection, committing each
//! batch of queued commands in one transaction (group commit).
//!
//! SQLite allows one writer at a time; many connections taking turns wait on
//! its file lock and, past the busy timeout, fail with "database is locked".
//! Here every write of the process goes through one connection instead, so
//! the lock is only ever contended by other processes, and one sync covers
//! a whole batch. A command that fails (a conflict, a unique violation) is
//! undone alone and the rest of the batch commits: a command of several
//! statements (declaring or dropping a collection, a batch of writes) runs in
//! its own SAVEPOINT, rolled back on failure; a single put or delete needs
//! none, its one writing statement being atomic in SQLite (a failed
//! statement undoes its own changes and leaves the transaction open), and a
//! command alone in its batch fails by rolling the transaction back.

use std::sync::Arc;

use abi_document_model::{CollectionSpec, Decided, Document, DocumentError, Write};
use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::ops::{Shared, TransactionSpecs};

/// A write the writer performs.
#[derive(Debug)]
pub enum WriteOp {
    /// `ensure_collection`.
    Ensure {
        /// The namespace.
        namespace: String,
        /// The declaration.
        spec: CollectionSpec,
    },
    /// `drop_collection`.
    Drop {
        /// The namespace.
        namespace: String,
        /// The collection.
        collection: String,
    },
    /// `put` or `delete`.
    Document(Prepared),
    /// `batch`: puts and deletes, all or none (one savepoint holds them).
    Batch(Vec<Prepared>),
}

/// A put or a delete with a put's stored JSON encoded before it is queued:
/// the writer thread bounds the store's throughput, and encoding is not
/// storage, so the tasks queueing writes do it in parallel.
#[derive(Debug)]
pub struct Prepared {
    /// The write.
    pub write: Write,
    /// A put's data as stored ([`crate::codec::stored_text`]); empty for a
    /// delete.
    pub raw: String,
    /// Where each top-level member of `raw` lies, for the index
    /// expressions' [`crate::codec::sqlite_field`]; empty for a delete.
    pub members: Vec<abi_pyjson::Member>,
}

impl Prepared {
    /// `write` with its stored JSON.
    pub fn new(write: Write) -> Self {
        let (raw, members) = match &write {
            Write::Put { data, .. } => crate::codec::stored_text_and_members(data),
            Write::Delete { .. } => (String::new(), Vec::new()),
        };
        Self {
            write,
            raw,
            members,
        }
    }
}

/// What a write answers.
#[derive(Debug)]
pub enum WriteOutput {
    /// The operation answers nothing.
    Done,
    /// The document as written.
    Document(Box<Document>),
    /// A batch's answers, or the write refused (and nothing of the batch
    /// is kept).
    Batch(Result<Vec<WriteOutput>, (usize, DocumentError)>),
}

impl WriteOp {
    /// Whether a failure of this command could leave some of its changes
    /// behind without a savepoint: true unless it writes with one statement
    /// (a put or a delete reads the catalog, then writes once).
    fn needs_savepoint(&self) -> bool {
        !matches!(self, Self::Document(_))
    }
}

impl WriteOutput {
    /// Whether `result` wrote nothing: an error, or a refused batch.
    fn failed(result: &Result<WriteOutput, DocumentError>) -> bool {
        matches!(result, Err(_) | Ok(WriteOutput::Batch(Err(_))))
    }
}

/// A write and where its answer goes.
#[derive(Debug)]
pub struct WriteCmd {
    /// The write.
    pub op: WriteOp,
    /// The answer, sent once the batch holding it committed (or failed).
    pub reply: oneshot::Sender<Result<WriteOutput, DocumentError>>,
    /// Told a put's document once every statement of its batch ran and
    /// only the commit is left (before the sync); a put refused, or a
    /// batch failed before its commit, tells nothing.
    pub decided: Option<Decided>,
}

/// Runs the writer until every sender is dropped: takes one command, adds
/// what else is queued (up to `max_batch`), commits, answers, repeats. The
/// commands already queued when the senders go are still committed.
pub fn run(
    conn: Connection,
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<WriteCmd>,
    max_batch: usize,
) {
    let mut batch = Vec::with_capacity(max_batch);
    let mut specs = TransactionSpecs::default();
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(cmd) => batch.push(cmd),
                Err(_) => break,
            }
        }
        commit_batch(&conn, &shared, &mut specs, &mut batch);
    }
}

/// Performs `op`; a put's data moves into its answer (the op is spent).
fn apply(
    conn: &Connection,
    shared: &Shared,
    specs: &mut TransactionSpecs,
    op: &mut WriteOp,
) -> Result<WriteOutput, DocumentError> {
    match op {
        WriteOp::Ensure { namespace, spec } => {
            specs.clear();
            shared
                .ensure_collection(conn, namespace, spec)
                .map(|()| WriteOutput::Done)
        }
        WriteOp::Drop {
            namespace,
            collection,
        } => {
            specs.clear();
            shared
                .drop_collection(conn, namespace, collection)
                .map(|()| WriteOutput::Done)
        }
        WriteOp::Document(write) => write_document(conn, shared, specs, write),
        WriteOp::Batch(writes) => {
            let mut outputs = Vec::with_capacity(writes.len());
            for (index, write) in writes.iter_mut().enumerate() {
                match write_document(conn, shared, specs, write) {
                    Ok(output) => outputs.push(output),
                    // A storage failure fails the command; a refusal only
                    // the batch (its savepoint is rolled back by the caller).
                    Err(e @ DocumentError::Storage(_)) => return Err(e),
                    Err(error) => return Ok(WriteOutput::Batch(Err((index, error)))),
                }
            }
            Ok(WriteOutput::Batch(Ok(outputs)))
        }
    }
}

/// Performs a put or a delete; a put's data moves into its answer.
fn write_document(
    conn: &Connection,
    shared: &Shared,
    specs: &mut TransactionSpecs,
    prepared: &mut Prepared,
) -> Result<WriteOutput, DocumentError> {
    match &mut prepared.write {
        Write::Put {
            namespace,
            collection,
            id,
            data,
            if_version,
        } => {
            // The index expressions read the new row: its members are known.
            crate::codec::expect_written(&prepared.raw, std::mem::take(&mut prepared.members));
            shared
                .put(
                    conn,
                    specs,
                    namespace,
                    collection,
                    id,
                    std::mem::take(data),
                    &prepared.raw,
                    *if_version,
                )
                .map(|d| WriteOutput::Document(Box::new(d)))
        }
        Write::Delete {
            namespace,
            collection,
            id,
            if_version,
        } => shared
            .delete(conn, specs, namespace, collection, id, *if_version)
            .map(|()| WriteOutput::Done),
    }
}

fn commit_batch(
    conn: &Connection,
    shared: &Shared,
    specs: &mut TransactionSpecs,
    batch: &mut Vec<WriteCmd>,
) {
    let span = tracing::debug_span!("document_write_batch", batch_len = batch.len());
    let _entered = span.enter();
    let results = match run_batch(conn, shared, specs, batch) {
        Ok(results) => results,
        Err(error) => {
            // The transaction is gone (or never began): nothing of the batch
            // was written.
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            batch.iter().map(|_| Err(error.clone())).collect()
        }
    };
    // Committed or not, the batch is over: reads held by its early words
    // go on.
    shared.told().batch_ended();
    for (cmd, result) in batch.drain(..).zip(results) {
        // A caller that stopped waiting does not undo its write.
        let _ = cmd.reply.send(result);
    }
}

fn run_batch(
    conn: &Connection,
    shared: &Shared,
    specs: &mut TransactionSpecs,
    batch: &mut [WriteCmd],
) -> Result<Vec<Result<WriteOutput, DocumentError>>, DocumentError> {
    // A command alone in its batch needs no savepoint: if it fails, the
    // whole transaction is rolled back, which undoes exactly that command.
    // Nor does a single put or delete (see `WriteOp::needs_savepoint`).
    let alone = batch.len() == 1;
    // Another process may have changed the catalog since the last commit.
    specs.clear();
    control(conn, "BEGIN IMMEDIATE")?;
    let mut results = Vec::with_capacity(batch.len());
    for cmd in &mut *batch {
        let savepoint = !alone && cmd.op.needs_savepoint();
        if savepoint {
            control(conn, "SAVEPOINT document_write")?;
        }
        let result = apply(conn, shared, specs, &mut cmd.op);
        if conn.is_autocommit() {
            // SQLite rolled the whole transaction back on its own (I/O error,
            // disk full): the earlier commands are undone too.
            return Err(match result {
                Err(e @ DocumentError::Storage(_)) => e,
                _ => DocumentError::Storage(super::error::STORAGE_MESSAGE.to_owned()),
            });
        }
        if !savepoint
            && !alone
            && let Err(e @ DocumentError::Storage(_)) = result
        {
            // A storage failure may come after the write (a stored row that
            // does not read back): without a savepoint only the whole
            // transaction can undo it, so the batch fails as one.
            return Err(e);
        }
        if savepoint {
            if WriteOutput::failed(&result) {
                control(conn, "ROLLBACK TO document_write")?;
            }
            control(conn, "RELEASE document_write")?;
        }
        results.push(result);
    }
    let failed_alone = alone && results.iter().all(WriteOutput::failed);
    if !failed_alone {
        tell_decided(shared, batch, &results);
    }
    control(conn, if failed_alone { "ROLLBACK" } else { "COMMIT" })?;
    Ok(results)
}

/// Tells the puts that wait for it their document as decided: all of the
/// batch's statements ran, only its commit (and sync) is left.
fn tell_decided(
    shared: &Shared,
    batch: &mut [WriteCmd],
    results: &[Result<WriteOutput, DocumentError>],
) {
    let telling = batch.iter().zip(results).any(|(cmd, result)| {
        cmd.decided.is_some() && matches!(result, Ok(WriteOutput::Document(_)))
    });
    if telling {
        // Counted before any word leaves, so a read started by someone who
        // heard one finds the batch pending.
        shared.told().telling();
    }
    for (cmd, result) in batch.iter_mut().zip(results) {
        if let (Some(decided), Ok(WriteOutput::Document(document))) = (cmd.decided.take(), result) {
            decided.tell(document);
        }
    }
}

/// Runs one transaction-control statement (see [`connection::run_cached`]).
fn control(conn: &Connection, sql: &str) -> Result<(), DocumentError> {
    super::connection::run_cached(conn, sql)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use abi_document_model::{Data, FieldSpec, Value};

    use super::super::connection;
    use super::*;

    fn command(op: WriteOp) -> WriteCmd {
        // The answers are read from `run_batch`'s result, not sent.
        let (reply, _) = oneshot::channel();
        WriteCmd {
            op,
            reply,
            decided: None,
        }
    }

    fn put(id: &str, n: Value) -> WriteCmd {
        let mut data = Data::new();
        data.insert("n".into(), n);
        command(WriteOp::Document(Prepared::new(Write::Put {
            namespace: "module".into(),
            collection: "records".into(),
            id: id.into(),
            data,
            if_version: None,
        })))
    }

    fn declare(kind: &str) -> WriteCmd {
        command(WriteOp::Ensure {
            namespace: "module".into(),
            spec: CollectionSpec::new("records").field(FieldSpec::new("n", kind)),
        })
    }

    /// The specs remembered within a transaction follow its own declares
    /// and drops: a put after a drop in the same commit finds no collection,
    /// and one after a merge that adds a field is checked against it.
    #[test]
    fn a_commit_reads_the_catalog_again_after_a_declare_or_a_drop() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connection::open(&dir.path().join("d.sqlite"), Duration::from_secs(1)).unwrap();
        connection::initialize(&conn).unwrap();
        let shared = Shared::new().unwrap();
        let mut specs = TransactionSpecs::default();
        let undeclared = CollectionSpec::new("records");
        let mut batch = vec![
            command(WriteOp::Ensure {
                namespace: "module".into(),
                spec: undeclared,
            }),
            put("a", Value::Int(0)),
            declare("int"),
            put("b", Value::from("text")),
            put("c", Value::Int(1)),
            command(WriteOp::Drop {
                namespace: "module".into(),
                collection: "records".into(),
            }),
            put("d", Value::Int(2)),
        ];
        let results = run_batch(&conn, &shared, &mut specs, &mut batch).unwrap();
        let refused = |i: usize| results[i].as_ref().err().map(DocumentError::code);
        assert_eq!(refused(0), None);
        assert_eq!(refused(1), None);
        assert_eq!(refused(2), None);
        assert_eq!(
            refused(3),
            Some(abi_wire::ErrorCode::InvalidArgument),
            "checked against the merged declaration"
        );
        assert_eq!(refused(4), None);
        assert_eq!(refused(5), None);
        assert_eq!(
            refused(6),
            Some(abi_wire::ErrorCode::CollectionNotFound),
            "the dropped collection is gone for the rest of the commit"
        );
    }
}
