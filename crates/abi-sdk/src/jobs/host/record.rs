//! Run records (`job_runs_*/<run_id>` in the module's namespace): every
//! write is a compare-and-swap on the version just read, and fenced: a
//! write for an attempt the record no longer shows (another host or a later
//! attempt took the trigger over) is dropped, never merged.

use abi_document_model::{CollectionSpec, Data, Document, FieldSpec, Value};

use super::{JobHostError, Shared};
use crate::CallErrorKind;
use crate::error::CallError;

/// The record fields the reference indexes (retention and the UI query them).
const INDEXED: [&str; 3] = ["job", "status", "finished_at"];
/// Compare-and-swap tries of one save (the reference's three).
const SAVE_TRIES: usize = 3;

/// Creates the runs collection, or merges its declaration.
pub(super) async fn ensure_collection(shared: &Shared) -> Result<(), JobHostError> {
    let mut spec = CollectionSpec::new(shared.collection.clone());
    for field in INDEXED {
        spec = spec.field(FieldSpec::new(field, "string").indexed());
    }
    shared.links.documents.ensure_collection(spec).await?;
    Ok(())
}

/// The run record, `None` when there is none.
pub(super) async fn get(shared: &Shared, run_id: &str) -> Result<Option<Document>, CallError> {
    shared
        .links
        .documents
        .try_get(&shared.collection, run_id)
        .await
}

/// Which attempt a write belongs to.
#[derive(Debug, Clone)]
pub(super) struct Fence {
    pub(super) attempt: i64,
    pub(super) instance: String,
    pub(super) started_at: String,
}

impl Fence {
    /// Whether `data` is still this attempt, running.
    fn holds(&self, data: &Data) -> bool {
        data.get("status") == Some(&Value::from("RUNNING"))
            && data.get("attempt") == Some(&Value::Int(self.attempt))
            && data.get("instance") == Some(&Value::from(self.instance.as_str()))
            && data.get("started_at") == Some(&Value::from(self.started_at.as_str()))
    }
}

/// What a fenced save did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Saved {
    /// The fields are stored.
    Written,
    /// The record belongs to another attempt now; nothing was written.
    Fenced,
}

/// Writes the RUNNING record of a new attempt over the version read
/// (`existing`), or creates it; `replace` drops an older trigger's fields.
pub(super) async fn start(
    shared: &Shared,
    run_id: &str,
    existing: Option<&Document>,
    fields: Data,
    replace: bool,
) -> Result<(), CallError> {
    let (mut data, if_version) = match existing {
        Some(doc) if !replace => (doc.data.clone(), doc.version),
        Some(doc) => (created(), doc.version),
        None => (created(), 0),
    };
    data.extend(fields);
    shared
        .links
        .documents
        .put(&shared.collection, run_id, data, Some(if_version))
        .await
        .map(drop)
}

fn created() -> Data {
    let mut data = Data::new();
    data.insert(
        "created_at".into(),
        Value::from(super::super::time::now_iso()),
    );
    data
}

/// Merges `fields` into the record if `fence` still holds, compare-and-swap
/// on the version read (three tries).
pub(super) async fn save(
    shared: &Shared,
    run_id: &str,
    fields: &Data,
    fence: &Fence,
) -> Result<Saved, CallError> {
    let mut last = None;
    for _ in 0..SAVE_TRIES {
        let Some(doc) = get(shared, run_id).await? else {
            return Ok(Saved::Fenced);
        };
        if !fence.holds(&doc.data) {
            return Ok(Saved::Fenced);
        }
        let mut data = doc.data;
        data.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
        match shared
            .links
            .documents
            .put(&shared.collection, run_id, data, Some(doc.version))
            .await
        {
            Ok(_) => return Ok(Saved::Written),
            Err(e) if e.kind() == CallErrorKind::VersionConflict => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        CallError::new(
            CallErrorKind::VersionConflict,
            format!("Could not save job run {run_id}"),
        )
    }))
}
