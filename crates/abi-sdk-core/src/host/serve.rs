//! [`RequestLoop`]: the one way a host serves request-reply subjects. It
//! subscribes and confirms the subscriptions with the server, hands each
//! request to its own task, admits at most `limit` requests at once with an
//! explicit [`Overload`] policy for the next one, and on close stops reading,
//! drains its subscriptions with the server's confirmation, answers what was
//! delivered before that took effect, and waits for the requests in flight.
//!
//! The agents and models hosts serve through it; what a request does once
//! admitted (its own concurrency, its deadlines) stays theirs.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::{Message, Subscriber};
use futures::StreamExt as _;
use futures::future::BoxFuture;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;
use tracing::{debug, warn};

/// What handles (or refuses) one request; it replies itself.
pub type Handler = Arc<dyn Fn(Message) -> BoxFuture<'static, ()> + Send + Sync>;

/// One served subject: what handles its requests and what a request gets
/// when the loop is full.
pub struct Route {
    /// The subject subscribed (no queue group).
    pub subject: String,
    /// Handles an admitted request, in its own task.
    pub handle: Handler,
    /// What a request beyond the limit gets.
    pub overload: Overload,
}

/// What a request gets when `limit` requests are in the host already.
#[derive(Clone)]
pub enum Overload {
    /// It waits for a place: the loop stops reading its subscription
    /// meanwhile, so later requests wait in the client's buffer.
    Wait,
    /// It is answered at once by this handler (a busy refusal), so the
    /// caller can go to another replica.
    Shed(Handler),
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route")
            .field("subject", &self.subject)
            .field("overload", &self.overload)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Overload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Wait => "Wait",
            Self::Shed(_) => "Shed",
        })
    }
}

/// How a loop ends its subscriptions when it stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnStop {
    /// Drains them (the server confirms no more messages come) and handles
    /// what was delivered before that, for up to this long.
    Drain(Duration),
    /// Unsubscribes; whatever is buffered is dropped.
    Unsubscribe,
}

/// Why a loop could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A subscription failed.
    #[error("subscribe: {0}")]
    Subscribe(#[from] async_nats::SubscribeError),
    /// The server did not confirm the subscriptions.
    #[error("flush: {0}")]
    Flush(#[from] async_nats::client::FlushError),
}

/// Serves any number of subjects under one admission limit.
pub struct RequestLoop {
    admitted: Arc<Semaphore>,
    on_stop: OnStop,
    stop: CancellationToken,
    calls: TaskTracker,
    readers: Mutex<Vec<JoinHandle<()>>>,
}

impl fmt::Debug for RequestLoop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestLoop")
            .field("free", &self.admitted.available_permits())
            .field("on_stop", &self.on_stop)
            .field("stopped", &self.stop.is_cancelled())
            .field("in_flight", &self.calls.len())
            .finish_non_exhaustive()
    }
}

impl RequestLoop {
    /// A loop admitting at most `limit` requests at once (at least one).
    pub fn new(limit: usize, on_stop: OnStop) -> Self {
        Self {
            admitted: Arc::new(Semaphore::new(limit.max(1))),
            on_stop,
            stop: CancellationToken::new(),
            calls: TaskTracker::new(),
            readers: Mutex::new(Vec::new()),
        }
    }

    /// Subscribes every route's subject, confirms the subscriptions with
    /// the server (a round trip, the reference's `flush_to_broker`, so a
    /// caller that sees the host announced reaches it), then starts reading
    /// them, each admitted request handed to its route's handler in its own
    /// task. Every route shares the loop's limit.
    ///
    /// # Errors
    ///
    /// [`StartError`] when a subscription or the confirmation fails; nothing
    /// is read then.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may have subscribed some subjects
    /// (they are dropped with the future) and reads none.
    pub async fn start(
        self: &Arc<Self>,
        nats: &async_nats::Client,
        routes: Vec<Route>,
    ) -> Result<(), StartError> {
        let mut subscribed = Vec::with_capacity(routes.len());
        for route in routes {
            let subscriber = nats.subscribe(route.subject.clone()).await?;
            subscribed.push((subscriber, route));
        }
        nats.flush().await?;
        let mut readers = self.lock_readers();
        for (subscriber, route) in subscribed {
            readers.push(tokio::spawn(self.clone().read(subscriber, route)));
        }
        Ok(())
    }

