//! A trigger sent before the job's consumer first existed is not lost (the
//! reference's hosts create it with `DeliverPolicy.NEW` on first start, so
//! such a trigger is never delivered): our caller creates the consumer,
//! with the hosts' exact config, before its first trigger. The reference's
//! host and ours then start on it unchanged and run the trigger.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk::jobs::JobSpec;
use abi_test_support::{python, spawn_until_ready, workspace_root};
use abi_wire::jobs;
use serde_json::json;
use tokio::process::Command;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

async fn consumer_config(setup: &Setup, job: &str) -> Option<serde_json::Value> {
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let name = jobs::JobSubjects::new(&setup.project, MODULE, job).consumer();
    let info = stream.consumer_info(name).await.ok()?;
    Some(serde_json::to_value(info.config).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_triggered_before_any_host_ever_ran_runs_when_one_starts() {
    let setup = Setup::start().await;
    for job in ["ingest", "other"] {
        assert_eq!(consumer_config(&setup, job).await, None, "never hosted");
    }
    let ingest = setup
        .client(MODULE, "ingest")
        .trigger(json!({"n": 1}), None)
        .await
        .unwrap();
    let other = setup
        .client(MODULE, "other")
        .trigger(json!({"n": 2}), None)
        .await
        .unwrap();
    // Created by the caller (`None` without the fix: the runs below never
    // start).
    let before_ingest = consumer_config(&setup, "ingest").await;
    let before_other = consumer_config(&setup, "other").await;

    // The reference's host starts on the consumer our caller made.
    let mut command = Command::new(python());
    command
        .arg(workspace_root().join("tests/interop/job_peer.py"))
        .args([
            "serve",
            &setup.server.url(),
            &setup.token(MODULE),
            &setup.project,
            MODULE,
            "ingest",
        ])
        .env("PYTHONUNBUFFERED", "1")
        .stdin(std::process::Stdio::null());
    let mut reference = spawn_until_ready(command, "ready", DEADLINE)
        .await
        .expect("the reference job host starts");
    let record = ingest.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED");
    assert_eq!(record.to_json()["payload"], json!({"n": 1}));
    assert_eq!(
        consumer_config(&setup, "ingest").await,
        before_ingest,
        "the reference's start left the consumer as our caller made it"
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &reference.id().unwrap().to_string()])
        .status();
    tokio::time::timeout(DEADLINE, reference.wait())
        .await
        .unwrap()
        .unwrap();

    // Ours.
    let (host, calls) = setup
        .host(MODULE, "rust-1", JobSpec::new("other").unwrap(), fast())
        .await;
    let record = other.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED");
    assert_eq!(calls.count(), 1);
    assert_eq!(
        consumer_config(&setup, "other").await,
        before_other,
        "our host's start left it unchanged too"
    );
    host.close_now().await;
    setup.stop().await;
}
