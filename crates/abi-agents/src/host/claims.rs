//! Conversation claims (`agent_claims_*/<hash(name, caller, thread)>`,
//! `{invocation_key, owner}`), created create-only by a submit and deleted
//! at the version created when its run ends. A claim whose owner discovery
//! no longer lists is released and its run FAILED `OWNER_GONE`: by a submit
//! to that conversation (the reference), and by every host's upkeep
//! (`upkeep.rs`) as soon as the owner's lease ended.

use abi_document_model::Document;
use abi_wire::ErrorCode;
use abi_wire::agents::field;
use tracing::{info, warn};

use super::{Shared, writes};
use crate::record;
use abi_sdk_core::{CallError, CallErrorKind};

/// Create tries of a claim (the reference's three).
const TRIES: usize = 3;

/// The new claim, or `None` when a live owner still holds the conversation.
pub(super) async fn acquire(
    shared: &Shared,
    claim_key: &str,
    invocation_key: &str,
) -> Result<Option<Document>, CallError> {
    let claim = record::claim(invocation_key, shared.instance_id());
    for _ in 0..TRIES {
        match shared
            .documents()
            .put(
                &shared.collections.claims,
                claim_key,
                claim.clone(),
                Some(0),
            )
            .await
        {
            Ok(doc) => return Ok(Some(doc)),
            Err(e) if e.kind() == CallErrorKind::VersionConflict => {
                if !release_if_absent(shared, claim_key, None).await? {
                    return Ok(None);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Releases the claim `claim_key` if its owner is absent from discovery
/// (`members` when the caller already read them); true when the caller may
/// try to create it again.
pub(super) async fn release_if_absent(
    shared: &Shared,
    claim_key: &str,
    members: Option<&std::collections::HashSet<String>>,
) -> Result<bool, CallError> {
    let Some(existing) = shared
        .documents()
        .try_get(&shared.collections.claims, claim_key)
        .await?
    else {
        return Ok(true);
    };
    let owner = record::text(&existing.data, field::OWNER);
    if !owner_absent(shared, &owner, members).await {
        return Ok(false);
    }
    match shared
        .documents()
        .delete(
            &shared.collections.claims,
            claim_key,
            Some(existing.version),
        )
        .await
    {
        Ok(()) => {}
        Err(e)
            if matches!(
                e.kind(),
                CallErrorKind::DocumentNotFound | CallErrorKind::VersionConflict
            ) =>
        {
            return Ok(true);
        }
        Err(e) => return Err(e),
    }
    info!(owner = %owner, "released the conversation claim of an owner discovery no longer lists");
    fail_abandoned(
        shared,
        &record::text(&existing.data, field::INVOCATION_KEY),
        &owner,
    )
    .await;
    Ok(true)
}

/// Whether discovery no longer lists `owner`. This process is never
/// absent; a failed lookup keeps the claim.
async fn owner_absent(
    shared: &Shared,
    owner: &str,
    members: Option<&std::collections::HashSet<String>>,
) -> bool {
    if owner == shared.instance_id() {
        return false;
    }
    if let Some(members) = members {
        return !members.contains(owner);
    }
    match shared
        .links
        .discovery
        .get_module(&shared.links.module_id, shared.links.contract_major)
        .await
    {
        Ok(instances) => !instances.iter().any(|i| i.instance_id == owner),
        Err(err) => {
            warn!(error = %err, "discovery lookup failed; conversation claim kept");
            false
        }
    }
}

async fn fail_abandoned(shared: &Shared, invocation_key: &str, owner: &str) {
    if invocation_key.is_empty() {
        return;
    }
    let runs = &shared.collections.runs;
    let Ok(Some(existing)) = shared.documents().try_get(runs, invocation_key).await else {
        return;
    };
    let message = format!("Owner {owner} left discovery; the conversation claim was released");
    writes::settle_absent_owner(shared, existing, ErrorCode::OwnerGone, message).await;
}
