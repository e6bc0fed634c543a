//! Run records (`job_runs_*/<run_id>` in the module's namespace): every
//! write is a compare-and-swap, and fenced: a write for an attempt the
//! record no longer shows (another host or a later attempt took the trigger
//! over) is dropped, never merged.
//!
//! An attempt keeps the record it last wrote ([`Fence::kept`]) and writes
//! its next fields on that version without reading the record first: the
//! version still matching means nobody else wrote since, so the fence holds.
//! Only a `VERSION_CONFLICT` makes it read the record and check the fence.

use abi_document_model::{CollectionSpec, Data, Document, FieldSpec, Value};
use abi_wire::jobs::{self as wire, field};

use super::{JobHostError, Shared};
use crate::JobContext;
use abi_sdk_core::CallError;
use abi_sdk_core::CallErrorKind;
use abi_sdk_core::documents::Stored;

/// The record fields the reference indexes (retention and the UI query them).
const INDEXED: [&str; 3] = [field::JOB, field::STATUS, field::FINISHED_AT];
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

/// Which attempt a write belongs to, and the record it last wrote.
#[derive(Debug, Clone)]
pub(super) struct Fence {
    pub(super) attempt: i64,
    pub(super) instance: String,
    pub(super) started_at: String,
    /// The record as this attempt last wrote it.
    pub(super) kept: Kept,
}

/// A record as written: the fields sent and the version the service
/// answered. The fields are the ones sent, not the ones answered, so the
/// next write never depends on what a put's reply carries.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    pub(super) version: i64,
    pub(super) data: Data,
}

