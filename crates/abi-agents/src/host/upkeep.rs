//! The upkeep every host runs at start and every `upkeep_interval`, which
//! the reference has not: conversation claims whose owner discovery no
//! longer lists are released (their runs FAILED `OWNER_GONE`) once the
//! owner's lease ended, not only when someone submits to that conversation;
//! and finished records older than the retention's `max_age` go with their
//! event fragments and manifests.

use abi_wire::agents::field;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use abi_document_model::{Datetime, FindQuery, Predicate};
use abi_wire::agents::{self as wire, is_terminal};
use futures::StreamExt as _;
use tracing::{info, warn};

use super::{AgentHostError, Shared, claims};
use crate::record;
use abi_sdk_core::CallErrorKind;

/// Which finished agent records a host deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRetention {
    /// Finished runs whose `finished_at` is older than this go, with their
    /// events (default 7 days, as the job runs' retention).
    pub max_age: Duration,
    /// At most this many records per pass (default 200).
    pub batch: usize,
}

impl Default for AgentRetention {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(7 * 24 * 3600),
            batch: 200,
        }
    }
}

/// Upkeep passes until the host closes.
pub(super) async fn run(shared: Arc<Shared>) {
    loop {
        if let Err(err) = pass(&shared).await {
            warn!(error = %err, "agent upkeep failed; retrying at the next pass");
        }
        tokio::select! {
            () = shared.stopping.closed() => return,
            () = tokio::time::sleep(shared.options.upkeep_interval) => {}
        }
    }
}

/// One pass: (claims released, records deleted).
pub(super) async fn pass(shared: &Shared) -> Result<(usize, usize), AgentHostError> {
    let released = release_dead_owners(shared).await?;
    let deleted = match &shared.options.retention {
        Some(retention) => prune(shared, retention).await?,
        None => 0,
    };
    Ok((released, deleted))
}

async fn release_dead_owners(shared: &Shared) -> Result<usize, AgentHostError> {
    let members: HashSet<String> = shared
        .links
        .discovery
        .get_module(&shared.links.module_id, shared.links.contract_major)
        .await?
        .into_iter()
        .map(|i| i.instance_id)
        .collect();
    let mut released = 0;
    let docs = shared.documents();
    let mut all = std::pin::pin!(docs.find_all(&shared.collections.claims, FindQuery::default()));
    let mut absent = Vec::new();
    while let Some(claim) = all.next().await {
        let claim = claim?;
        let owner = record::text(&claim.data, field::OWNER);
        if owner != shared.instance_id() && !members.contains(&owner) {
            absent.push(claim.id);
        }
    }
    for key in absent {
        if claims::release_if_absent(shared, &key, Some(&members)).await? {
            released += 1;
        }
    }
    Ok(released)
}

async fn prune(shared: &Shared, retention: &AgentRetention) -> Result<usize, AgentHostError> {
    let now = Datetime::now();
    let micros = i64::try_from(retention.max_age.as_micros()).unwrap_or(i64::MAX);
    let cutoff = Datetime::from_unix_micros(now.unix_micros().saturating_sub(micros))
        .unwrap_or(now)
        .isoformat();
    let query = FindQuery {
        where_: vec![Predicate::new(field::FINISHED_AT, "lt", cutoff.as_str())],
        limit: i64::try_from(retention.batch.clamp(1, 1000)).unwrap_or(200),
        ..Default::default()
    };
    let docs = shared.documents();
    let page = docs.find(&shared.collections.runs, query).await?;
    let mut deleted = 0;
    for doc in page.items {
        if !is_terminal(&record::status(&doc.data)) {
            continue;
        }
        let key = doc.id.clone();
        let last = u64::try_from(record::last_sequence(&doc.data)).unwrap_or(0);
        for sequence in 0..=last {
            let parts = if sequence == 0 {
                record::int(&doc.data, field::RESULT_PARTS)
            } else {
                match docs
                    .try_get(
                        &shared.collections.events,
                        &wire::manifest_id(&key, sequence),
                    )
                    .await?
                {
                    Some(m) => record::int(&m.data, field::PARTS),
                    None => 0,
                }
            };
            for part in 0..u64::try_from(parts).unwrap_or(0) {
                forget(
                    docs.delete(
                        &shared.collections.events,
                        &wire::part_id(&key, sequence, part),
                        None,
                    )
                    .await,
                )?;
            }
            if sequence > 0 {
                forget(
                    docs.delete(
                        &shared.collections.events,
                        &wire::manifest_id(&key, sequence),
                        None,
                    )
                    .await,
                )?;
            }
        }
        // The record last: a pass cut short finds it again next time.
        forget(
            docs.delete(&shared.collections.runs, &key, Some(doc.version))
                .await,
        )?;
        deleted += 1;
    }
    if deleted > 0 {
        info!(deleted, "agent records past their retention deleted");
    }
    Ok(deleted)
}

/// A delete whose document is already gone (or changed) is done.
fn forget(result: Result<(), abi_sdk_core::CallError>) -> Result<(), abi_sdk_core::CallError> {
    match result {
        Err(e)
            if matches!(
                e.kind(),
                CallErrorKind::DocumentNotFound | CallErrorKind::VersionConflict
            ) =>
        {
            Ok(())
        }
        other => other,
    }
}
