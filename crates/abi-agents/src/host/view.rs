//! The `Invocation` a reply carries: the record, up to 64 event manifests
//! after the cursor, `FINALIZING` while a finished run is still in memory,
//! and whether its owner is still registered (discovery's membership,
//! cached 1 s).

use abi_wire::agents::field;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use abi_document_model::{Data, Value};
use abi_proto::agent::v1 as apb;
use abi_wire::agents::{self as wire, is_terminal};

use super::Shared;
use crate::record;
use abi_sdk_core::CallError;

/// The instance ids discovery lists for this module, and until when.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    cached: tokio::sync::Mutex<Option<(Instant, HashSet<String>)>>,
}

impl Membership {
    /// The module's live instances, at most 1 s old.
    pub(crate) async fn current(&self, shared: &Shared) -> Result<HashSet<String>, CallError> {
        let mut cached = self.cached.lock().await;
        if let Some((until, ids)) = &*cached
            && Instant::now() < *until
        {
            return Ok(ids.clone());
        }
        let ids: HashSet<String> = shared
            .links
            .discovery
            .get_module(&shared.links.module_id, shared.links.contract_major)
            .await?
            .into_iter()
            .map(|i| i.instance_id)
            .collect();
        *cached = Some((
            Instant::now() + Duration::from_secs_f64(wire::MEMBERSHIP_SECS),
            ids.clone(),
        ));
        Ok(ids)
    }
}

/// The invocation `data` describes, events after `after`.
pub(super) async fn view(
    shared: &Shared,
    data: &Data,
    after: u64,
) -> Result<apb::Invocation, CallError> {
    let members = shared.membership.current(shared).await?;
    let last = u64::try_from(record::last_sequence(data)).unwrap_or(0);
    let key = wire::invocation_key(
        &record::text(data, field::AGENT_NAME),
        &record::text(data, field::INVOCATION_ID),
    );
    let mut events = Vec::new();
    if record::int(data, field::OUTPUT_FORMAT) == i64::from(wire::OUTPUT_FORMAT) {
        let first = after + 1;
        let end = last.min(after.saturating_add(wire::MAX_VIEW_EVENTS as u64));
        for sequence in first..=end {
            let manifest = shared
                .documents()
                .get(
                    &shared.collections.events,
                    &wire::manifest_id(&key, sequence),
                )
                .await?;
            events.push(event(
                sequence,
                &manifest.data,
                String::new(),
                record::int(&manifest.data, field::PARTS),
            ));
        }
    } else if let Some(Value::List(stored)) = data.get(field::EVENTS) {
        // A record of the first output format keeps its events inline.
        for (i, e) in stored
            .iter()
            .enumerate()
            .skip(after as usize)
            .take(wire::MAX_VIEW_EVENTS)
        {
            if let Value::Object(e) = e {
                events.push(event(i as u64 + 1, e, record::text(e, field::DATA), 0));
            }
        }
    }
    let status = record::status(data);
    let shown = if is_terminal(&status) && shared.runs.contains(&key) {
        wire::FINALIZING.to_owned()
    } else {
        status
    };
    let owner = record::text(data, field::OWNER);
    Ok(apb::Invocation {
        invocation_id: record::text(data, field::INVOCATION_ID),
        thread_id: record::text(data, field::THREAD_ID),
        status: shown,
        result: record::text(data, field::RESULT),
        error_code: record::text(data, field::ERROR_CODE),
        error_message: record::text(data, field::ERROR_MESSAGE),
        owner_available: members.contains(&owner),
        owner_instance_id: owner,
        events,
        last_sequence: last,
        result_parts: u32::try_from(record::int(data, field::RESULT_PARTS)).unwrap_or(0),
    })
}

fn event(sequence: u64, stored: &Data, data: String, parts: i64) -> apb::AgentEvent {
    apb::AgentEvent {
        sequence,
        event: record::text(stored, field::EVENT),
        data,
        parts: u32::try_from(parts).unwrap_or(0),
        chat_source: (stored.get(field::CHAT_SOURCE) == Some(&Value::Bool(false))).then_some(false),
    }
}
