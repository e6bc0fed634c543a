//! Better than the reference (whose micro-service endpoints drop requests
//! delivered at a hand-over): callers keep calling an app while one of its
//! two instances drains and stops, and every call is answered by the app.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use abi_sdk::apps::AppsExt as _;
use abi_sdk_e2e::World;
use bytes::Bytes;

use super::apps_interop::{folder, ours};
use super::models_fixture::{DEADLINE, caller, ready_instances};

/// Callers calling at once, each one call after the other.
const CALLERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_app_request_is_lost_while_an_instance_drains_under_traffic() {
    let world = World::start(5.0).await;
    let dir = tempfile::tempdir().unwrap();
    let board = folder(dir.path());
    let go = Arc::new(tokio::sync::Notify::new());
    let (stop_first, first) = ours(&world, "rs_pool", &board, go.clone());
    let (stop_second, second) = ours(&world, "rs_pool", &board, go);
    ready_instances(&world, "rs_pool", 2).await;

    let app = caller(&world, "caller")
        .await
        .module("rs_pool", 1)
        .web_app("board");
    let done = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let mut callers = Vec::new();
    for _ in 0..CALLERS {
        let (app, done, answered) = (app.clone(), done.clone(), answered.clone());
        callers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            while !done.load(Ordering::Relaxed) {
                // 200 ms in the app: calls are in flight when the drain starts.
                let request = http::Request::get("/api/echo?slow")
                    .body(Bytes::new())
                    .unwrap();
                match app.call(request).await {
                    Ok(response) if response.status() == 200 => {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(response) => failures.push(format!("status {}", response.status())),
                    Err(err) => failures.push(err.to_string()),
                }
            }
            failures
        }));
    }
    let served = |n: usize| {
        let answered = answered.clone();
        async move { answered.load(Ordering::Relaxed) >= n }
    };
    abi_test_support::wait_until(DEADLINE, || served(2 * CALLERS))
        .await
        .expect("calls are answered");
    // One instance drains and stops while the callers go on.
    stop_first.cancel();
    tokio::time::timeout(DEADLINE, first)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let after = answered.load(Ordering::Relaxed);
    abi_test_support::wait_until(DEADLINE, || served(after + 2 * CALLERS))
        .await
        .expect("the other instance answers");
    done.store(true, Ordering::Relaxed);
    for caller in callers {
        let failures = caller.await.unwrap();
        assert!(
            failures.is_empty(),
            "calls lost at the hand-over: {failures:?}"
        );
    }
    assert!(answered.load(Ordering::Relaxed) >= after + 2 * CALLERS);
    stop_second.cancel();
    tokio::time::timeout(DEADLINE, second)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
