//! Claim checks on triggers, across callers and hosts: a payload of
//! 1.5 MB (above the broker's 1 MiB `max_payload`) triggered by our
//! `JobClient` travels through `abi_claim_checks` and runs whole on the
//! reference's Python `JobHost` and on ours; one triggered by the
//! reference's `JobProxy` runs whole on ours.
//!
//! The payload is a string of control characters: `json.dumps` writes each
//! as a six-byte `\u0001` escape, so the trigger is ~1.5 MB while the run
//! record (which holds the payload as UTF-8, and which the document service
//! takes only under `max_payload`) stays ~0.25 MB.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk::jobs::{JobSpec, RunRecord};
use abi_test_support::{python, workspace_root};
use abi_wire::jobs;
use serde_json::json;
use tokio::process::{Child, Command};

use super::jobs_fixture::{DEADLINE, Setup, fast, reference_job_host, stop_reference};

const MODULE: &str = "acme.billing";
const CHARS: usize = 250_000;

fn big_payload() -> serde_json::Value {
    json!({"big": "\u{1}".repeat(CHARS)})
}

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

/// The stored trigger of `run_id` is a claim check: empty body, both headers.
async fn assert_claim_checked(setup: &Setup, run_id: &str) {
    let (_, sequence) = jobs::parse_run_id(run_id).unwrap();
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let stored = stream.get_raw_message(sequence).await.unwrap();
    assert!(stored.payload.is_empty(), "the body travels out of band");
    let name = stored.headers.get(jobs::CLAIM_CHECK_HEADER).unwrap();
    assert_eq!(name.as_str().len(), 32, "a uuid4 hex name");
    let size: usize = stored
        .headers
        .get(jobs::CLAIM_CHECK_SIZE_HEADER)
        .unwrap()
        .as_str()
        .parse()
        .unwrap();
    assert!(size > 1024 * 1024, "above the broker limit: {size}");
}

fn assert_whole(record: &RunRecord, instance: &str) {
    let data = record.to_json();
    assert_eq!(record.status, "SUCCEEDED", "{}", record.error);
    assert_eq!(data["instance"], instance);
    assert_eq!(
        data["payload"]["big"].as_str().map(str::len),
        Some(CHARS),
        "the host read the whole payload back"
    );
    assert!(data["payload"] == big_payload());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_triggers_travel_as_claim_checks_between_the_reference_and_us() {
    let setup = Setup::start().await;
    let job = setup.client(MODULE, "ingest");

    // Ours → the reference's host.
    let reference = python_host(&setup).await;
    let run = job.trigger(big_payload(), None).await.unwrap();
    assert_claim_checked(&setup, run.run_id()).await;
    assert_whole(&run.wait(DEADLINE).await.unwrap(), "acme.billing-py-1");
    stop_reference(reference).await;

    // Ours → our host.
    let (host, _) = setup
        .host(MODULE, "rust-1", JobSpec::new("ingest").unwrap(), fast())
        .await;
    let run = job.trigger(big_payload(), None).await.unwrap();
    assert_claim_checked(&setup, run.run_id()).await;
    assert_whole(&run.wait(DEADLINE).await.unwrap(), "rust-1");

    // The reference's caller → our host.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("payload.json");
    std::fs::write(&file, serde_json::to_vec(&big_payload()).unwrap()).unwrap();
    let out = Command::new(python())
        .arg(workspace_root().join("tests/interop/job_peer.py"))
        .args([
            "trigger",
            &setup.server.url(),
            &setup.token("api"),
            &setup.project,
            MODULE,
            "ingest",
            &format!("@{}", file.display()),
            "-",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = sent["run_id"].as_str().unwrap();
    assert_claim_checked(&setup, run_id).await;
    assert_whole(&job.run(run_id).wait(DEADLINE).await.unwrap(), "rust-1");

    host.close_now().await;
    setup.stop().await;
}
