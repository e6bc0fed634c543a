//! Subscriptions and the request loop.
//!
//! Each operation has its own queue subscription (`abi.discovery.<project>.owners`),
//! so any number of owners share the load. Every request runs in its own task, at
//! most `max_concurrent` at once; beyond that the loop stops reading and requests wait
//! in the subscription's buffer, each until its caller's deadline.
//!
//! Stopping: the loop stops taking requests, asks the broker to stop delivering
//! (drain + flush, so the broker has processed the UNSUBs), handles what was already
//! delivered, and leaves the running requests to finish in the tracker.

use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_nats::{Client, Message, Subscriber};
use futures::stream::{SelectAll, Stream, StreamExt as _};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use super::backend::Backend;
use super::handle::Handler;
use super::stats::Stats;
use abi_wire::discovery::{Operation, Project};

/// Why the endpoints could not start or stopped on their own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Subscribing failed.
    #[error("could not subscribe to {subject}")]
    Subscribe {
        /// The subject.
        subject: String,
        /// The cause.
        #[source]
        source: async_nats::SubscribeError,
    },
    /// The broker did not confirm in time.
    #[error("the NATS server did not confirm the {what} within {timeout:?}")]
    FlushTimedOut {
        /// What was being confirmed.
        what: &'static str,
        /// The deadline.
        timeout: Duration,
    },
    /// The broker refused or lost a flush.
    #[error("could not flush to the NATS server")]
    Flush(#[source] async_nats::client::FlushError),
    /// The round trip that confirms the broker's state could not be sent.
    #[error("could not publish to the NATS server")]
    Publish(#[source] async_nats::PublishError),
    /// Every subscription ended without being asked to: the connection closed.
    #[error("the subscriptions ended unexpectedly (connection closed)")]
    Ended,
}

/// How many requests run at once, and the deadline of broker confirmations and of
/// sending one reply.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Requests handled at once.
    pub max_concurrent: NonZeroUsize,
    /// Deadline of a flush or of one reply.
    pub timeout: Duration,
}

/// The running endpoints: their loop ends when `stop` is cancelled (after the broker
/// confirmed it stopped delivering) or on its own with [`ServeError::Ended`].
#[derive(Debug)]
pub struct Serving {
    /// The request loop.
    pub task: JoinHandle<Result<(), ServeError>>,
}

/// Subscribes every operation of `project` and serves them until `stop`.
///
/// Returns once the broker confirmed the subscriptions, so a request sent after it
/// is served. Request tasks are spawned on `tracker`; wait for it to know they are
/// answered.
///
/// # Errors
///
/// [`ServeError::Subscribe`], or a flush error or timeout (`limits.timeout`).
///
/// # Cancel safety
///
/// Not cancel safe: dropped before it returns, the subscriptions made so far go with it; cancel `stop` instead.
pub async fn serve<B: Backend>(
    client: Client,
    project: &Project,
    handler: Arc<Handler<B>>,
    stats: Arc<Stats>,
    limits: Limits,
    tracker: TaskTracker,
    stop: CancellationToken,
) -> Result<Serving, ServeError> {
    let Limits {
        max_concurrent,
        timeout,
    } = limits;
    let queue = abi_wire::discovery::owners_queue(project);
    let mut subscriptions = SelectAll::new();
    for op in Operation::ALL {
        let subject = abi_wire::discovery::operation(project, op);
        let subscriber = client
            .queue_subscribe(subject.clone(), queue.clone())
            .await
            .map_err(|source| ServeError::Subscribe { subject, source })?;
        subscriptions.push(OpSubscriber { op, subscriber });
    }
    confirm(&client, timeout, "subscriptions").await?;
    tracing::info!(project = %project, queue = %queue, "serving discovery requests");
    let ctx = RequestContext {
        client: client.clone(),
        handler,
        stats,
        timeout,
    };
    let task = tokio::spawn(request_loop(
        client,
        subscriptions,
        ctx,
        max_concurrent,
        timeout,
        tracker,
        stop,
    ));
    Ok(Serving { task })
}

/// Waits until the broker processed everything sent on `client` so far.
///
/// `Client::flush` only empties the socket, so this makes a round trip
/// through the broker: it subscribes to a fresh inbox and publishes to it; the
/// broker handles a connection's operations in order, so once the message comes
/// back every earlier SUB or UNSUB was processed.
async fn confirm(client: &Client, timeout: Duration, what: &'static str) -> Result<(), ServeError> {
    let round_trip = async {
        let inbox = client.new_inbox();
        let mut echo =
            client
                .subscribe(inbox.clone())
                .await
                .map_err(|source| ServeError::Subscribe {
                    subject: inbox.clone(),
                    source,
                })?;
        client
            .publish(inbox, bytes::Bytes::new())
            .await
            .map_err(ServeError::Publish)?;
        client.flush().await.map_err(ServeError::Flush)?;
        match echo.next().await {
            Some(_) => Ok(()),
            None => Err(ServeError::Ended),
        }
    };
    match tokio::time::timeout(timeout, round_trip).await {
        Ok(result) => result,
        Err(_) => Err(ServeError::FlushTimedOut { what, timeout }),
    }
}

