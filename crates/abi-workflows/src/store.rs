//! The step journal's I/O: reads and compare-and-swap writes of one run's
//! summaries and results in the module's documents, each document built by
//! [`crate::journal`]. A result is put before the summary that points at it,
//! or, where our document service serves batches, with it in one
//! transaction (the same two documents, one request).

use abi_document_model::validate::MAX_PAGE_SIZE;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use abi_document_model::{CollectionSpec, Data, Document, FieldSpec, FindQuery, Predicate};
use abi_sdk_core::documents::BatchWrite;
use abi_sdk_core::{CallError, CallErrorKind, DocumentClient};
use abi_wire::workflows::{self as wire, StepKind, field};

use crate::journal::{Child, Finish, Journal, timeline};

/// The largest result JSON journaled in one batch with its summary (its
/// reply stays far below the broker's default payload limit; larger ones
/// are written one by one).
const BATCHED_RESULT_BYTES: usize = 32 * 1024;

/// Every step summary run `run_id` journaled in `documents`' namespace (the
/// module that hosts the run), in the order they started (the reference's
/// `read_steps`); none when the project never journaled a step. Whole
/// documents: [`crate::journal::summary_view`] keeps what callers see.
///
/// # Errors
///
/// The document service's refusal or a transport failure.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn read_steps(
    documents: &DocumentClient,
    project: &str,
    run_id: &str,
) -> Result<Vec<Data>, CallError> {
    let found = find_run(documents, &wire::steps_collection(project), run_id).await?;
    Ok(timeline(found.into_iter().map(|doc| doc.data).collect()))
}

/// Every document of `collection` whose `run_id` is `run_id`, page after
/// page; none when the collection does not exist.
async fn find_run(
    documents: &DocumentClient,
    collection: &str,
    run_id: &str,
) -> Result<Vec<Document>, CallError> {
    let mut found = Vec::new();
    let mut cursor = None;
    loop {
        let query = FindQuery {
            where_: vec![Predicate::new(field::RUN_ID, "eq", run_id)],
            limit: MAX_PAGE_SIZE,
            cursor: cursor.take(),
            ..FindQuery::default()
        };
        let page = match documents.find(collection, query).await {
            Ok(page) => page,
            Err(err) if err.kind() == CallErrorKind::CollectionNotFound => break,
            Err(err) => return Err(err),
        };
        let empty = page.items.is_empty();
        found.extend(page.items);
        cursor = page.cursor;
        if empty || cursor.is_none() {
            break;
        }
    }
    Ok(found)
}

/// What this attempt knows of the stored summaries: each one's version and
/// fields as last read or written here.
#[derive(Debug, Default)]
struct Known {
    summaries: HashMap<String, (i64, Data)>,
    /// Whether every stored summary is in `summaries`: a key not there has
    /// none (the journal was empty when the attempt began, and every write
    /// since went through here). Off again once a write's outcome is unknown.
    complete: bool,
}

/// The journal of one trigger of one run, over the host module's documents.
#[derive(Debug, Clone)]
pub struct StepStore {
    documents: DocumentClient,
    steps: String,
    results: String,
    run_id: String,
    fired_at: String,
    /// The summaries' versions this attempt last saw, so a write needs no
    /// read before its compare-and-swap (a conflict reads again).
    known: Arc<Mutex<Known>>,
}

impl StepStore {
    /// The journal of run `run_id`, triggered at `fired_at`, in `project`'s
    /// collections of `documents`' namespace (the host module's).
    pub fn new(documents: DocumentClient, project: &str, run_id: &str, fired_at: &str) -> Self {
        Self {
            documents,
            steps: wire::steps_collection(project),
            results: wire::results_collection(project),
            run_id: run_id.to_owned(),
            fired_at: fired_at.to_owned(),
            known: Arc::default(),
        }
    }