    /// How many requests are in the host now.
    pub fn in_flight(&self) -> usize {
        self.calls.len()
    }

    /// Stops reading, ends the subscriptions as `on_stop` says, then waits
    /// for the requests in flight, all by `deadline`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: reading stops at once, but a cancelled call leaves
    /// the readers and requests to end on their own.
    pub async fn close(&self, deadline: Instant) {
        self.stop.cancel();
        let readers = std::mem::take(&mut *self.lock_readers());
        if tokio::time::timeout_at(deadline, futures::future::join_all(readers))
            .await
            .is_err()
        {
            warn!("subscriptions still draining at the close deadline");
        }
        self.calls.close();
        if tokio::time::timeout_at(deadline, self.calls.wait())
            .await
            .is_err()
        {
            warn!(
                requests = self.calls.len(),
                "requests still going at the close deadline"
            );
        }
    }

    /// Stops taking requests into the count of those in flight: waits until
    /// every request admitted so far has ended (requests admitted meanwhile
    /// count too). Cancel safe: it only waits.
    pub async fn settled(&self) {
        self.calls.close();
        self.calls.wait().await;
    }

    async fn read(self: Arc<Self>, mut subscriber: Subscriber, route: Route) {
        loop {
            let msg = tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                msg = subscriber.next() => match msg {
                    Some(msg) => msg,
                    None => return,
                },
            };
            self.admit(msg, &route).await;
        }
        match self.on_stop {
            OnStop::Unsubscribe => {
                if let Err(err) = subscriber.unsubscribe().await {
                    debug!(error = %err, "unsubscribe failed");
                }
            }
            OnStop::Drain(grace) => {
                if let Err(err) = subscriber.drain().await {
                    warn!(error = %err, "could not drain a subscription");
                    return;
                }
                let until = Instant::now() + grace;
                while let Ok(Some(msg)) = tokio::time::timeout_at(until, subscriber.next()).await {
                    self.admit(msg, &route).await;
                }
            }
        }
    }

    /// Admits `msg` as the overload policy says, or has it refused.
    async fn admit(&self, msg: Message, route: &Route) {
        let ticket = match &route.overload {
            Overload::Shed(shed) => match self.admitted.clone().try_acquire_owned() {
                Ok(ticket) => ticket,
                Err(_) => return shed(msg).await,
            },
            Overload::Wait => match self.admitted.clone().acquire_owned().await {
                Ok(ticket) => ticket,
                // The semaphore is never closed.
                Err(_) => return,
            },
        };
        // A SERVER span per request, continuing the caller's trace; what
        // the handler calls (documents, another module) nests under it, and
        // so does work it starts in this span (an agent's run).
        let span = abi_process::traces::server_span(
            abi_process::traces::Kind::Server,
            &msg.subject,
            None,
            msg.headers.as_ref(),
        );
        let request = span.in_scope(|| (route.handle)(msg));
        self.calls.spawn(
            async move {
                request.await;
                drop(ticket);
            }
            .instrument(span),
        );
    }

    fn lock_readers(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        // A poisoned lock only means a thread panicked holding it; the list
        // of handles is still valid.
        self.readers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use tokio::sync::Notify;

    use super::*;

    fn answering(
        nats: &async_nats::Client,
        gate: &Arc<Notify>,
        started: &Arc<AtomicUsize>,
    ) -> Handler {
        let (nats, gate, started) = (nats.clone(), gate.clone(), started.clone());
        Arc::new(move |msg: Message| {
            let (nats, gate, started) = (nats.clone(), gate.clone(), started.clone());
            Box::pin(async move {
                started.fetch_add(1, Ordering::SeqCst);
                gate.notified().await;
                if let Some(reply) = msg.reply {
                    nats.publish(reply, Bytes::from_static(b"ok"))
                        .await
                        .unwrap();
                }
            })
        })
    }

    fn busy(nats: &async_nats::Client) -> Handler {
        let nats = nats.clone();
        Arc::new(move |msg: Message| {
            let nats = nats.clone();
            Box::pin(async move {
                if let Some(reply) = msg.reply {
                    nats.publish(reply, Bytes::from_static(b"busy"))
                        .await
                        .unwrap();
                }
            })
        })
    }

    fn route(subject: &str, handle: Handler, overload: Overload) -> Route {
        Route {
            subject: subject.to_owned(),
            handle,
            overload,
        }
    }

    async fn until(what: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !what() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn a_full_loop_sheds_at_once_or_makes_the_next_request_wait() {
        let server = abi_test_support::NatsServer::start().await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        let (gate, started) = (Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));

        // Shed: the second request is answered busy while the first runs.
        let shedding = Arc::new(RequestLoop::new(1, OnStop::Unsubscribe));
        let routes = vec![route(
            "shed",
            answering(&nats, &gate, &started),
            Overload::Shed(busy(&nats)),
        )];
        shedding.start(&nats, routes).await.unwrap();
        let first = tokio::spawn({
            let nats = nats.clone();
            async move { nats.request("shed", Bytes::new()).await.unwrap() }
        });
        until(|| started.load(Ordering::SeqCst) == 1).await;
        assert_eq!(shedding.in_flight(), 1);
        let second = nats.request("shed", Bytes::new()).await.unwrap();
        assert_eq!(&second.payload[..], b"busy");
        gate.notify_one();
        assert_eq!(&first.await.unwrap().payload[..], b"ok");
        shedding
            .close(Instant::now() + Duration::from_secs(5))
            .await;

        // Wait: the second request is handled once the first is done.
        started.store(0, Ordering::SeqCst);
        let waiting = Arc::new(RequestLoop::new(1, OnStop::Drain(Duration::from_secs(1))));
        let routes = vec![route(
            "wait",
            answering(&nats, &gate, &started),
            Overload::Wait,
        )];
        waiting.start(&nats, routes).await.unwrap();
        let both: Vec<_> = (0..2)
            .map(|_| {
                let nats = nats.clone();
                tokio::spawn(async move { nats.request("wait", Bytes::new()).await.unwrap() })
            })
            .collect();
        until(|| started.load(Ordering::SeqCst) == 1).await;
        assert_eq!(waiting.in_flight(), 1, "the second waits for a place");
        gate.notify_one();
        until(|| started.load(Ordering::SeqCst) == 2).await;
        gate.notify_one();
        for answer in both {
            assert_eq!(&answer.await.unwrap().payload[..], b"ok");
        }
        waiting.close(Instant::now() + Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn close_waits_for_the_requests_in_flight_until_its_deadline() {
        let server = abi_test_support::NatsServer::start().await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        let (gate, started) = (Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));
        let serving = Arc::new(RequestLoop::new(4, OnStop::Drain(Duration::from_secs(1))));
        let routes = vec![route(
            "slow",
            answering(&nats, &gate, &started),
            Overload::Shed(busy(&nats)),
        )];
        serving.start(&nats, routes).await.unwrap();
        let answer = tokio::spawn({
            let nats = nats.clone();
            async move { nats.request("slow", Bytes::new()).await.unwrap() }
        });
        until(|| started.load(Ordering::SeqCst) == 1).await;
        let mut closing = tokio::spawn({
            let serving = serving.clone();
            async move {
                serving
                    .close(Instant::now() + Duration::from_secs(10))
                    .await
            }
        });
        let early = tokio::time::timeout(Duration::from_millis(300), &mut closing).await;
        assert!(early.is_err(), "close waits for the request in flight");
        gate.notify_one();
        assert_eq!(&answer.await.unwrap().payload[..], b"ok");
        closing.await.unwrap();
        // Reading stopped: a new request finds no subscriber.
        let after = nats.request("slow", Bytes::new()).await.unwrap_err();
        assert_eq!(after.kind(), async_nats::RequestErrorKind::NoResponders);
        assert_eq!(serving.in_flight(), 0);

        // A request that never ends is left at the deadline.
        let stuck = Arc::new(RequestLoop::new(4, OnStop::Unsubscribe));
        let routes = vec![route(
            "stuck",
            answering(&nats, &Arc::new(Notify::new()), &started),
            Overload::Wait,
        )];
        stuck.start(&nats, routes).await.unwrap();
        let _pending = tokio::spawn({
            let nats = nats.clone();
            async move { nats.request("stuck", Bytes::new()).await }
        });
        until(|| stuck.in_flight() == 1).await;
        let deadline = Instant::now() + Duration::from_millis(200);
        stuck.close(deadline).await;
        assert!(Instant::now() >= deadline);
        assert_eq!(stuck.in_flight(), 1);
    }
}