struct RequestContext<B> {
    client: Client,
    handler: Arc<Handler<B>>,
    stats: Arc<Stats>,
    timeout: Duration,
}

impl<B> Clone for RequestContext<B> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            handler: Arc::clone(&self.handler),
            stats: Arc::clone(&self.stats),
            timeout: self.timeout,
        }
    }
}

async fn request_loop<B: Backend>(
    client: Client,
    mut subscriptions: SelectAll<OpSubscriber>,
    ctx: RequestContext<B>,
    max_concurrent: NonZeroUsize,
    timeout: Duration,
    tracker: TaskTracker,
    stop: CancellationToken,
) -> Result<(), ServeError> {
    let slots = Arc::new(Semaphore::new(max_concurrent.get()));
    loop {
        // Both branches are cancel-safe: a cancelled `next()` loses no message and a
        // cancelled acquire holds no permit.
        let next = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            next = subscriptions.next() => next,
        };
        let Some((op, msg)) = next else {
            return Err(ServeError::Ended);
        };
        dispatch(&ctx, &slots, &tracker, op, msg).await;
    }

    // Let the requests in flight finish first, so that the replies are out before the
    // drain. (Our async-nats carries a patch, see vendor/async-nats/PATCHED.md: a
    // drained subscription is only forgotten once the broker confirmed its UNSUB, so
    // requests routed to it just before are still delivered below.)
    let all = u32::try_from(max_concurrent.get()).unwrap_or(u32::MAX);
    let quiet = tokio::time::timeout(timeout, Arc::clone(&slots).acquire_many_owned(all)).await;

    // Stop delivery at the broker, then handle what it had already delivered.
    for subscription in subscriptions.iter_mut() {
        let op = subscription.op.as_str();
        match tokio::time::timeout(timeout, subscription.subscriber.drain()).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(op, error = %error, "could not drain a subscription"),
            Err(_) => tracing::warn!(op, ?timeout, "timed out draining a subscription"),
        }
    }
    let flushed = confirm(&client, timeout, "unsubscriptions").await;
    drop(quiet);
    let mut left = 0_usize;
    let deadline = tokio::time::Instant::now() + timeout;
    while let Ok(Some((op, msg))) = tokio::time::timeout_at(deadline, subscriptions.next()).await {
        left += 1;
        dispatch(&ctx, &slots, &tracker, op, msg).await;
    }
    tracing::info!(
        handled_after_stop = left,
        "stopped taking discovery requests"
    );
    flushed
}

async fn dispatch<B: Backend>(
    ctx: &RequestContext<B>,
    slots: &Arc<Semaphore>,
    tracker: &TaskTracker,
    op: Operation,
    msg: Message,
) {
    let Some(reply_to) = msg.reply.clone() else {
        ctx.stats.record_dropped_without_reply();
        tracing::debug!(op = op.as_str(), "request without a reply subject dropped");
        return;
    };
    // The semaphore is never closed, so acquiring only waits.
    let Ok(permit) = Arc::clone(slots).acquire_owned().await else {
        return;
    };
    let ctx = ctx.clone();
    // The reference's SERVER span `discovery/<operation>`, continuing the
    // caller's trace (disabled when traces are not exported).
    let span = abi_process::traces::server_span(
        abi_process::traces::Kind::Server,
        &msg.subject,
        None,
        msg.headers.as_ref(),
    );
    tracker.spawn(
        async move {
            let _permit = permit;
            let started = Instant::now();
            let reply = ctx
                .handler
                .handle(op, msg.headers.as_ref(), &msg.payload)
                .await;
            let error = reply
                .error
                .as_ref()
                .map(|e| (e.code.as_str(), e.message.as_str()));
            ctx.stats.record(op, started.elapsed(), error);
            if let Some(error) = &reply.error {
                tracing::debug!(code = %error.code, "request refused");
                abi_process::traces::record_error(
                    &tracing::Span::current(),
                    &error.code,
                    &error.message,
                );
            }
            match tokio::time::timeout(
                ctx.timeout,
                ctx.client.publish(reply_to, reply.payload.into()),
            )
            .await
            {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(error = %error, "could not send a reply"),
                Err(_) => tracing::warn!(timeout = ?ctx.timeout, "timed out sending a reply"),
            }
        }
        .instrument(span),
    );
}

/// A subscriber tagged with its operation.
struct OpSubscriber {
    op: Operation,
    subscriber: Subscriber,
}

impl Stream for OpSubscriber {
    type Item = (Operation, Message);

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let op = self.op;
        self.subscriber
            .poll_next_unpin(cx)
            .map(|next| next.map(|msg| (op, msg)))
    }
}