    /// This journal, known to be empty: the attempt created the run's record
    /// (no attempt ran before it), so no summary needs to be read before the
    /// first write of a key. A create that finds one anyway (another host
    /// journaling the same run) conflicts and reads it then.
    #[must_use]
    pub fn known_empty(self) -> Self {
        self.known().complete = true;
        self
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The stored summary of `key` (version, fields; version 0 and no fields
    /// when there is none), as this attempt last read or wrote it, else read.
    async fn stored(&self, key: &str) -> Result<(i64, Data), CallError> {
        {
            let known = self.known();
            if let Some((version, data)) = known.summaries.get(key) {
                return Ok((*version, data.clone()));
            }
            if known.complete {
                return Ok((0, Data::new()));
            }
        }
        self.fetch(key).await
    }

    /// Reads the summary of `key` from the service, and remembers it.
    async fn fetch(&self, key: &str) -> Result<(i64, Data), CallError> {
        let id = wire::step_id(&self.run_id, key);
        let stored = self.documents.try_get(&self.steps, &id).await?;
        let (version, data) = stored.map_or((0, Data::new()), |doc| (doc.version, doc.data));
        self.known()
            .summaries
            .insert(key.to_owned(), (version, data.clone()));
        Ok((version, data))
    }

    /// The journal's pure decisions for this trigger.
    pub fn journal(&self) -> Journal<'_> {
        Journal {
            run_id: &self.run_id,
            fired_at: &self.fired_at,
        }
    }

    /// Creates both collections (or merges their declaration), `run_id` indexed.
    ///
    /// # Errors
    ///
    /// The document service's refusal or a transport failure.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the declaration is idempotent; dropped, it may or may not
    /// have been applied, and the next call applies it.
    pub async fn ensure(&self) -> Result<(), CallError> {
        for collection in [&self.steps, &self.results] {
            let spec = CollectionSpec::new(collection.clone())
                .field(FieldSpec::new(field::RUN_ID, "string").indexed());
            self.documents.ensure_collection(spec).await?;
        }
        Ok(())
    }

    /// The summary of `key` for this trigger, empty when it has none.
    ///
    /// # Errors
    ///
    /// A transport failure or the service's refusal.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn read(&self, key: &str) -> Result<Data, CallError> {
        let (version, data) = self.stored(key).await?;
        Ok(self.journal().prior((version > 0).then_some(&data)))
    }

