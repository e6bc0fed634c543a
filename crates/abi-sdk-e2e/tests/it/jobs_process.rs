//! SIGTERM to a real module process mid-run (jobs declared with
//! a served `JobHost`, hosted by the runner): the run is handed back
//! within the shutdown budget without spending an attempt, and another
//! process of the module finishes it. On the reference's behaviour the run
//! ends FAILED "Interrupted by host shutdown" (`max_attempts` is 1): the
//! attempt count and the status below fail there. And kill -9 of a real
//! process in a workflow's second step: once its heartbeats stop, another
//! process takes the run and replays the first step instead of running it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

use abi_sdk::TokenSource;
use abi_sdk::jobs::JobClient;
use abi_sdk_e2e::World;
use abi_test_support::{requests, wait_until};
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use super::jobs_fixture::{DEADLINE, Documents};

const MODULE: &str = "acme.billing";

fn spawn(world: &World, block: bool) -> Child {
    let binary = env!("CARGO_BIN_EXE_job-module");
    let mut command = Command::new(binary);
    command
        .env_remove("ABI_ROLLOUT_ID")
        .env_remove("ABI_ROLLOUT_MODULES")
        .envs(world.module_env(MODULE))
        .env("ABI_SHUTDOWN_GRACE_SECS", "6")
        .env("E2E_JOB_BLOCK", if block { "1" } else { "0" })
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    command.spawn().unwrap()
}

/// Waits for the next stdout line starting with `EVENT <what>`.
async fn expect(child: &mut Child, what: &str) -> String {
    let stdout = child.stdout.as_mut().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let prefix = format!("EVENT {what}");
    tokio::time::timeout(DEADLINE, async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("the module's stdout closed");
            if line.starts_with(&prefix) {
                return line;
            }
        }
    })
    .await
    .expect("the event in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_run_hands_the_run_back_and_another_process_finishes_it() {
    let world = World::start(20.0).await;
    let documents = Documents::start(&world.nats.url(), &world.project, abi_sdk_e2e::SECRET).await;
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    let job = JobClient::new(
        nats,
        TokenSource::issued(requests::service_token(abi_sdk_e2e::SECRET, "api")),
        &world.project,
        MODULE,
        "ingest",
    );
    let mut a = spawn(&world, true);
    world.wait_status(MODULE, "READY").await;
    let run = job.trigger(json!({"block": true}), None).await.unwrap();
    expect(&mut a, "run").await;
    let running = run.status().await.unwrap();
    assert_eq!((running.status.as_str(), running.attempt), ("RUNNING", 1));
    let a_instance = running.to_json()["instance"].clone();

    let _b = spawn(&world, false);
    wait_until(DEADLINE, || async {
        world
            .statuses(MODULE)
            .await
            .iter()
            .filter(|(_, s)| s == "READY")
            .count()
            == 2
    })
    .await
    .unwrap();
    let sent = tokio::time::Instant::now();
    let pid = a.id().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let record = run.wait(DEADLINE).await.unwrap();
    let handed_over = sent.elapsed();
    assert_eq!(record.status, "SUCCEEDED", "{:?}", record.to_json());
    assert_eq!(record.attempt, 1, "the shutdown spent no attempt");
    assert_ne!(record.to_json()["instance"], a_instance);
    let status = tokio::time::timeout(DEADLINE, a.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "A stopped with {status}");
    // The run had the drain's share of the budget less the hand-back
    // reserve (2 s grace + 1 s) to finish, then was handed back within the
    // 6 s budget.
    assert!(handed_over >= Duration::from_secs(1), "{handed_over:?}");
    assert!(handed_over < Duration::from_secs(6), "{handed_over:?}");
    eprintln!("SIGTERM to the run finished elsewhere: {handed_over:?}");
    documents.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_workflow_and_another_process_replays_the_finished_step() {
    let world = World::start(20.0).await;
    let documents = Documents::start(&world.nats.url(), &world.project, abi_sdk_e2e::SECRET).await;
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    let flow = JobClient::new(
        nats,
        TokenSource::issued(requests::service_token(abi_sdk_e2e::SECRET, "api")),
        &world.project,
        MODULE,
        "flow",
    );
    let mut a = spawn(&world, true);
    world.wait_status(MODULE, "READY").await;
    let run = flow.trigger(json!({}), None).await.unwrap();
    expect(&mut a, "step second").await;
    // A dies in `second`, `first` journaled: no drain, no hand-back.
    let pid = a.id().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    let _ = a.wait().await;

    // B gets the delivery again once A's heartbeats stop (an ack wait).
    let mut b = spawn(&world, false);
    let record = run.wait(Duration::from_secs(180)).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{:?}", record.to_json());
    assert_eq!(record.attempt, 2, "the killed attempt counts");
    assert_eq!(record.result, Some(json!({"sum": 3})));
    let pid = b.id().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let mut printed = String::new();
    let stdout = b.stdout.as_mut().unwrap();
    tokio::time::timeout(
        DEADLINE,
        tokio::io::AsyncReadExt::read_to_string(stdout, &mut printed),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(printed.contains("EVENT step second"), "{printed}");
    assert!(
        !printed.contains("EVENT step first"),
        "the finished step ran again: {printed}"
    );
    let status = tokio::time::timeout(DEADLINE, b.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "B stopped with {status}");
    documents.stop().await;
}
