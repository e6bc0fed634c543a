//! The NATS side: the micro service `document` with one endpoint per
//! operation (queue group `q`, as the reference's `nats.micro` service, so a
//! Python and a Rust server share the load), each request handled in its own
//! task under a concurrency limit, the reply sent with the refusal's code in
//! the `Abi-Error-Code` header, and a drain on shutdown that answers every
//! request the broker routed here.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument as _;

use abi_document_model::{Decided, DocumentStore};
use abi_overflow::{OverflowHost, frame};
use abi_wire::AUTH_HEADER;
use abi_wire::documents::{self, ERROR_CODE_HEADER, Operation};
use async_nats::connection::State;
use async_nats::service::{Request as ServiceRequest, ServiceExt as _};
use async_nats::{Client, HeaderMap};
use futures::StreamExt as _;
use prost::Message as _;
use tokio::sync::{Semaphore, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::handler::{self, Answer, Handler, Request};
use super::metrics::Metrics;
use super::outbox::Outbox;

/// How the endpoints run.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Requests handled at once; more wait in the client's buffer.
    pub max_concurrent_requests: usize,
    /// Time to answer the requests received once asked to stop.
    pub shutdown_grace: Duration,
}

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The micro service or an endpoint could not be added.
    #[error("could not start the document endpoints: {0}")]
    Start(String),
    /// Requests were still being handled when the grace period ended.
    #[error("{0} requests were still being handled when the grace period ended")]
    GraceExceeded(usize),
}

/// Serves `handler` on NATS until `shutdown` is cancelled, then drains: the
/// endpoints stop taking requests (the broker confirms), the requests already
/// received are answered, and the replies flushed, within the grace period.
///
/// # Errors
///
/// [`ServeError::Start`] if the endpoints could not be subscribed;
/// [`ServeError::GraceExceeded`] if requests were still running at the end of
/// the grace period (they are abandoned).
///
/// # Cancel safety
///
/// Not cancel safe: dropping it skips the drain and the flush; cancel `shutdown` instead.
pub async fn serve<S: DocumentStore>(
    client: Client,
    handler: Arc<Handler<S>>,
    metrics: Arc<Metrics>,
    config: ServeConfig,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let service = client
        .service_builder()
        .description(documents::SERVICE_DESCRIPTION)
        .start(documents::SERVICE_NAME, documents::SERVICE_VERSION)
        .await
        .map_err(|e| ServeError::Start(e.to_string()))?;
    let permits = Arc::new(Semaphore::new(config.max_concurrent_requests.max(1)));
    let outbox = Arc::new(Outbox::default());
    let tracker = TaskTracker::new();
    let mut loops = Vec::new();
    for operation in Operation::SERVED {
        let endpoint = service
            .endpoint_builder()
            .name(operation.as_str())
            .add(documents::operation(operation))
            .await
            .map_err(|e| ServeError::Start(e.to_string()))?;
        loops.push(tokio::spawn(request_loop(
            operation,
            endpoint,
            Worker {
                client: client.clone(),
                handler: handler.clone(),
                metrics: metrics.clone(),
                outbox: outbox.clone(),
            },
            permits.clone(),
            tracker.clone(),
            shutdown.clone(),
        )));
    }
    // The subscriptions are announced only once written to the broker
    // (async-nats' flush empties the socket's buffer; it does not wait for
    // the broker's answer, so a caller on another connection may still, for
    // a moment, find nobody: the SDK resends such calls).
    if let Err(error) = client.flush().await {
        tracing::warn!(%error, "could not write the endpoints' subscriptions");
    }
    tracing::info!(endpoints = loops.len(), "document service serving");
    shutdown.cancelled().await;
    let deadline = Instant::now() + config.shutdown_grace;
    // Without a connection no drain can be confirmed and no reply sent:
    // the loops stop at once, the requests already taken still finish
    // (their writes are durable before they answer).
    let connected = client.connection_state() == State::Connected;
    for mut handle in loops {
        if !connected {
            handle.abort();
            continue;
        }
        // A loop ends once its endpoint drained; a panic was already logged.
        if tokio::time::timeout_at(deadline.into(), &mut handle)
            .await
            .is_err()
        {
            tracing::warn!("an endpoint did not drain within the grace period");
            handle.abort();
        }
    }
    if !connected {
        tracing::warn!("NATS is unreachable: stopping without draining the endpoints");
    }
    tracker.close();
    let finished = tokio::time::timeout_at(deadline.into(), tracker.wait())
        .await
        .is_ok();
    let running = tracker.len();
    // Both talk to the broker: bounded, so a broker gone meanwhile cannot
    // hold the process past its grace.
    let settle = deadline.max(Instant::now() + SETTLE_MIN);
    if connected {
        match tokio::time::timeout_at(settle.into(), service.stop()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "could not stop the micro service"),
            Err(_) => tracing::warn!("the micro service did not stop in time"),
        }
        match tokio::time::timeout_at(settle.into(), client.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "could not flush the last replies"),
            Err(_) => tracing::warn!("the last replies were not flushed in time"),
        }
    }
    if finished {
        Ok(())
    } else {
        Err(ServeError::GraceExceeded(running))
    }
}