    /// The stored result of `key` for this trigger, as JSON text.
    ///
    /// # Errors
    ///
    /// A transport failure or the service's refusal.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn result(&self, key: &str) -> Result<Option<String>, CallError> {
        let id = wire::step_id(&self.run_id, key);
        let stored = self.documents.try_get(&self.results, &id).await?;
        Ok(stored.and_then(|doc| self.journal().stored_result(&doc.data).map(str::to_owned)))
    }

    /// Writes `build(prior)` over `key`'s summary with a compare-and-swap on
    /// the version this attempt last saw, reading again after a conflict
    /// (five tries).
    async fn update(
        &self,
        key: &str,
        build: impl Fn(Journal<'_>, &Data) -> Data,
    ) -> Result<Data, CallError> {
        let id = wire::step_id(&self.run_id, key);
        let (mut version, mut stored) = self.stored(key).await?;
        for _ in 0..wire::SUMMARY_WRITE_TRIES {
            let prior = self.journal().prior((version > 0).then_some(&stored));
            let data = build(self.journal(), &prior);
            match self
                .documents
                .put_ref(&self.steps, &id, &data, Some(version))
                .await
            {
                Ok(doc) => {
                    self.known()
                        .summaries
                        .insert(key.to_owned(), (doc.version, data.clone()));
                    return Ok(data);
                }
                Err(err) if err.kind() == CallErrorKind::VersionConflict => {
                    (version, stored) = self.fetch(key).await?;
                }
                Err(err) => {
                    // Unknown whether it was applied: read before the next write.
                    let mut known = self.known();
                    known.summaries.remove(key);
                    known.complete = false;
                    return Err(err);
                }
            }
        }
        Err(CallError::new(
            CallErrorKind::VersionConflict,
            abi_wire::ErrorCode::VersionConflict.as_str(),
        )
        .with_message(format!(
            "Could not journal step {}",
            abi_pyjson::python_str_repr(key)
        ))
        .with_code(abi_wire::ErrorCode::VersionConflict.as_str()))
    }

    /// Journals a start of `key` at `now` ([`Journal::start`]).
    ///
    /// # Errors
    ///
    /// A transport failure, or five conflicts in a row.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped after its put was sent, the start may be
    /// journaled without the caller knowing; the next start counts it.
    pub async fn start(
        &self,
        key: &str,
        kind: StepKind,
        now: &str,
        reuse_running: bool,
    ) -> Result<Data, CallError> {
        self.update(key, |j, prior| {
            j.start(prior, key, kind, now, reuse_running)
        })
        .await
    }

    /// Journals a local retry of `key` ([`Journal::retry`]).
    ///
    /// # Errors
    ///
    /// As [`StepStore::start`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`StepStore::start`].
    pub async fn retry(&self, key: &str) -> Result<Data, CallError> {
        self.update(key, |j, prior| j.retry(prior)).await
    }

    /// Journals the child run of the call `key` ([`Journal::with_child`]).
    ///
    /// # Errors
    ///
    /// As [`StepStore::start`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`StepStore::start`].
    pub async fn set_child(&self, key: &str, child: &Child) -> Result<Data, CallError> {
        self.update(key, |j, prior| j.with_child(prior, child))
            .await
    }

    /// Writes the SUCCEEDED summary of `key` whose result `stored_json` is
    /// already stored (a host died between the two writes), without putting
    /// the result again; the duration is unknown (0).
    ///
    /// # Errors
    ///
    /// As [`StepStore::start`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`StepStore::start`]; repeating it is harmless.
    pub async fn complete(
        &self,
        key: &str,
        stored_json: &str,
        now: &str,
    ) -> Result<Data, CallError> {
        let end = Finish {
            status: abi_wire::workflows::StepStatus::Succeeded,
            result_json: Some(stored_json),
            error: "",
            duration_ms: 0,
            claim_check: None,
        };
        self.update(key, |j, prior| j.finish(prior, key, &end, now))
            .await
    }

    /// Journals the end of `key` at `now`: its result document first, when
    /// it has one that is not a claim check (that object is stored before),
    /// then its summary ([`Journal::finish`]).
    ///
    /// # Errors
    ///
    /// As [`StepStore::start`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped between the two writes, the result is stored
    /// and the summary still RUNNING, so the step runs again (never the
    /// other way round).
    pub async fn finish(&self, key: &str, end: &Finish<'_>, now: &str) -> Result<Data, CallError> {
        if let Some(json) = end.result_json.filter(|_| end.claim_check.is_none()) {
            let id = wire::step_id(&self.run_id, key);
            let result = self.journal().result(key, json);
            if json.len() <= BATCHED_RESULT_BYTES
                && let Some(done) = self.finish_batched(key, &result, end, now).await?
            {
                return Ok(done);
            }
            self.documents.put(&self.results, &id, result, None).await?;
        }
        self.update(key, |j, prior| j.finish(prior, key, end, now))
            .await
    }

    /// [`Self::finish`]'s result and summary in one batch, the summary on
    /// the version this attempt knows; `None` when that is not possible
    /// here (no batches served, or the summary moved: nothing was stored,
    /// the caller writes them one by one).
    async fn finish_batched(
        &self,
        key: &str,
        result: &Data,
        end: &Finish<'_>,
        now: &str,
    ) -> Result<Option<Data>, CallError> {
        let id = wire::step_id(&self.run_id, key);
        let (version, stored) = self.stored(key).await?;
        let prior = self.journal().prior((version > 0).then_some(&stored));
        let data = self.journal().finish(&prior, key, end, now);
        let batch = vec![
            BatchWrite::Put {
                collection: self.results.clone(),
                id: id.clone(),
                data: result.clone(),
                if_version: None,
            },
            BatchWrite::Put {
                collection: self.steps.clone(),
                id,
                data: data.clone(),
                if_version: Some(version),
            },
        ];
        match self.documents.batch(batch).await {
            Ok(written) => {
                let Some(Some(summary)) = written.get(1) else {
                    return Err(CallError::new(
                        CallErrorKind::Decode,
                        "a batch answered no summary",
                    ));
                };
                self.known()
                    .summaries
                    .insert(key.to_owned(), (summary.version, data.clone()));
                Ok(Some(data))
            }
            Err(e) if e.unsupported() || e.refused(1, CallErrorKind::VersionConflict) => Ok(None),
            Err(e) => {
                // Unknown whether it was applied: read before the next write.
                let mut known = self.known();
                known.summaries.remove(key);
                known.complete = false;
                Err(e.error)
            }
        }
    }
}
