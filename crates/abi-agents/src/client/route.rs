//! Where a call goes, and the call itself. A submit goes to a READY replica
//! declaring the agent, starting at a rotating position (the reference
//! always takes the lowest instance id), skipping replicas that answered
//! `AGENT_BUSY` in the last few seconds, and moving on to the next replica
//! on `AGENT_BUSY` (full) or `MODULE_UNAVAILABLE` (draining, not READY): such
//! a host creates nothing before it refuses, so the submit is safe to send
//! elsewhere. Other calls go to the
//! run's owner when it is registered, else to any replica (which reads the
//! shared record). The instance list is cached 1 s for every call, submits
//! included (the reference caches it for non-submit calls only and asks
//! discovery on every submit).

use abi_wire::ErrorCode;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use abi_proto::agent::v1 as apb;
use abi_proto::common::v1 as common;
use abi_proto::discovery::v1 as pb;
use abi_wire::agents::{self as wire, Operation};
use abi_wire::rpc::Reply;
use prost::Message;

use super::AgentClient;
use abi_sdk_core::Status;
use abi_sdk_core::{CallError, CallErrorKind, ids};

/// How long a replica that answered `AGENT_BUSY` gets no new submits.
const BUSY_AVOID: Duration = Duration::from_secs(10);
/// How long the instance list is reused for non-submit calls.
const INSTANCES_CACHE: Duration = Duration::from_secs(1);

/// The routing state clones of one client share.
#[derive(Debug)]
pub(crate) struct Route {
    next: AtomicUsize,
    instances: Mutex<Option<(Instant, Vec<pb::Instance>)>>,
    busy: Mutex<HashMap<String, Instant>>,
}

impl Default for Route {
    fn default() -> Self {
        Self {
            // A random start, so that many callers do not all begin with
            // the same replica.
            next: AtomicUsize::new(rand::random::<u32>() as usize),
            instances: Mutex::new(None),
            busy: Mutex::new(HashMap::new()),
        }
    }
}

impl Route {
    fn mark_busy(&self, instance_id: &str) {
        if let Ok(mut busy) = self.busy.lock() {
            busy.insert(instance_id.to_owned(), Instant::now() + BUSY_AVOID);
        }
    }

    fn is_busy(&self, instance_id: &str) -> bool {
        self.busy.lock().is_ok_and(|mut busy| {
            busy.retain(|_, until| *until > Instant::now());
            busy.contains_key(instance_id)
        })
    }

    fn forget_instances(&self) {
        if let Ok(mut i) = self.instances.lock() {
            *i = None;
        }
    }
}

/// The instances declaring `client`'s agent invocable at its major.
fn eligible(client: &AgentClient, instances: Vec<pb::Instance>) -> Vec<pb::Instance> {
    instances
        .into_iter()
        .filter(|i| {
            i.descriptor.as_ref().is_some_and(|d| {
                d.agents.iter().any(|a| {
                    a.name == client.name
                        && a.contract_major == client.contract_major
                        && a.capabilities.iter().any(|c| c == wire::INVOKE_CAPABILITY)
                })
            })
        })
        .collect()
}

fn unavailable(client: &AgentClient) -> CallError {
    CallError::new(CallErrorKind::AgentUnavailable, client.name.clone())
        .with_code(ErrorCode::AgentUnavailable.as_str())
}

/// Submits to a READY replica, the next one on `AGENT_BUSY`.
///
/// The instance list is the one cached for [`INSTANCES_CACHE`] (as a chat
/// model's route list), so a steady caller asks discovery about once a
/// second, not once per submit. A refusal drops the cache; when every
/// replica of a cached list refused in a way that created nothing (busy,
/// not READY any more, or gone), the submit goes once more over a fresh list.
pub(super) async fn submit(
    client: &AgentClient,
    request: apb::SubmitRequest,
) -> Result<apb::SubmitResponse, CallError> {
    let payload = request.encode_to_vec();
    let mut tried = Vec::new();
    let mut last = None;
    for fresh in [false, true] {
        let (listed, cached) = match instances(client, fresh).await {
            Ok(listed) => listed,
            Err(e) if e.kind() == CallErrorKind::ModuleUnavailable => {
                return Err(unavailable(client));
            }
            Err(e) => return Err(e),
        };
        let ready = listed
            .into_iter()
            .filter(|i| Status::parse(&i.status) == Status::Ready)
            .collect();
        let mut candidates = eligible(client, ready);
        candidates.retain(|i| !tried.contains(&i.instance_id));
        if candidates.is_empty() {
            if cached {
                continue;
            }
            break;
        }
        candidates.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
        let start = client.route.next.fetch_add(1, Ordering::Relaxed) % candidates.len();
        candidates.rotate_left(start);
        // Replicas that refused lately go last, not never: they may be all there is.
        candidates.sort_by_key(|i| client.route.is_busy(&i.instance_id));
        for target in &candidates {
            tried.push(target.instance_id.clone());
            match call::<apb::SubmitResponse>(
                client,
                Operation::Submit,
                &target.instance_id,
                payload.clone(),
            )
            .await
            {
                Err(e) if e.kind() == CallErrorKind::AgentBusy => {
                    client.route.forget_instances();
                    client.route.mark_busy(&target.instance_id);
                    last = Some(e);
                }
                // Refused before anything was created (a provider no
                // longer READY): safe elsewhere.
                Err(e) if e.kind() == CallErrorKind::ModuleUnavailable => {
                    client.route.forget_instances();
                    last = Some(e);
                }
                // Never delivered: safe elsewhere, and worth saying which
                // registered instance does not answer.
                Err(e) if e.kind() == CallErrorKind::NoResponders => {
                    client.route.forget_instances();
                    let id = &target.instance_id;
                    last = Some(e.with_message(format!(
                        "instance {id} of {} is registered but nothing answers on its agent subjects \
                         (its process is gone?); nothing was submitted. Its lease expires on its own, \
                         or `abictl evict {id}` removes it now",
                        client.proxy.module_id()
                    )));
                }
                Err(e) => {
                    client.route.forget_instances();
                    return Err(e);
                }
                ok => return ok,
            }
        }
        if !cached {
            break;
        }
    }
    Err(last.unwrap_or_else(|| unavailable(client)))
}

