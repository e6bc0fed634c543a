//! The drain our owners rely on when they stop under load (see
//! vendor/async-nats/PATCHED.md): every message the server routed to a
//! draining queue subscription reaches it, so nothing sent to the queue group
//! is lost while one member leaves. (Without the patch, about every other
//! round here loses messages.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use abi_test_support::{NatsServer, wait_until};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// Rounds, each with a member leaving under load.
const ROUNDS: usize = 12;
/// Messages the leaving member takes before it drains.
const DRAIN_AFTER: u64 = 300;
/// Messages published after the drain ended.
const AFTER_DRAIN: u64 = 200;
const DEADLINE: Duration = Duration::from_secs(30);

/// Counts what `subscriber` receives until it ends.
fn count(mut subscriber: async_nats::Subscriber) -> Arc<AtomicU64> {
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&received);
    tokio::spawn(async move {
        while subscriber.next().await.is_some() {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    received
}

/// Returns once the server has processed everything `client` sent so far.
async fn round_trip(client: &async_nats::Client) {
    let inbox = client.new_inbox();
    let mut echo = client.subscribe(inbox.clone()).await.unwrap();
    client.publish(inbox, "".into()).await.unwrap();
    tokio::time::timeout(DEADLINE, echo.next())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_draining_under_load_loses_no_message_of_its_queue_group() {
    let server = NatsServer::start().await;
    let leaving = async_nats::connect(server.url()).await.unwrap();
    let staying = async_nats::connect(server.url()).await.unwrap();
    let publisher = async_nats::connect(server.url()).await.unwrap();
    // Large messages: what was routed before the UNSUB takes many reads.
    let payload = bytes::Bytes::from(vec![b'x'; 64 * 1024]);

    for round in 0..ROUNDS {
        let subject = format!("work.{round}");
        let mut leaving_sub = leaving
            .queue_subscribe(subject.clone(), "q".into())
            .await
            .unwrap();
        let staying_sub = staying
            .queue_subscribe(subject.clone(), "q".into())
            .await
            .unwrap();
        round_trip(&leaving).await;
        round_trip(&staying).await;
        let stayed = count(staying_sub);

        // The leaving member reads until its subscription ends; it drains
        // while the publisher is in full flow, and sends something right
        // after, as a service replying to requests does.
        let left = Arc::new(AtomicU64::new(0));
        let drained = {
            let (left, leaving) = (Arc::clone(&left), leaving.clone());
            tokio::spawn(async move {
                let mut drain_requested = false;
                while leaving_sub.next().await.is_some() {
                    let n = left.fetch_add(1, Ordering::Relaxed) + 1;
                    if !drain_requested && n >= DRAIN_AFTER {
                        drain_requested = true;
                        leaving_sub.drain().await.unwrap();
                        leaving.publish("elsewhere", "".into()).await.unwrap();
                    }
                }
            })
        };
        let published = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let flow = {
            let (published, stop) = (Arc::clone(&published), stop.clone());
            let (publisher, payload, subject) = (publisher.clone(), payload.clone(), subject);
            tokio::spawn(async move {
                while !stop.is_cancelled() {
                    let n = published.fetch_add(1, Ordering::Relaxed);
                    publisher
                        .publish(subject.clone(), payload.clone())
                        .await
                        .unwrap();
                    if n % 16 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                publisher.flush().await.unwrap();
            })
        };
        tokio::time::timeout(DEADLINE, drained)
            .await
            .expect("the drained subscription ended")
            .unwrap();
        let at_drain_end = published.load(Ordering::Relaxed);
        wait_until(DEADLINE, || async {
            published.load(Ordering::Relaxed) >= at_drain_end + AFTER_DRAIN
        })
        .await
        .unwrap();
        stop.cancel();
        flow.await.unwrap();

        let sent = published.load(Ordering::Relaxed);
        let total = || left.load(Ordering::Relaxed) + stayed.load(Ordering::Relaxed);
        let all = wait_until(DEADLINE, || async { total() >= sent }).await;
        assert!(
            all.is_ok(),
            "round {round}: {} of {sent} messages arrived (leaving {}, staying {})",
            total(),
            left.load(Ordering::Relaxed),
            stayed.load(Ordering::Relaxed)
        );
        assert_eq!(total(), sent, "round {round}: a message arrived twice");
        assert!(left.load(Ordering::Relaxed) >= DRAIN_AFTER);
    }
}