/// The least time kept for stopping the micro service and flushing the last
/// replies once the requests are answered, even past the grace.
const SETTLE_MIN: Duration = Duration::from_millis(500);

/// What a request task needs.
struct Worker<S> {
    client: Client,
    handler: Arc<Handler<S>>,
    metrics: Arc<Metrics>,
    /// Where replies wait to leave together.
    outbox: Arc<Outbox<Reply>>,
}

// Not derived: a derive would ask `S: Clone`, and only the `Arc` is cloned.
impl<S> Clone for Worker<S> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            handler: self.handler.clone(),
            metrics: self.metrics.clone(),
            outbox: self.outbox.clone(),
        }
    }
}

async fn request_loop<S: DocumentStore>(
    operation: Operation,
    mut endpoint: async_nats::service::endpoint::Endpoint,
    worker: Worker<S>,
    permits: Arc<Semaphore>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let mut draining = false;
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled(), if !draining => {
                draining = true;
                if let Err(error) = endpoint.drain().await {
                    tracing::warn!(endpoint = operation.as_str(), %error, "could not drain");
                    break;
                }
            }
            next = endpoint.next() => {
                let Some(request) = next else { break };
                // Waiting for a permit here leaves later requests in the
                // client's buffer: the concurrency limit is backpressure.
                let Ok(permit) = permits.clone().acquire_owned().await else { break };
                let worker = worker.clone();
                // The reference's SERVER span `document/<operation>`,
                // continuing the caller's trace.
                let span = abi_process::traces::server_span(
                    abi_process::traces::Kind::Server,
                    &request.message.subject,
                    None,
                    request.message.headers.as_ref(),
                );
                // Boxed: the answer's future is several KiB, and a task
                // holding it inline copies it whole when spawned, when
                // placed in its cell and when finished.
                tracker.spawn(Box::pin(
                    async move {
                        worker.answer(operation, request).await;
                        drop(permit);
                    }
                    .instrument(span),
                ));
            }
        }
    }
}

impl<S: DocumentStore> Worker<S> {
    async fn answer(&self, operation: Operation, request: ServiceRequest) {
        let started = Instant::now();
        if request.message.reply.is_none() {
            // Nobody could learn the outcome: do not carry it out.
            self.metrics.no_reply(operation);
            return;
        }
        let headers = request.message.headers.as_ref();
        let token = headers.and_then(|h| frame::header_value(h, AUTH_HEADER));
        let overflow = self
            .handler
            .overflow()
            .filter(|_| frame::accepts_overflow(headers));
        let max_payload = self.client.max_payload();
        let (decided, told) = match early_word(operation, headers) {
            Some((decided, told)) => (Some(decided), Some(told)),
            None => (None, None),
        };
        let mut answer = {
            // Pinned here and lent to `answer_telling`, so the task holds
            // one copy of the handler's future, dropped before the reply.
            let handling = std::pin::pin!(self.handler.handle(Request {
                operation,
                token,
                upload: frame::uploaded_request(headers),
                headers,
                replies_overflow: overflow.is_some(),
                body: &request.message.payload,
                max_payload: (max_payload > 0).then_some(max_payload),
                decided,
            }));
            match told {
                None => handling.await,
                Some(told) => self.answer_telling(handling, told).await,
            }
        };
        let mut reply_headers = HeaderMap::new();
        if max_payload > 0 && reply_size(&answer) > max_payload {
            let payload = std::mem::take(&mut answer.payload);
            match overflow.and_then(|host| park(host, headers, payload)) {
                Some(parked) => reply_headers = parked,
                None => answer = handler::too_large(operation),
            }
        }
        if let Some(code) = answer.code {
            reply_headers.insert(ERROR_CODE_HEADER, code.as_str());
            abi_process::traces::record_error(&tracing::Span::current(), code.as_str(), "");
        }
        // Sent with the other replies ready now (a commit answers many).
        let reply = Reply {
            request,
            payload: answer.payload,
            headers: reply_headers,
            operation,
            code: answer.code,
            started,
        };
        self.outbox
            .send(reply, async |replies| {
                for reply in replies {
                    reply.send(&self.metrics).await;
                }
            })
            .await;
    }
}

