//! A mixed fleet: the Python reference's `JobHost` (tests/interop/job_peer.py)
//! and ours serving the same job on the same durable consumer. Identical
//! consumer configs, triggers spread over both, every run ends exactly once,
//! a run handed back by ours is finished by the reference reading our
//! record, and (for contrast) the reference's own shutdown failing a run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use abi_sdk::jobs::{JobHostOptions, JobSpec};
use abi_test_support::wait_until;
use abi_wire::jobs;
use serde_json::json;
use tokio::process::Child;

use super::jobs_fixture::{DEADLINE, Setup, reference_job_host, stop_reference};

const MODULE: &str = "acme.billing";
const PY_INSTANCE: &str = "acme.billing-py-1";

async fn python_host(setup: &Setup) -> Child {
    reference_job_host(
        &setup.server.url(),
        &setup.token(MODULE),
        &setup.project,
        MODULE,
        &["ingest"],
    )
    .await
}

async fn consumer_config(setup: &Setup) -> serde_json::Value {
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let name = jobs::JobSubjects::new(&setup.project, MODULE, "ingest").consumer();
    serde_json::to_value(stream.consumer_info(name).await.unwrap().config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_host_and_ours_share_a_job_its_consumer_and_its_records() {
    let setup = Setup::start().await;
    let python = python_host(&setup).await;
    let theirs = consumer_config(&setup).await;
    let options = JobHostOptions {
        handback_grace: Duration::from_millis(300),
        ..JobHostOptions::default()
    };
    // The reference's defaults: one run at a time, one attempt.
    let spec = JobSpec::new("ingest").unwrap();
    let (ours, calls) = setup.host(MODULE, "rust-1", spec, options).await;
    assert_eq!(
        consumer_config(&setup).await,
        theirs,
        "the same consumer config"
    );

    // Triggers spread over both; each run ends once.
    let job = setup.client(MODULE, "ingest");
    let mut runs = Vec::new();
    for n in 0..24 {
        runs.push(job.trigger(json!({"n": n}), None).await.unwrap());
    }
    let mut by_host: BTreeMap<String, usize> = BTreeMap::new();
    for (n, run) in runs.iter().enumerate() {
        let record = run.wait(DEADLINE).await.unwrap();
        assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 1));
        let data = record.to_json();
        assert_eq!(data["payload"], json!({"n": n}));
        assert_eq!(data["result"]["echo"], json!({"n": n}));
        assert_eq!(record.logs.len(), 1, "one attempt: {:?}", record.logs);
        *by_host
            .entry(data["instance"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(by_host.get("rust-1").copied().unwrap_or(0), calls.count());
    assert_eq!(by_host.values().sum::<usize>(), 24);
    assert!(by_host.len() == 2, "both hosts ran some: {by_host:?}");
    stop_reference(python).await;

    // Ours starts a run, the reference host comes back, ours closes: the
    // reference takes the run over from our record (same trigger: it keeps
    // our created_at) and it spends no attempt.
    let run = job
        .trigger(json!({"block_on": "rust-1"}), None)
        .await
        .unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    let created_at = run.status().await.unwrap().to_json()["created_at"].clone();
    let python = python_host(&setup).await;
    ours.close_now().await;
    let record = run.wait(DEADLINE).await.unwrap();
    let data = record.to_json();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 1));
    assert_eq!(data["instance"], PY_INSTANCE);
    assert_eq!(
        data["created_at"], created_at,
        "the reference merged our record"
    );

    // The reference's own shutdown, for contrast: the run it was running is
    // FAILED and its only attempt is gone (ours handed it back above).
    let run = job.trigger(json!({"block": true}), None).await.unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    stop_reference(python).await;
    let record = run.status().await.unwrap();
    assert_eq!(
        (record.status.as_str(), record.error.as_str()),
        ("FAILED", "Interrupted by host shutdown")
    );
    setup.stop().await;
}