/// The instance list, from the cache unless `fresh` or expired, and
/// whether it came from the cache.
async fn instances(
    client: &AgentClient,
    fresh: bool,
) -> Result<(Vec<pb::Instance>, bool), CallError> {
    if !fresh {
        let cached = client.route.instances.lock().ok().and_then(|i| {
            i.as_ref()
                .filter(|(until, _)| Instant::now() < *until)
                .map(|(_, l)| l.clone())
        });
        if let Some(list) = cached {
            return Ok((list, true));
        }
    }
    let list = client.proxy.instances().await?;
    if let Ok(mut i) = client.route.instances.lock() {
        *i = Some((Instant::now() + INSTANCES_CACHE, list.clone()));
    }
    Ok((list, false))
}

/// Sends a non-submit call to `owner` when it is eligible, else (or when
/// nobody serves the owner's subject any more) to the other eligible
/// instances in turn.
pub(super) async fn to_owner<Resp: Message + Default + Reply>(
    client: &AgentClient,
    op: Operation,
    owner: &str,
    payload: Vec<u8>,
) -> Result<Resp, CallError> {
    let (instances, _) = instances(client, false).await?;
    let mut eligible = eligible(client, instances);
    if eligible.is_empty() {
        return Err(unavailable(client));
    }
    eligible.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    // The owner first; the others read the same record.
    eligible.sort_by_key(|i| i.instance_id != owner);
    let mut last = None;
    for target in &eligible {
        match call::<Resp>(client, op, &target.instance_id, payload.clone()).await {
            // Nothing was delivered (an owner that just stopped serving):
            // another replica answers from the shared record.
            Err(e) if e.kind() == CallErrorKind::NoResponders => {
                client.route.forget_instances();
                last = Some(e);
            }
            Err(e) => {
                client.route.forget_instances();
                return Err(e);
            }
            ok => return ok,
        }
    }
    Err(last.unwrap_or_else(|| unavailable(client)))
}

/// One request to `instance_id`, with a token bound to it.
async fn call<Resp: Message + Default + Reply>(
    client: &AgentClient,
    op: Operation,
    instance_id: &str,
    payload: Vec<u8>,
) -> Result<Resp, CallError> {
    let discovery = client.proxy.client();
    let Some(nats) = discovery.nats() else {
        return Err(CallError::new(
            CallErrorKind::NoResponders,
            "agents are called over NATS only",
        ));
    };
    let subject = wire::subject(discovery.project(), instance_id, &client.name, op);
    let token = match &client.signer {
        Some(sign) => sign(instance_id)?,
        None => discovery.token().for_audience(instance_id)?,
    };
    let response: Resp = abi_sdk_core::instance_call::call_instance(
        nats,
        &subject,
        &token,
        payload.into(),
        client.request_timeout,
    )
    .await?;
    if let Some(error) = response.call_error() {
        return Err(
            CallError::new(CallErrorKind::from_code(&error.code), error.message.clone())
                .with_code(error.code.clone()),
        );
    }
    Ok(response)
}

/// A fresh call envelope, as the reference's transport sets it.
pub(super) fn context(client: &AgentClient) -> Option<common::CallContext> {
    Some(common::CallContext {
        trace_id: ids::uuid4(),
        timeout_ms: i32::try_from(client.request_timeout.as_millis()).unwrap_or(i32::MAX),
        ..Default::default()
    })
}
