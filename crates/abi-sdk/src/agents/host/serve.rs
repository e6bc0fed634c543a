//! The subscriptions: four plain subscriptions per agent (no queue group:
//! the subjects name this instance), each message handled in its own task,
//! at most `max_concurrency` at once. A request beyond that is answered
//! `AGENT_BUSY` at once: the reference's `ConcurrentCalls` stops reading the
//! subscription instead, so requests pile in the client's buffer until a
//! slow-consumer drop loses them silently and their callers time out.

use std::sync::Arc;
use std::time::Duration;

use abi_proto::common::v1 as common;
use abi_wire::agents::{self as wire, Operation};
use async_nats::Message;
use futures::StreamExt as _;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use super::{AgentHostError, Shared, ops};

/// How long a closing host keeps answering what was delivered before its
/// unsubscription took effect.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Subscribes every agent's four subjects, confirmed by the broker; returns
/// the loops (they end once the host stops and the buffers are answered).
pub(super) async fn subscribe(
    shared: &Arc<Shared>,
) -> Result<Vec<tokio::task::JoinHandle<()>>, AgentHostError> {
    let slots = Arc::new(Semaphore::new(shared.options.max_concurrency.max(1)));
    let mut subscribers = Vec::new();
    let mut names: Vec<&String> = shared.handlers.keys().collect();
    names.sort();
    for name in names {
        for op in Operation::ALL {
            let subject = wire::subject(&shared.links.project, shared.instance_id(), name, op);
            let sub = shared
                .links
                .nats
                .subscribe(subject)
                .await
                .map_err(|e| AgentHostError::Nats(e.to_string()))?;
            subscribers.push((name.clone(), op, sub));
        }
    }
    // Announced only once the server processed the SUBs.
    shared
        .links
        .nats
        .flush()
        .await
        .map_err(|e| AgentHostError::Nats(e.to_string()))?;
    Ok(subscribers
        .into_iter()
        .map(|(name, op, sub)| {
            tokio::spawn(serve_one(shared.clone(), slots.clone(), name, op, sub))
        })
        .collect())
}

async fn serve_one(
    shared: Arc<Shared>,
    slots: Arc<Semaphore>,
    name: String,
    op: Operation,
    mut sub: async_nats::Subscriber,
) {
    loop {
        let msg = tokio::select! {
            biased;
            () = shared.stop.cancelled() => break,
            msg = sub.next() => msg,
        };
        match msg {
            Some(msg) => dispatch(&shared, &slots, &name, op, msg).await,
            None => return,
        }
    }
    if let Err(err) = sub.drain().await {
        warn!(error = %err, "could not drain an agent subscription");
        return;
    }
    let deadline = tokio::time::Instant::now() + DRAIN_GRACE;
    while let Ok(Some(msg)) = tokio::time::timeout_at(deadline, sub.next()).await {
        dispatch(&shared, &slots, &name, op, msg).await;
    }
}

async fn dispatch(
    shared: &Arc<Shared>,
    slots: &Arc<Semaphore>,
    name: &str,
    op: Operation,
    msg: Message,
) {
    let Ok(permit) = slots.clone().try_acquire_owned() else {
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
        ops::reply(shared, &msg, ops::refusal(op, error)).await;
        return;
    };
    let (shared2, name) = (shared.clone(), name.to_owned());
    shared.calls.spawn(async move {
        ops::handle(&shared2, &name, op, msg).await;
        drop(permit);
    });
}
