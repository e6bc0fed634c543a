//! Cancels the reference drops: a queued run (its trigger waits behind a
//! busy job) and a retrying run end CANCELLED, and their triggers are
//! acknowledged without running the handler again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::jobs::{JobHostOptions, JobSpec};
use abi_test_support::wait_until;
use abi_wire::jobs;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

async fn drained(setup: &Setup, job: &str) {
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let name = jobs::JobSubjects::new(&setup.project, MODULE, job).consumer();
    wait_until(DEADLINE, || async {
        let info = stream.consumer_info(&name).await.unwrap();
        info.num_pending == 0 && info.num_ack_pending == 0
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_and_retrying_runs_can_be_cancelled() {
    let setup = Setup::start().await;
    let (host, calls) = setup
        .host(MODULE, "rust-1", JobSpec::new("ingest").unwrap(), fast())
        .await;
    let job = setup.client(MODULE, "ingest");
    let busy = job.trigger(json!({"gate": true}), None).await.unwrap();
    wait_until(DEADLINE, || async {
        busy.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    let queued = job.trigger(json!({}), None).await.unwrap();
    assert_eq!(queued.status().await.unwrap().status, "QUEUED");
    queued.cancel().await.unwrap();
    let record = queued.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("CANCELLED", 0));
    calls.release.notify_one();
    assert_eq!(busy.wait(DEADLINE).await.unwrap().status, "SUCCEEDED");
    drained(&setup, "ingest").await;
    assert_eq!(calls.count(), 1, "the cancelled trigger never ran");
    host.close_now().await;

    let options = JobHostOptions {
        backoff_base: Duration::from_secs(3),
        ..fast()
    };
    let spec = JobSpec::new("flaky").unwrap().max_attempts(3).unwrap();
    let (host, calls) = setup.host(MODULE, "rust-1", spec, options).await;
    let job = setup.client(MODULE, "flaky");
    let run = job.trigger(json!({"fail": "boom"}), None).await.unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RETRYING"
    })
    .await
    .unwrap();
    run.cancel().await.unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("CANCELLED", 1));
    drained(&setup, "flaky").await;
    assert_eq!(calls.count(), 1, "no retry after the cancel");
    host.close_now().await;
    setup.stop().await;
}
