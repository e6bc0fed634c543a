//! [`ModelHost`]: serves a module's chat models on the reference's subjects
//! (`abi.mod.<project>.<instance>.model.<name>.chat`), one route per model on
//! the host kit's request loop, plugged into the runner as a [`ServedHost`].
//!
//! Beyond the reference:
//! - **Never blocks the subscription** (weakness 16). At most
//!   `max_concurrency` chats run at once (64); up to `queue` more wait for a
//!   slot in their own task; a chat beyond both is answered at once with
//!   `RESOURCE_EXHAUSTED` ("Model host is busy"), which the SDK caller takes
//!   as "try another replica". The reference awaits a slot inside the
//!   subscription callback, so requests pile up in the client's buffer and a
//!   slow consumer drops them silently.
//! - **Authorization remembered for 5 s** per (caller token, model), while
//!   the provider's READY status is checked on every chat ([`authorize`]).
//! - **Drain answers what it started**: a drain refuses new chats
//!   (`MODULE_UNAVAILABLE` "Model is draining", so callers go to another
//!   replica) and waits for the chats in flight, which are answered; close
//!   answers any still going `UNAVAILABLE` ("Model host closed before the
//!   chat finished": the handler may have run, so callers do not resend it)
//!   before it stops them. The reference cancels them without a reply.

mod authorize;
mod chat;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use abi_wire::ErrorCode;
use abi_wire::models::{CHAT_KIND, DEFAULT_MAX_CONCURRENCY, chat_subject};
use async_nats::Message;
use futures::future::BoxFuture;
use prost::Message as _;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use self::authorize::Grants;
use self::chat::{Incoming, Refusal};
use super::spec::{ChatHandler, ChatModelSpec, DeclareError, DeclareErrorKind};
use abi_sdk_core::BoxError;
use abi_sdk_core::DiscoveryClient;
use abi_sdk_core::SessionHandle;
use abi_sdk_core::host::serve::{Handler, OnStop, Overload, RequestLoop, Route};
use abi_sdk_core::host::stopping::Stopping;
use abi_sdk_core::host::{self, Host, ServedHost};

/// Chats that may wait for a free slot beyond the running ones, by default.
pub const DEFAULT_QUEUE: usize = 256;

/// The host's name in logs and errors.
const HOST_NAME: &str = "models";

/// How long close waits for the answers of the chats it stopped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Serves chat models. Build it, then hand it to the module with
/// [`abi_sdk_core::ModuleSpec::serve`]:
///
/// ```no_run
/// use std::sync::Arc;
/// use abi_models::{ChatInput, ChatMessage, ChatModelSpec, ModelHost};
///
/// # fn f() -> Result<(), abi_models::DeclareError> {
/// let host = ModelHost::new().model(
///     ChatModelSpec::new("echo")?.description("says it back"),
///     |input: ChatInput| async move {
///         let last = input.messages.last().map(|m| m.content_text()).unwrap_or_default();
///         Ok(ChatMessage::ai(last))
///     },
/// )?;
/// let spec = abi_sdk_core::ModuleSpec::new("provider").serve(Arc::new(host));
/// # let _ = spec; Ok(()) }
/// ```
#[derive(Clone)]
pub struct ModelHost {
    models: BTreeMap<String, Served>,
    max_concurrency: usize,
    queue: usize,
}

/// A model host bound to a running module: it serves once started.
struct BoundModelHost {
    shared: Arc<Shared>,
}

/// What the chats of one host share.
pub(crate) struct Shared {
    models: BTreeMap<String, Served>,
    links: Links,
    /// Drain refuses new chats; close also answers those still going.
    stopping: Stopping,
    /// The subscriptions, admitting running and waiting chats.
    requests: Arc<RequestLoop>,
    /// Chats running at once.
    running: Arc<Semaphore>,
    grants: Grants,
}

#[derive(Clone)]
struct Served {
    spec: ChatModelSpec,
    handler: Arc<dyn ChatHandler>,
}

/// What the host takes from the running module.
pub(crate) struct Links {
    nats: async_nats::Client,
    pub(crate) discovery: DiscoveryClient,
    pub(crate) session: SessionHandle,
}

