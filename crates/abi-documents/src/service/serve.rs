//! The NATS side: the micro service `document` with one endpoint per
//! operation (queue group `q`, as the reference's `nats.micro` service, so a
//! Python and a Rust server share the load), each request handled in its own
//! task under a concurrency limit, the reply sent with the refusal's code in
//! the `Abi-Error-Code` header, and a drain on shutdown that answers every
//! request the broker routed here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use abi_document_model::DocumentStore;
use abi_wire::AUTH_HEADER;
use abi_wire::documents::{self, ERROR_CODE_HEADER, OVERFLOW_REQUEST_HEADER, Operation};
use async_nats::service::{Request as ServiceRequest, ServiceExt as _};
use async_nats::{Client, HeaderMap};
use futures::StreamExt as _;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::handler::{self, Answer, Handler, Request};
use super::metrics::Metrics;

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
    let tracker = TaskTracker::new();
    let mut loops = Vec::new();
    for operation in Operation::ALL {
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
            },
            permits.clone(),
            tracker.clone(),
            shutdown.clone(),
        )));
    }
    // The subscriptions are announced only once the broker has them.
    if let Err(error) = client.flush().await {
        tracing::warn!(%error, "could not confirm the endpoints' subscriptions");
    }
    tracing::info!(endpoints = loops.len(), "document service serving");
    shutdown.cancelled().await;
    let deadline = Instant::now() + config.shutdown_grace;
    for handle in loops {
        // A loop ends once its endpoint drained; a panic was already logged.
        let left = deadline.saturating_duration_since(Instant::now());
        if tokio::time::timeout(left, handle).await.is_err() {
            tracing::warn!("an endpoint did not drain within the grace period");
        }
    }
    tracker.close();
    let left = deadline.saturating_duration_since(Instant::now());
    let finished = tokio::time::timeout(left, tracker.wait()).await.is_ok();
    let running = tracker.len();
    if let Err(error) = service.stop().await {
        tracing::warn!(%error, "could not stop the micro service");
    }
    if let Err(error) = client.flush().await {
        tracing::warn!(%error, "could not flush the last replies");
    }
    if finished {
        Ok(())
    } else {
        Err(ServeError::GraceExceeded(running))
    }
}

/// What a request task needs.
struct Worker<S> {
    client: Client,
    handler: Arc<Handler<S>>,
    metrics: Arc<Metrics>,
}

// Not derived: a derive would ask `S: Clone`, and only the `Arc` is cloned.
impl<S> Clone for Worker<S> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            handler: self.handler.clone(),
            metrics: self.metrics.clone(),
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
                tracker.spawn(async move {
                    worker.answer(operation, request).await;
                    drop(permit);
                });
            }
        }
    }
}

impl<S: DocumentStore> Worker<S> {
    async fn answer(&self, operation: Operation, request: ServiceRequest) {
        let started = Instant::now();
        let Some(reply_to) = request.message.reply.clone() else {
            // Nobody could learn the outcome: do not carry it out.
            self.metrics.no_reply(operation);
            return;
        };
        let headers = request.message.headers.as_ref();
        let token = headers.and_then(|h| h.get(AUTH_HEADER)).map(|v| v.as_str());
        let overflowed = headers
            .and_then(|h| h.get(OVERFLOW_REQUEST_HEADER))
            .is_some_and(|v| !v.as_str().is_empty());
        let max_payload = self.client.server_info().max_payload;
        let mut answer = self
            .handler
            .handle(Request {
                operation,
                token,
                overflowed,
                body: &request.message.payload,
                max_payload: (max_payload > 0).then_some(max_payload),
            })
            .await;
        if max_payload > 0 && reply_size(&answer) > max_payload {
            answer = handler::too_large(operation);
        }
        let mut reply_headers = HeaderMap::new();
        if let Some(code) = answer.code {
            reply_headers.insert(ERROR_CODE_HEADER, code.as_str());
        }
        let sent = if reply_headers.is_empty() {
            self.client.publish(reply_to, answer.payload.into()).await
        } else {
            self.client
                .publish_with_headers(reply_to, reply_headers, answer.payload.into())
                .await
        };
        if let Err(error) = sent {
            tracing::warn!(endpoint = operation.as_str(), %error, "could not send a reply");
        }
        self.metrics
            .observe(operation, answer.code, started.elapsed());
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
