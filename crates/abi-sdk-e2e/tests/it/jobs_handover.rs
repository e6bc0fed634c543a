//! Two of our hosts on one job: a drained host hands its run back without
//! spending an attempt (and keeps heartbeating while it drains), and a host
//! whose delivery was taken over cannot overwrite the newer attempt. Both
//! fail on the reference's behaviour (FAILED "Interrupted by host shutdown";
//! a late completion merged over the newer attempt).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::jobs::{JobHostOptions, JobSpec};
use abi_test_support::wait_until;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_host_hands_its_run_back_without_spending_an_attempt() {
    let setup = Setup::start().await;
    let options = JobHostOptions {
        ack_wait: Duration::from_secs(1),
        heartbeat_interval: Duration::from_millis(200),
        handback_grace: Duration::from_millis(300),
        ..fast()
    };
    let spec = JobSpec::new("ingest").unwrap();
    let (a, a_calls) = setup
        .host(MODULE, "rust-a", spec.clone(), options.clone())
        .await;
    let job = setup.client(MODULE, "ingest");
    let run = job
        .trigger(json!({"block_on": "rust-a"}), None)
        .await
        .unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    // Another host is there while A drains: if A stopped heartbeating, the
    // trigger would be redelivered to B after the 1 s ack wait (attempt 2).
    let (b, b_calls) = setup.host(MODULE, "rust-b", spec, options).await;
    a.drain_within(Duration::from_secs(3)).await;
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{:?}", record.to_json());
    assert_eq!(record.attempt, 1, "the hand-back spent no attempt");
    assert_eq!(record.to_json()["instance"], "rust-b");
    assert_eq!((a_calls.count(), b_calls.count()), (1, 1));
    a.close_now().await;
    b.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_hands_back_at_once_and_the_record_shows_it() {
    let setup = Setup::start().await;
    let options = JobHostOptions {
        handback_grace: Duration::from_millis(300),
        ..fast()
    };
    let spec = JobSpec::new("ingest").unwrap();
    let (a, _) = setup
        .host(MODULE, "rust-a", spec.clone(), options.clone())
        .await;
    let job = setup.client(MODULE, "ingest");
    let run = job
        .trigger(json!({"block_on": "rust-a"}), None)
        .await
        .unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    a.close_now().await;
    let record = run.status().await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("RETRYING", 0));
    assert_eq!(record.error, "Handed back by host shutdown");
    assert!(
        record.logs.contains(&"stopped: Some(HandBack)".to_owned()),
        "the handler saw why it stopped: {:?}",
        record.logs
    );
    let (b, _) = setup.host(MODULE, "rust-b", spec, options).await;
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 1));
    b.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_hosts_late_completion_does_not_overwrite_the_newer_attempt() {
    let setup = Setup::start().await;
    // A 1 s ack wait and a 10 s heartbeat: A's delivery expires while it runs.
    let options = JobHostOptions {
        ack_wait: Duration::from_secs(1),
        ..fast()
    };
    let spec = JobSpec::new("ingest").unwrap().max_attempts(2).unwrap();
    let (a, a_calls) = setup
        .host(MODULE, "rust-a", spec.clone(), options.clone())
        .await;
    let job = setup.client(MODULE, "ingest");
    let run = job
        .trigger(json!({"gate_first": true}), None)
        .await
        .unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    let (b, b_calls) = setup.host(MODULE, "rust-b", spec, options).await;
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 2));
    assert_eq!(record.to_json()["instance"], "rust-b");
    // Now the stale attempt finishes on A.
    a_calls.release.notify_one();
    wait_until(DEADLINE, || async { a.running() == 0 })
        .await
        .unwrap();
    let after = run.status().await.unwrap();
    assert_eq!(after.version, record.version, "A wrote nothing");
    assert_eq!(after.to_json()["instance"], "rust-b");
    assert_eq!(after.attempt, 2);
    assert_eq!((a_calls.count(), b_calls.count()), (1, 1));
    a.close_now().await;
    b.close_now().await;
    setup.stop().await;
}
