//! A trigger whose TTL passes before any host takes it ends its caller's
//! wait: `FAILED`, attempt 0, [`jobs::EXPIRED_UNRUN_ERROR`], stored so every
//! reader sees it, the reference's `JobRun.wait` included (on its own it
//! waits forever). A handle from a run id alone only reads: an id with no
//! trigger of its job behind it is no run, and nothing is written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use abi_sdk::jobs::JobSpec;
use abi_wire::jobs;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_that_expires_unrun_ends_the_wait_failed() {
    let setup = Setup::start().await;
    // A host of another job of the module: the module's run collection
    // exists, nobody serves "ingest".
    let (host, _) = setup
        .host(MODULE, "rust-1", JobSpec::new("other").unwrap(), fast())
        .await;
    let job = setup.client(MODULE, "ingest");

    // A trigger with the usual TTL stays queued.
    let queued = job.trigger(json!({}), None).await.unwrap();
    assert_eq!(queued.status().await.unwrap().status, "QUEUED");

    // The reference's trigger with a one-second TTL.
    let js = async_nats::jetstream::new(setup.nats.clone());
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(jobs::TRIGGER_HEADER, jobs::MANUAL_TRIGGER);
    headers.insert(jobs::TTL_HEADER, "1s");
    let ack = js
        .publish_with_headers(
            jobs::JobSubjects::new(&setup.project, MODULE, "ingest").trigger(),
            headers,
            "{}".into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    // A handle from the id alone only reads: the trigger it names may never
    // have been this job's, so it writes nothing.
    let by_id = job.run(jobs::run_id("ingest", ack.sequence));
    // The caller that stored the trigger knows it existed.
    let run = job.triggered_run(jobs::run_id("ingest", ack.sequence));
    let started = Instant::now();
    let record = run
        .wait_with(DEADLINE, Duration::from_millis(200))
        .await
        .unwrap();
    assert_eq!(
        (
            record.status.as_str(),
            record.attempt,
            record.error.as_str()
        ),
        ("FAILED", 0, jobs::EXPIRED_UNRUN_ERROR)
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    // Stored: a second reader gets the same record from the document service.
    let again = by_id.status().await.unwrap();
    assert_eq!(again.version, 1, "stored once, create-only");
    assert_eq!(again.to_json(), record.to_json());
    assert!(again.to_json()["finished_at"].is_string());

    // The reference's caller reads it as the end of the run too.
    let out = tokio::process::Command::new(abi_test_support::python())
        .arg(abi_test_support::workspace_root().join("tests/interop/job_peer.py"))
        .args([
            "wait",
            &setup.server.url(),
            &setup.token("api"),
            &setup.project,
            MODULE,
            "ingest",
            run.run_id(),
            "30",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen,
        json!({"status": "FAILED", "error": jobs::EXPIRED_UNRUN_ERROR})
    );

    // Ids of this job that hold no trigger of it: a future sequence, and
    // the long-lived trigger's sequence under another job's name. Read
    // from the id alone they are no run, and nothing is written.
    let (_, queued_seq) = jobs::parse_run_id(queued.run_id()).unwrap();
    let future = job.run(jobs::run_id("ingest", ack.sequence + 1000));
    let other = setup
        .client(MODULE, "other")
        .run(jobs::run_id("other", queued_seq));
    for unknown in [&future, &other] {
        let err = unknown.status().await.unwrap_err();
        assert_eq!(err.kind(), abi_sdk::CallErrorKind::RunNotFound, "{err}");
    }
    let docs = setup.links(MODULE, "x").documents;
    let collection = jobs::runs_collection(&setup.project);
    for unknown in [&future, &other] {
        let read = docs.get(&collection, unknown.run_id()).await;
        assert!(read.is_err(), "a read wrote {}", unknown.run_id());
    }

    // The long-lived trigger is still queued.
    assert_eq!(queued.status().await.unwrap().status, "QUEUED");
    host.close_now().await;
    setup.stop().await;
}
