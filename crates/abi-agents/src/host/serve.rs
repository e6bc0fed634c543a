//! The agent subscriptions: four plain subscriptions per agent (no queue
//! group: the subjects name this instance) served by the host kit's
//! [`RequestLoop`], each request in its own task, at most `max_concurrency`
//! at once. A request beyond that is answered `AGENT_BUSY` at once
//! ([`Overload::Shed`]): the reference's `ConcurrentCalls` stops reading the
//! subscription instead, so requests pile in the client's buffer until a
//! slow-consumer drop loses them silently and their callers time out.

use std::sync::Arc;
use std::time::Duration;

use abi_proto::common::v1 as common;
use abi_wire::agents::{self as wire, Operation};
use async_nats::Message;
use tracing::debug;

use super::{AgentHostError, Shared, ops};
use abi_sdk_core::host::serve::{Handler, OnStop, Overload, RequestLoop, Route};

/// How long a closing host keeps answering what was delivered before its
/// unsubscription took effect.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// The loop an agent host serves through.
pub(super) fn request_loop(max_concurrency: usize) -> RequestLoop {
    RequestLoop::new(max_concurrency, OnStop::Drain(DRAIN_GRACE))
}

/// Subscribes every agent's four subjects, confirmed by the broker, and
/// starts serving them.
pub(super) async fn subscribe(shared: &Arc<Shared>) -> Result<(), AgentHostError> {
    let mut names: Vec<&String> = shared.handlers.keys().collect();
    names.sort();
    let mut routes = Vec::new();
    for name in names {
        for op in Operation::ALL {
            routes.push(Route {
                subject: wire::subject(&shared.links.project, shared.instance_id(), name, op),
                handle: handler(shared, name, op),
                overload: Overload::Shed(busy(shared, op)),
            });
        }
    }
    shared
        .requests
        .start(&shared.links.nats, routes)
        .await
        .map_err(|e| AgentHostError::Nats(e.to_string()))
}

/// One operation of one agent.
fn handler(shared: &Arc<Shared>, name: &str, op: Operation) -> Handler {
    let (shared, name) = (shared.clone(), name.to_owned());
    Arc::new(move |msg: Message| {
        let (shared, name) = (shared.clone(), name.clone());
        Box::pin(async move { ops::handle(&shared, &name, op, msg).await })
    })
}

/// `AGENT_BUSY`, in the answer type of `op`.
fn busy(shared: &Arc<Shared>, op: Operation) -> Handler {
    let shared = shared.clone();
    Arc::new(move |msg: Message| {
        let shared = shared.clone();
        Box::pin(async move {
            debug!(
                op = op.as_str(),
                "agent host at call capacity; answering AGENT_BUSY"
            );
            let code = abi_wire::ErrorCode::AgentBusy.as_str();
            let error = common::CallError {
                code: code.into(),
                message: format!("{code}: Provider is at call capacity"),
                ..Default::default()
            };
            ops::reply(&shared, &msg, ops::refusal(op, error)).await;
        })
    })
}
