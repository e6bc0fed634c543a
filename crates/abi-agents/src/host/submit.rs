//! A submit: the reference's checks and record, ordered per invocation (and
//! the conversation's claim is create-only in the store), never behind one
//! process-wide lock.

use abi_wire::ErrorCode;
use abi_wire::agents::RunStatus;
use std::sync::Arc;

use abi_document_model::{Data, Document};
use abi_proto::agent::v1 as apb;
use abi_wire::agents as wire;

use super::machine::{self, Found};
use super::refusal::Refusal;
use super::run::{self, Run, Start, Stored};
use super::{Shared, claims, writes};
use crate::handler::InvocationContext;
use crate::record;
use abi_sdk_core::CallErrorKind;

/// Accepts (or finds) the invocation `key` of agent `name` for `caller`.
pub(super) async fn submit(
    shared: &Arc<Shared>,
    name: &str,
    key: &str,
    caller: &str,
    req: apb::SubmitRequest,
) -> Result<Document, Refusal> {
    machine::check_request(&req).map_err(Refusal::from)?;
    let fingerprint = wire::fingerprint(
        caller,
        &req.thread_id,
        &req.prompt,
        &req.mode,
        req.deadline_seconds,
    );
    let _turn = shared.submits.lock(key).await;
    let runs = &shared.collections.runs;
    if let Some(existing) = shared.documents().try_get(runs, key).await? {
        machine::rejoin(&existing.data, caller, &fingerprint, Found::Before)
            .map_err(Refusal::from)?;
        if let Some(live) = shared.runs.get(key) {
            live.watch(&req.updates_inbox);
        }
        return Ok(existing);
    }
    let closing = shared.is_closing();
    let reservation = (!closing)
        .then(|| shared.runs.reserve(shared.options.max_active_runs))
        .flatten();
    machine::admit(closing, reservation.is_some()).map_err(Refusal::from)?;
    let data = record::Accepted {
        agent_name: name,
        invocation_id: &req.invocation_id,
        thread_id: &req.thread_id,
        caller,
        fingerprint: &fingerprint,
        owner: shared.instance_id(),
        submitted_at: &record::now(),
    }
    .to_data();
    let claim_key = wire::claim_key(name, caller, &req.thread_id);
    let mut running = data.clone();
    record::Update::Status(RunStatus::Running).apply(&mut running, record::now);
    let claim = record::claim(key, shared.instance_id());
    let (doc, data, claim_version) =
        match writes::create_claimed(shared, key, running.clone(), (&claim_key, claim)).await {
            Ok((doc, claim)) => (doc, running, claim.version),
            Err(e) if e.refused(0, CallErrorKind::VersionConflict) => {
                return rejoin_after_race(shared, key, caller, &fingerprint).await;
            }
            // The claim is held (its owner may be gone: the steps find out),
            // or only the reference's document service runs.
            Err(e) if e.unsupported() || e.refused(1, CallErrorKind::VersionConflict) => {
                match in_steps(shared, key, data, &claim_key, (caller, &fingerprint)).await? {
                    Steps::Started(doc, data, claim_version) => (doc, data, claim_version),
                    Steps::Answered(doc) => return Ok(doc),
                }
            }
            Err(e) => return Err(e.error.into()),
        };
    let context = InvocationContext {
        invocation_id: req.invocation_id.clone(),
        thread_id: wire::context_thread_id(
            &shared.links.project,
            &shared.links.module_id,
            name,
            caller,
            &req.thread_id,
        ),
        caller_identity: caller.to_owned(),
        cancelled: tokio_util::sync::CancellationToken::new(),
    };
    let watcher = (!req.updates_inbox.is_empty()).then(|| req.updates_inbox.clone());
    let live = Arc::new(Run::new(
        key.to_owned(),
        name.to_owned(),
        context,
        (claim_key, claim_version),
        Stored {
            data,
            version: doc.version,
        },
        watcher,
    ));
    run::spawn(
        shared,
        live,
        Start {
            mode: req.mode,
            prompt: req.prompt,
            deadline_secs: req.deadline_seconds,
        },
    );
    Ok(doc)
}

/// The submit lost the race to create the record: the winner's answers.
async fn rejoin_after_race(
    shared: &Shared,
    key: &str,
    caller: &str,
    fingerprint: &str,
) -> Result<Document, Refusal> {
    let existing = shared
        .documents()
        .get(&shared.collections.runs, key)
        .await?;
    machine::rejoin(&existing.data, caller, fingerprint, Found::AfterRace)
        .map_err(Refusal::from)?;
    Ok(existing)
}

/// What the one-document-per-request submit came to.
enum Steps {
    /// The run starts: its record as stored, its data, the claim's version.
    Started(Document, Data, i64),
    /// The submit is answered without a run (a race lost, a busy
    /// conversation).
    Answered(Document),
}

/// The reference's order, one document per request: the record `ACCEPTED`,
/// the claim (taken from an owner that is gone), the record `RUNNING`.
async fn in_steps(
    shared: &Shared,
    key: &str,
    mut data: Data,
    claim_key: &str,
    (caller, fingerprint): (&str, &str),
) -> Result<Steps, Refusal> {
    let doc = match writes::create(shared, key, data.clone()).await {
        Ok(doc) => doc,
        Err(e) if e.kind() == CallErrorKind::VersionConflict => {
            return Ok(Steps::Answered(
                rejoin_after_race(shared, key, caller, fingerprint).await?,
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let Some(claim) = claims::acquire(shared, claim_key, key).await? else {
        record::fail(
            &mut data,
            ErrorCode::ConversationBusy,
            "Conversation has an active or unresolved execution claim",
        );
        return Ok(Steps::Answered(
            writes::owner_write(shared, key, data, doc.version).await?,
        ));
    };
    record::Update::Status(RunStatus::Running).apply(&mut data, record::now);
    let doc = writes::owner_write(shared, key, data.clone(), doc.version).await?;
    Ok(Steps::Started(doc, data, claim.version))
}