impl Fence {
    /// Whether `data` is still this attempt, running.
    fn holds(&self, data: &Data) -> bool {
        data.get(field::STATUS) == Some(&Value::from(wire::RUNNING))
            && data.get(field::ATTEMPT) == Some(&Value::Int(self.attempt))
            && data.get(field::INSTANCE) == Some(&Value::from(self.instance.as_str()))
            && data.get(field::STARTED_AT) == Some(&Value::from(self.started_at.as_str()))
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
/// (`existing`), or creates it (`if_version = 0`: a record that exists
/// after all is a `VERSION_CONFLICT`); `replace` drops an older trigger's
/// fields. Returns the record written.
pub(super) async fn start(
    shared: &Shared,
    run_id: &str,
    existing: Option<&Document>,
    fields: Data,
    replace: bool,
) -> Result<Kept, CallError> {
    let (data, if_version) = started(existing, fields, replace);
    write(shared, run_id, data, if_version).await
}

/// [`start`], answered as soon as the document service decided the write,
/// before its commit is durable (where it can tell; see
/// [`abi_sdk_core::documents::PutQueue::put_deciding`]): the record as it
/// will be stored, and the durable answer, which the attempt awaits before
/// it writes again or answers its delivery.
pub(super) async fn claim(
    shared: &Shared,
    run_id: &str,
    existing: Option<&Document>,
    fields: Data,
    replace: bool,
) -> Result<(Kept, Claimed), CallError> {
    let (data, if_version) = started(existing, fields, replace);
    let deciding = shared
        .record_puts
        .put_deciding(&shared.collection, run_id, &data, Some(if_version))
        .await?;
    let kept = Kept {
        version: deciding.written.version,
        data,
    };
    let claimed = Claimed {
        stored: deciding.stored,
        over: if_version,
    };
    Ok((kept, claimed))
}

/// A RUNNING record decided, on its way to disk.
#[derive(Debug)]
pub(super) struct Claimed {
    /// Its durable answer.
    pub(super) stored: Stored,
    /// The version it was written over (0: created).
    pub(super) over: i64,
}

/// A new attempt's record, and the version it is written over.
fn started(existing: Option<&Document>, mut fields: Data, replace: bool) -> (Data, i64) {
    match existing {
        Some(doc) if !replace => {
            let mut data = doc.data.clone();
            data.extend(fields);
            (data, doc.version)
        }
        // A new record: `fields` with the time it was created (a field of
        // theirs by that name, had they one, wins).
        Some(_) | None => {
            fields
                .entry(field::CREATED_AT.to_owned())
                .or_insert_with(|| Value::from(super::super::time::now_iso()));
            (fields, existing.map_or(0, |doc| doc.version))
        }
    }
}

/// Writes `data` on `if_version` (compare-and-swap).
async fn write(
    shared: &Shared,
    run_id: &str,
    data: Data,
    if_version: i64,
) -> Result<Kept, CallError> {
    let version = put(shared, run_id, &data, if_version).await?;
    Ok(Kept { version, data })
}

/// Puts `data` on `if_version` (compare-and-swap); the version written.
async fn put(
    shared: &Shared,
    run_id: &str,
    data: &Data,
    if_version: i64,
) -> Result<i64, CallError> {
    let written = shared
        .record_puts
        .put(&shared.collection, run_id, data, Some(if_version))
        .await?;
    Ok(written.version)
}

/// Merges `fields` into the record if `fence` still holds: first on the
/// version the attempt kept, then (on a `VERSION_CONFLICT`) on the version
/// read, compare-and-swap, three tries. A write moves the kept version on.
pub(super) async fn save(
    shared: &Shared,
    run_id: &str,
    fields: &Data,
    fence: &mut Fence,
) -> Result<Saved, CallError> {
    // The kept record is this attempt's own RUNNING write; the check only
    // guards against a save after the attempt's outcome was written.
    if fence.holds(&fence.kept.data) {
        match put_kept(shared, run_id, &mut fence.kept, fields).await {
            Ok(()) => return Ok(Saved::Written),
            Err(e) if e.kind() == CallErrorKind::VersionConflict => {}
            Err(e) => return Err(e),
        }
    }
    let mut last = None;
    for _ in 0..SAVE_TRIES {
        let Some(doc) = get(shared, run_id).await? else {
            return Ok(Saved::Fenced);
        };
        if !fence.holds(&doc.data) {
            return Ok(Saved::Fenced);
        }
        match put_merged(shared, run_id, &doc.data, doc.version, fields).await {
            Ok(kept) => {
                fence.kept = kept;
                return Ok(Saved::Written);
            }
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

/// `fields` merged into the kept record and written on its version,
/// without a copy of the record: on success the kept record is the one
/// written, on failure the merge is undone. (A save dropped while its write
/// is awaited leaves the fields merged on the old version; only the
/// attempt's own task holds its fence, and it ends with the drop.)
async fn put_kept(
    shared: &Shared,
    run_id: &str,
    kept: &mut Kept,
    fields: &Data,
) -> Result<(), CallError> {
    let merged = Merged::into(&mut kept.data, fields);
    match put(shared, run_id, &kept.data, kept.version).await {
        Ok(version) => {
            kept.version = version;
            Ok(())
        }
        Err(e) => {
            merged.undo(&mut kept.data);
            Err(e)
        }
    }
}

/// Fields merged into a record in place, with what they replaced.
struct Merged<'f> {
    replaced: Vec<(&'f String, Option<Value>)>,
}

impl<'f> Merged<'f> {
    /// Merges `fields` into `data` (a field present in both takes the new value).
    fn into(data: &mut Data, fields: &'f Data) -> Self {
        let replaced = fields
            .iter()
            .map(|(k, v)| (k, data.insert(k.clone(), v.clone())))
            .collect();
        Self { replaced }
    }

    /// Puts `data` back as it was before the merge.
    fn undo(self, data: &mut Data) {
        for (k, old) in self.replaced.into_iter().rev() {
            match old {
                Some(value) => data.insert(k.clone(), value),
                None => data.remove(k),
            };
        }
    }
}

/// `fields` merged into `over`, written on `version`.
async fn put_merged(
    shared: &Shared,
    run_id: &str,
    over: &Data,
    version: i64,
    fields: &Data,
) -> Result<Kept, CallError> {
    let mut data = over.clone();
    data.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
    write(shared, run_id, data, version).await
}
/// The handler's log lines as the record stores them.
pub(super) fn logs(cx: &JobContext) -> Value {
    Value::List(cx.logs().into_iter().map(Value::from).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn data(pairs: &[(&str, Value)]) -> Data {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn a_start_over_a_record_keeps_or_replaces_it_and_a_new_one_is_stamped_created() {
        let fields = data(&[
            (field::STATUS, Value::from(wire::RUNNING)),
            (field::ATTEMPT, Value::Int(2)),
        ]);
        let old = Document {
            id: "r".into(),
            data: data(&[
                (field::CREATED_AT, Value::from("then")),
                (field::ATTEMPT, Value::Int(1)),
                (field::LOGS, Value::List(vec![Value::from("a")])),
            ]),
            version: 4,
            created_at: abi_document_model::Datetime::now(),
            updated_at: abi_document_model::Datetime::now(),
        };
        // Over the record read: its fields kept, the start's written over them.
        let (kept, version) = started(Some(&old), fields.clone(), false);
        let mut expected = old.data.clone();
        expected.extend(fields.clone());
        assert_eq!((kept, version), (expected, 4));
        // An older trigger's record replaced, and a record created: the
        // start's fields and a new creation time.
        for (existing, over) in [(Some(&old), 4), (None, 0)] {
            let (mut new, version) = started(existing, fields.clone(), true);
            assert_eq!(version, over);
            let Some(Value::String(created)) = new.remove(field::CREATED_AT) else {
                panic!("no creation time: {new:?}");
            };
            assert_ne!(created, "then");
            assert_eq!(new, fields);
        }
        // A start that names its creation time keeps it.
        let mut named = fields.clone();
        named.insert(field::CREATED_AT.into(), Value::from("given"));
        assert_eq!(started(None, named.clone(), false).0, named);
    }

    #[test]
    fn a_merge_in_place_writes_what_a_copy_would_and_undoes_to_the_record_kept() {
        let record = data(&[
            (field::STATUS, Value::from(wire::RUNNING)),
            (field::ATTEMPT, Value::Int(1)),
            (field::LOGS, Value::List(vec![])),
        ]);
        let cases = [
            data(&[]),
            data(&[(field::LOGS, Value::List(vec![Value::from("a")]))]),
            data(&[
                (field::STATUS, Value::from(wire::SUCCEEDED)),
                (field::FINISHED_AT, Value::from("2026-12-06T10:00:00+00:00")),
                (field::RESULT, Value::Null),
            ]),
        ];
        for fields in &cases {
            let mut copied = record.clone();
            copied.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
            let mut in_place = record.clone();
            let merged = Merged::into(&mut in_place, fields);
            assert_eq!(in_place, copied, "{fields:?}");
            merged.undo(&mut in_place);
            assert_eq!(in_place, record, "{fields:?}");
        }
    }
}
