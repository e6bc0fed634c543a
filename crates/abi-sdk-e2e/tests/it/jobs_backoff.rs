//! Retries hold no concurrency slot during their backoff: nats-server keeps
//! a trigger nak'ed with a delay pending (and `max_ack_pending` counts it),
//! so our host acknowledges it and runs the retry itself at `retry_at`. With
//! `max_concurrency` 1, a run in a 30 s backoff does not stop another
//! trigger of the job; a retry whose host stopped is taken over by another
//! host within an ack wait or two, on the same run id and record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use abi_sdk::documents::{Data, Datetime, Value};
use abi_sdk::jobs::{JobHostOptions, JobSpec};
use abi_test_support::wait_until;
use abi_wire::jobs;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_its_backoff_does_not_block_the_job() {
    let setup = Setup::start().await;
    let options = JobHostOptions {
        backoff_base: Duration::from_secs(30),
        max_backoff: Duration::from_secs(300),
        ..fast()
    };
    let spec = JobSpec::new("flaky").unwrap().max_attempts(2).unwrap();
    let (host, calls) = setup.host(MODULE, "rust-1", spec, options).await;
    let job = setup.client(MODULE, "flaky");
    let retrying = job
        .trigger(json!({"fail_attempts": 1}), None)
        .await
        .unwrap();
    wait_until(DEADLINE, || async {
        retrying.status().await.unwrap().status == "RETRYING"
    })
    .await
    .unwrap();
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let consumer = jobs::JobSubjects::new(&setup.project, MODULE, "flaky").consumer();
    wait_until(DEADLINE, || async {
        stream
            .consumer_info(&consumer)
            .await
            .unwrap()
            .num_ack_pending
            == 0
    })
    .await
    .expect("the retrying trigger holds no server slot");

    let started = Instant::now();
    let other = job.trigger(json!({}), None).await.unwrap();
    let record = other.wait(Duration::from_secs(10)).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "another trigger waited {:?}",
        started.elapsed()
    );
    let record = retrying.status().await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("RETRYING", 1));
    assert_eq!(calls.count(), 2);
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_runs_on_its_host_or_is_taken_over_by_another() {
    let setup = Setup::start().await;
    let options = JobHostOptions {
        ack_wait: Duration::from_secs(1),
        backoff_base: Duration::from_millis(300),
        ..fast()
    };
    let spec = || JobSpec::new("flaky").unwrap().max_attempts(3).unwrap();
    let (first, first_calls) = setup.host(MODULE, "rust-1", spec(), options.clone()).await;
    let job = setup.client(MODULE, "flaky");
    // Its own host retries it: the same run, attempt after attempt.
    let run = job
        .trigger(json!({"fail_attempts": 2}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 3));
    assert_eq!(first_calls.count(), 3);

    // Its host stops during the backoff: another host takes it over.
    let options = JobHostOptions {
        backoff_base: Duration::from_secs(2),
        ..options
    };
    first.close_now().await;
    let (first, first_calls) = setup.host(MODULE, "rust-1", spec(), options.clone()).await;
    let run = job
        .trigger(json!({"fail_attempts": 1}), None)
        .await
        .unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RETRYING"
    })
    .await
    .unwrap();
    first.drain_within(Duration::from_secs(5)).await;
    first.close_now().await;
    let (second, second_calls) = setup.host(MODULE, "rust-2", spec(), options).await;
    // Its sweep (every ack wait) finds the retry once its owner is late.
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED");
    let record = run.status().await.unwrap();
    assert_eq!(record.attempt, 2);
    assert_eq!((first_calls.count(), second_calls.count()), (1, 1));
    second.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_attempt_lost_with_its_host_is_retried_by_the_reaper() {
    let setup = Setup::start().await;
    let options = JobHostOptions {
        backoff_base: Duration::from_secs(30),
        ..fast()
    };
    let spec = || JobSpec::new("flaky").unwrap().max_attempts(3).unwrap();
    let (first, _) = setup.host(MODULE, "rust-1", spec(), options.clone()).await;
    let job = setup.client(MODULE, "flaky");
    // Acknowledged on its first failure: JetStream never delivers it again.
    let run = job
        .trigger(json!({"fail_attempts": 1}), None)
        .await
        .unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RETRYING"
    })
    .await
    .unwrap();
    first.close_now().await;
    // As if another host re-drove it, then died without a heartbeat.
    let docs = setup.links(MODULE, "x").documents;
    let collection = jobs::runs_collection(&setup.project);
    let doc = docs.get(&collection, run.run_id()).await.unwrap();
    let old = Datetime::from_unix_micros(Datetime::now().unix_micros() - 600_000_000)
        .unwrap()
        .isoformat();
    let mut data: Data = doc.data.clone();
    for (k, v) in [
        ("status", Value::from("RUNNING")),
        ("instance", "rust-dead".into()),
        ("retry_owner", "rust-dead".into()),
        ("started_at", old.as_str().into()),
        ("heartbeat_at", old.as_str().into()),
    ] {
        data.insert(k.to_owned(), v);
    }
    docs.put(&collection, run.run_id(), data, Some(doc.version))
        .await
        .unwrap();
    let (second, calls) = setup.host(MODULE, "rust-2", spec(), options).await;
    assert_eq!(second.reap_lost_runs().await.unwrap(), 0, "not failed");
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 2));
    let stored = docs.get(&collection, run.run_id()).await.unwrap();
    assert_eq!(stored.data["instance"], Value::from("rust-2"));
    assert_eq!(calls.count(), 1);
    second.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redriven_attempt_handed_back_at_shutdown_runs_on_another_host() {
    let setup = Setup::start().await;
    let options = JobHostOptions {
        ack_wait: Duration::from_secs(1),
        backoff_base: Duration::from_millis(300),
        handback_grace: Duration::from_millis(300),
        ..fast()
    };
    let spec = || JobSpec::new("flaky").unwrap().max_attempts(3).unwrap();
    let (first, first_calls) = setup.host(MODULE, "rust-1", spec(), options.clone()).await;
    let job = setup.client(MODULE, "flaky");
    // Fails its first attempt, then waits for the gate.
    let run = job
        .trigger(json!({"fail_attempts": 1, "gate": true}), None)
        .await
        .unwrap();
    wait_until(DEADLINE, || async {
        let record = run.status().await.unwrap();
        (record.status.as_str(), record.attempt) == ("RUNNING", 2)
    })
    .await
    .expect("its host re-drives the retry");
    first.close_now().await;
    let record = run.status().await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("RETRYING", 1));

    let (second, second_calls) = setup.host(MODULE, "rust-2", spec(), options).await;
    wait_until(DEADLINE, || async { second_calls.count() == 1 })
        .await
        .expect("the other host takes the handed-back attempt");
    second_calls.release.notify_one();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 2));
    assert_eq!((first_calls.count(), second_calls.count()), (2, 1));
    second.close_now().await;
    setup.stop().await;
}