impl<S> Worker<S> {
    /// Awaits `handling`, publishing the put's early word as soon as the
    /// store tells it. A word told is always published, before the reply:
    /// a commit that fails at once may end `handling` in the same poll that
    /// first finds the word waiting.
    ///
    /// `handling` is borrowed, not moved: its future is the request task's
    /// largest, and a second copy of it here would double the task's size.
    async fn answer_telling(
        &self,
        mut handling: Pin<&mut impl Future<Output = Answer>>,
        told: Told,
    ) -> Answer {
        let Told { subject, mut word } = told;
        let answer = tokio::select! {
            biased;
            Ok(bytes) = &mut word => {
                self.tell(subject, bytes).await;
                return handling.await;
            }
            answer = &mut handling => answer,
        };
        if let Ok(bytes) = word.try_recv() {
            self.tell(subject, bytes).await;
        }
        answer
    }

    /// Publishes a put's early word.
    async fn tell(&self, subject: String, word: Vec<u8>) {
        if let Err(error) = self.client.publish(subject, word.into()).await {
            tracing::debug!(%error, "could not tell a put's decision");
        }
    }
}

/// Where a put's early word goes, once the store tells it.
struct Told {
    subject: String,
    word: oneshot::Receiver<Vec<u8>>,
}

/// For a put asking for its early word ([`documents::DECIDED_HEADER`],
/// naming a subject [`documents::is_decided_subject`] accepts), what the
/// store tells and where it goes; `None` for anything else.
fn early_word(operation: Operation, headers: Option<&HeaderMap>) -> Option<(Decided, Told)> {
    if operation != Operation::Put {
        return None;
    }
    let subject = frame::header_value(headers?, documents::DECIDED_HEADER)?;
    if !documents::is_decided_subject(subject) {
        return None;
    }
    let (tell, word) = oneshot::channel();
    let decided = Decided::new(move |document| {
        // Encoded on the store's thread: the subject's reader waits for
        // these bytes, not for the task to wake first.
        let _ = tell.send(handler::stamped_reply(document).encode_to_vec());
    });
    let told = Told {
        subject: subject.to_owned(),
        word,
    };
    Some((decided, told))
}

/// A reply waiting in the outbox.
struct Reply {
    /// The request it answers: its reply subject, and the endpoint's
    /// statistics.
    request: ServiceRequest,
    payload: Vec<u8>,
    headers: HeaderMap,
    operation: Operation,
    code: Option<abi_wire::ErrorCode>,
    /// When the request was taken.
    started: Instant,
}

impl Reply {
    /// Publishes the reply and counts it. Through the micro service, so
    /// `$SRV.STATS` counts it as the reference's `request.respond` does (a
    /// refusal is an answer with its code in the header, not a service
    /// error).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the reply may be sent without being counted.
    async fn send(self, metrics: &Metrics) {
        let sent = self
            .request
            .respond_with_headers(Ok(self.payload.into()), self.headers)
            .await;
        if let Err(error) = sent {
            tracing::warn!(endpoint = self.operation.as_str(), %error, "could not send a reply");
        }
        metrics.observe(self.operation, self.code, self.started.elapsed());
    }
}

/// Parks `payload`, a reply too large to send, for the caller of `headers`;
/// the headers of the empty reply that stands for it, `None` (logged) when
/// the host refused it.
fn park(host: &OverflowHost, headers: Option<&HeaderMap>, payload: Vec<u8>) -> Option<HeaderMap> {
    let size = payload.len();
    match host.park(headers, payload.into()) {
        Ok(id) => Some(frame::parked_headers(&id, size)),
        Err(error) => {
            tracing::warn!(%error, "could not park an overflowing reply");
            None
        }
    }
}

/// A reply's size as the broker counts it: the body and the header block.
fn reply_size(answer: &Answer) -> usize {
    let header = answer.code.map_or(0, |code| {
        // "NATS/1.0\r\n" + "Abi-Error-Code: <code>\r\n" + "\r\n"
        10 + ERROR_CODE_HEADER.len() + 2 + code.as_str().len() + 2 + 2
    });
    answer.payload.len() + header
}
