//! Every write of an agent run record, and the rule they keep (the
//! owner-write invariant): a record is written by its owner, the submit and
//! then the run executing here, compare-and-swap on the version it wrote;
//! anyone else writes it only to settle a run whose owner is gone,
//! compare-and-swap on the version read and only while the run is not
//! finished. No other code puts to the runs collection.
//!
//! Where our document service serves batches, a submit creates its record
//! and its conversation claim in one transaction, and an invoke's end
//! stores its events, its result, its record's outcome and the claim's
//! release in another: two requests where one per document took nine. The
//! documents stored are the ones written one by one (a mixed fleet reads
//! them alike); only the record's intermediate versions are skipped.

use abi_document_model::{Data, Document};
use abi_sdk_core::documents::{BatchError, BatchWrite};
use abi_wire::ErrorCode;
use abi_wire::agents::is_terminal;

use super::Shared;
use crate::record;
use abi_sdk_core::CallError;

/// The owner's first write: create-only, so two submits of one invocation
/// cannot both create it.
pub(super) async fn create(shared: &Shared, key: &str, data: Data) -> Result<Document, CallError> {
    shared
        .documents()
        .put(&shared.collections.runs, key, data, Some(0))
        .await
}

/// The owner's next write, on the version it wrote last.
pub(super) async fn owner_write(
    shared: &Shared,
    key: &str,
    data: Data,
    written: i64,
) -> Result<Document, CallError> {
    shared
        .documents()
        .put(&shared.collections.runs, key, data, Some(written))
        .await
}

/// The owner's first write and the conversation's claim, both create-only
/// in one batch: the record written `RUNNING` at once. Answers the record
/// and the claim as stored. A refusal of either stores neither.
pub(super) async fn create_claimed(
    shared: &Shared,
    key: &str,
    running: Data,
    (claim_key, claim): (&str, Data),
) -> Result<(Document, Document), BatchError> {
    let stored = shared
        .documents()
        .batch(vec![
            BatchWrite::Put {
                collection: shared.collections.runs.clone(),
                id: key.to_owned(),
                data: running,
                if_version: Some(0),
            },
            BatchWrite::Put {
                collection: shared.collections.claims.clone(),
                id: claim_key.to_owned(),
                data: claim,
                if_version: Some(0),
            },
        ])
        .await?;
    match <[Option<Document>; 2]>::try_from(stored) {
        Ok([Some(record), Some(claim)]) => Ok((record, claim)),
        _ => Err(BatchError {
            failed: None,
            error: CallError::new(
                abi_sdk_core::CallErrorKind::Decode,
                "a batch of two puts answered otherwise",
            ),
        }),
    }
}

/// An ending in one batch: `immutable` (create-only event documents), then
/// the owner's write of `data` on version `written`, then the release of
/// the claim (`claim_key` at `claim_version`). Answers the record as stored.
pub(super) async fn end_with(
    shared: &Shared,
    immutable: Vec<BatchWrite>,
    (key, data, written): (&str, Data, i64),
    (claim_key, claim_version): (&str, i64),
) -> Result<Document, BatchError> {
    let mut writes = immutable;
    let record_at = writes.len();
    writes.push(BatchWrite::Put {
        collection: shared.collections.runs.clone(),
        id: key.to_owned(),
        data,
        if_version: Some(written),
    });
    writes.push(BatchWrite::Delete {
        collection: shared.collections.claims.clone(),
        id: claim_key.to_owned(),
        if_version: Some(claim_version),
    });
    let mut stored = shared.documents().batch(writes).await?;
    stored
        .get_mut(record_at)
        .and_then(Option::take)
        .ok_or_else(|| BatchError {
            failed: None,
            error: CallError::new(
                abi_sdk_core::CallErrorKind::Decode,
                "a batch answered no document for its put",
            ),
        })
}

/// Fails `existing` with `code` because its owner is gone; nothing when it
/// finished already. A conflict or a vanished record means someone else
/// settled it first, which is as good.
pub(super) async fn settle_absent_owner(
    shared: &Shared,
    existing: Document,
    code: ErrorCode,
    message: String,
) {
    if is_terminal(&record::status(&existing.data)) {
        return;
    }
    let mut data = existing.data;
    record::fail(&mut data, code, message);
    let _ = shared
        .documents()
        .put(
            &shared.collections.runs,
            &existing.id,
            data,
            Some(existing.version),
        )
        .await;
}

#[cfg(test)]
mod tests {
    /// The other files of the host, as compiled.
    const OTHERS: [(&str, &str); 12] = [
        ("auth.rs", include_str!("auth.rs")),
        ("claims.rs", include_str!("claims.rs")),
        ("keyed.rs", include_str!("keyed.rs")),
        ("machine.rs", include_str!("machine.rs")),
        ("mod.rs", include_str!("mod.rs")),
        ("ops.rs", include_str!("ops.rs")),
        ("refusal.rs", include_str!("refusal.rs")),
        ("run.rs", include_str!("run.rs")),
        ("serve.rs", include_str!("serve.rs")),
        ("submit.rs", include_str!("submit.rs")),
        ("upkeep.rs", include_str!("upkeep.rs")),
        ("view.rs", include_str!("view.rs")),
    ];

    #[test]
    fn no_other_file_of_the_host_puts_a_run_record() {
        // Every file of the host is looked at (a new one joins the list).
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/host");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.ends_with(".rs") && n != "writes.rs")
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        let listed: Vec<&str> = OTHERS.iter().map(|(n, _)| *n).collect();
        assert_eq!(files, listed, "OTHERS lists every other file of the host");
        for (name, text) in OTHERS {
            let mut rest = text;
            while let Some(at) = rest.find(".put(") {
                let call: String = rest[at..].chars().take(120).collect();
                let first_argument = call.split(',').next().unwrap_or_default();
                assert!(
                    !first_argument.contains("runs"),
                    "{name} writes a run record outside writes.rs: {call}"
                );
                rest = &rest[at + 5..];
            }
        }
    }
}