impl std::fmt::Debug for ModelHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelHost")
            .field("models", &self.models.keys().collect::<Vec<_>>())
            .field("max_concurrency", &self.max_concurrency)
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl Default for ModelHost {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelHost {
    /// A host serving no model yet, running [`DEFAULT_MAX_CONCURRENCY`] chats
    /// at once with [`DEFAULT_QUEUE`] more waiting.
    pub fn new() -> Self {
        Self {
            models: BTreeMap::new(),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            queue: DEFAULT_QUEUE,
        }
    }

    /// Serves the chat model `spec` with `handler`.
    ///
    /// # Errors
    ///
    /// [`DeclareErrorKind::Duplicate`] when a model of that name is served
    /// already (names are checked by [`ChatModelSpec::new`]).
    pub fn model(
        mut self,
        spec: ChatModelSpec,
        handler: impl ChatHandler,
    ) -> Result<Self, DeclareError> {
        let name = spec.name().to_owned();
        if self.models.contains_key(&name) {
            return Err(DeclareError::new(
                DeclareErrorKind::Duplicate,
                format!("chat model {name:?} is declared twice"),
            ));
        }
        self.models.insert(
            name,
            Served {
                spec,
                handler: Arc::new(handler),
            },
        );
        Ok(self)
    }

    /// Chats run at once, at least one (default [`DEFAULT_MAX_CONCURRENCY`]).
    #[must_use]
    pub fn max_concurrency(mut self, limit: usize) -> Self {
        self.max_concurrency = limit.max(1);
        self
    }

    /// Chats that may wait for a slot beyond the running ones (default
    /// [`DEFAULT_QUEUE`]); one more is answered `RESOURCE_EXHAUSTED`.
    #[must_use]
    pub fn queue(mut self, waiting: usize) -> Self {
        self.queue = waiting;
        self
    }

    /// The declared models, as the descriptor carries them.
    pub fn descriptors(&self) -> Vec<pb::ModelDescriptor> {
        self.models
            .values()
            .map(|m| pb::ModelDescriptor {
                name: m.spec.name().to_owned(),
                description: m.spec.description_text().to_owned(),
                kind: CHAT_KIND.to_owned(),
            })
            .collect()
    }

    /// A running host of these models over `links`.
    fn bind_links(&self, links: &host::Links) -> BoundModelHost {
        let shared = Shared {
            models: self.models.clone(),
            links: Links {
                nats: links.nats().clone(),
                discovery: links.discovery().clone(),
                session: links.session().clone(),
            },
            stopping: Stopping::new(),
            // Admitted: running or waiting for a running slot.
            requests: Arc::new(RequestLoop::new(
                self.max_concurrency + self.queue,
                OnStop::Unsubscribe,
            )),
            running: Arc::new(Semaphore::new(self.max_concurrency)),
            grants: Grants::default(),
        };
        BoundModelHost {
            shared: Arc::new(shared),
        }
    }
}

impl BoundModelHost {
    /// Subscribes every model's subject, confirmed by the broker (the
    /// reference's `flush_to_broker`), and starts serving them.
    async fn start_serving(&self) -> Result<(), BoxError> {
        let shared = &self.shared;
        let links = &shared.links;
        let project = links.discovery.project().to_owned();
        let instance_id = links.session.instance_id().to_owned();
        let routes = shared
            .models
            .keys()
            .map(|name| Route {
                subject: chat_subject(&project, &instance_id, name),
                handle: chat(shared, name),
                overload: Overload::Shed(busy(shared)),
            })
            .collect();
        shared.requests.start(&links.nats, routes).await?;
        info!(models = shared.models.len(), instance_id = %instance_id, "model host started");
        Ok(())
    }

    /// Refuses new chats and waits up to `timeout` for those in flight.
    async fn drain_within(&self, timeout: Duration) {
        self.shared.stopping.stop_accepting();
        if tokio::time::timeout(timeout, self.shared.requests.settled())
            .await
            .is_err()
        {
            warn!(
                chats = self.shared.requests.in_flight(),
                "chats still going at the end of the drain"
            );
        }
    }

    /// Unsubscribes, answers the chats still going, and stops them, by
    /// `deadline` (the answers get at most their close grace).
    async fn close_by(&self, deadline: Instant) {
        self.shared.stopping.close();
        let answers_until = deadline.min(Instant::now() + CLOSE_GRACE);
        self.shared.requests.close(answers_until).await;
    }
}

impl Shared {
    pub(crate) fn links(&self) -> &Links {
        &self.links
    }

    pub(crate) fn is_draining(&self) -> bool {
        !self.stopping.accepting()
    }

    pub(crate) fn handler(&self, name: &str) -> Option<Arc<dyn ChatHandler>> {
        self.models.get(name).map(|m| m.handler.clone())
    }
}

/// One model's chats: each admitted chat waits for a running slot in its
/// own task and is answered, or answered `UNAVAILABLE` if the host closes
/// first.
fn chat(shared: &Arc<Shared>, name: &str) -> Handler {
    let (shared, name) = (shared.clone(), name.to_owned());
    Arc::new(move |msg: Message| {
        let (shared, name) = (shared.clone(), name.clone());
        Box::pin(async move {
            let Some(reply_to) = msg.reply.clone() else {
                debug!(model = %name, "chat without a reply subject dropped");
                return;
            };
            let response = tokio::select! {
                biased;
                () = shared.stopping.closed() => {
                    // Not MODULE_UNAVAILABLE: the handler may have run, so the
                    // caller must not send the chat elsewhere on its own.
                    Refusal::rpc(ErrorCode::Unavailable, "Model host closed before the chat finished")
                        .into_response()
                }
                response = run(&shared, &name, &msg, &shared.running) => response,
            };
            send(&shared, &reply_to, response).await;
        })
    })
}

/// A chat beyond the running and waiting ones: `RESOURCE_EXHAUSTED` at once.
fn busy(shared: &Arc<Shared>) -> Handler {
    let shared = shared.clone();
    Arc::new(move |msg: Message| {
        let shared = shared.clone();
        Box::pin(async move {
            if let Some(reply_to) = &msg.reply {
                let busy = Refusal::rpc(ErrorCode::ResourceExhausted, "Model host is busy");
                send(&shared, reply_to, busy.into_response()).await;
            }
        })
    })
}

/// Waits for a slot, then answers the chat.
async fn run(
    shared: &Shared,
    name: &str,
    msg: &async_nats::Message,
    running: &Semaphore,
) -> abi_proto::model_registry::v1::ChatResponse {
    let Ok(_slot) = running.acquire().await else {
        return Refusal::failed().into_response();
    };
    let Some(served) = shared.models.get(name) else {
        return Refusal::failed().into_response();
    };
    let headers = msg.headers.as_ref();
    let incoming = Incoming {
        payload: &msg.payload,
        overflowed: headers
            .and_then(|h| h.get(abi_wire::overflow::REQUEST_HEADER))
            .is_some(),
        caller_token: headers
            .and_then(|h| h.get(abi_wire::AUTH_HEADER))
            .map(|v| v.as_str())
            .unwrap_or(""),
    };
    chat::answer(shared, &served.spec, incoming).await
}

/// Publishes `response` to `reply_to`, without headers; an answer above the
/// broker's limit becomes `PAYLOAD_TOO_LARGE`.
async fn send(
    shared: &Shared,
    reply_to: &async_nats::Subject,
    response: abi_proto::model_registry::v1::ChatResponse,
) {
    let links = shared.links();
    let mut bytes = response.encode_to_vec();
    let limit = links.nats.max_payload();
    if bytes.len() > limit {
        bytes = Refusal::rpc(
            ErrorCode::PayloadTooLarge,
            "Model reply exceeds the broker limit",
        )
        .into_response()
        .encode_to_vec();
    }
    if let Err(err) = links.nats.publish(reply_to.clone(), bytes.into()).await {
        warn!(error = %err, "chat answer not sent");
    }
}

impl Host for BoundModelHost {
    fn name(&self) -> &str {
        HOST_NAME
    }

    fn start(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(self.start_serving())
    }

    fn drain(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            self.drain_within(timeout).await;
            Ok(())
        })
    }

    fn close(&self, deadline: Instant) -> BoxFuture<'_, ()> {
        Box::pin(self.close_by(deadline))
    }
}

impl ServedHost for ModelHost {
    fn name(&self) -> &str {
        HOST_NAME
    }

    fn declare(&self, descriptor: &mut pb::ModuleDescriptor) {
        for model in self.descriptors() {
            if !descriptor.models.iter().any(|m| m.name == model.name) {
                descriptor.models.push(model);
            }
        }
    }

    fn bind(&self, links: &host::Links) -> Arc<dyn Host> {
        Arc::new(self.bind_links(links))
    }
}
