//! A rollout of a module with jobs (two real module processes per
//! generation, jobs declared with a served `JobHost`): a STAGED v2
//! runs no job while v1 serves; at the cutover v1's run in flight is handed
//! back and v2 finishes it, on its first attempt: no run lost or doubled; a
//! workflow run caught in its second step resumes on v2 with its first
//! step replayed, not run again, and no attempt spent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use abi_sdk::TokenSource;
use abi_sdk::jobs::JobClient;
use abi_sdk_e2e::World;
use abi_test_support::{requests, wait_until};
use abi_wire::workflows::field as wf;
use serde_json::json;
use tokio::process::{Child, Command};

use super::jobs_fixture::{DEADLINE, Documents};

const BILLING: &str = "acme.billing";
const OTHER: &str = "acme.other";
const COHORT: &str = "acme.billing,acme.other";

fn spawn(world: &World, id: &str, rollout: &str, block: bool) -> Child {
    Command::new(env!("CARGO_BIN_EXE_job-module"))
        .envs(world.module_env(id))
        .env("ABI_ROLLOUT_ID", rollout)
        .env("ABI_ROLLOUT_MODULES", COHORT)
        .env("E2E_DRAIN_MS", "3500")
        .env("E2E_JOB_BLOCK", if block { "1" } else { "0" })
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn count(world: &World, id: &str, status: &str) -> usize {
    world
        .statuses(id)
        .await
        .iter()
        .filter(|(_, s)| s == status)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_generation_runs_no_job_and_takes_over_at_the_cutover() {
    let world = World::start(20.0).await;
    let documents = Documents::start(&world.nats.url(), &world.project, abi_sdk_e2e::SECRET).await;
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    let job = JobClient::new(
        nats,
        TokenSource::issued(requests::service_token(abi_sdk_e2e::SECRET, "api")),
        &world.project,
        BILLING,
        "ingest",
    );
    let mut v1 = vec![
        spawn(&world, BILLING, "v1", true),
        spawn(&world, OTHER, "v1", false),
    ];
    world.wait_status(BILLING, "READY").await;
    world.wait_status(OTHER, "READY").await;
    let first = job.trigger(json!({"n": 0}), None).await.unwrap();
    let v1_instance = first.wait(DEADLINE).await.unwrap().to_json()["instance"].clone();

    // Half of v2: STAGED; its job host only prepared, v1 runs everything.
    let mut v2 = vec![spawn(&world, BILLING, "v2", false)];
    wait_until(DEADLINE, || async {
        count(&world, BILLING, "STAGED").await == 1
    })
    .await
    .unwrap();
    for n in 1..4 {
        let run = job.trigger(json!({"n": n}), None).await.unwrap();
        let record = run.wait(DEADLINE).await.unwrap();
        assert_eq!(
            record.to_json()["instance"],
            v1_instance,
            "a STAGED host ran {n}"
        );
    }
    let in_flight = job.trigger(json!({"block": true}), None).await.unwrap();
    // And a workflow run in its second step (v1 blocks there), its first journaled.
    let flow = JobClient::new(
        async_nats::connect(world.nats.url()).await.unwrap(),
        TokenSource::issued(requests::service_token(abi_sdk_e2e::SECRET, "api")),
        &world.project,
        BILLING,
        "flow",
    );
    let workflow = flow.trigger(json!({}), None).await.unwrap();
    let steps = || async {
        abi_sdk::workflows::read_steps(flow.documents(), &world.project, workflow.run_id())
            .await
            .unwrap()
    };
    let field = |step: &abi_sdk::documents::Data, name: &str| step.get(name).cloned();
    wait_until(DEADLINE, || async {
        in_flight.status().await.unwrap().status == "RUNNING"
            && steps().await.iter().any(|s| {
                field(s, wf::KEY) == Some("second".into())
                    && field(s, wf::STATUS) == Some("RUNNING".into())
            })
    })
    .await
    .unwrap();
    let first_before = steps()
        .await
        .into_iter()
        .find(|s| field(s, wf::KEY) == Some("first".into()));

    // The rest of v2: the cutover; v1 drains and hands its run back.
    v2.push(spawn(&world, OTHER, "v2", false));
    let record = in_flight.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 1));
    assert_ne!(record.to_json()["instance"], v1_instance);
    let finished = workflow.wait(DEADLINE).await.unwrap();
    assert_eq!(
        (finished.status.as_str(), finished.attempt),
        ("SUCCEEDED", 1),
        "the cutover spent no attempt of the workflow: {:?}",
        finished.to_json()
    );
    assert_eq!(finished.result, Some(json!({"sum": 3})));
    let first_after = steps()
        .await
        .into_iter()
        .find(|s| field(s, wf::KEY) == Some("first".into()));
    assert!(first_before.is_some());
    assert_eq!(
        first_after, first_before,
        "v2 replayed `first`, it did not run it again"
    );
    for mut process in v1.drain(..) {
        let status = tokio::time::timeout(DEADLINE, process.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "v1 stopped with {status}");
    }
    // v2 serves the job now.
    let after = job.trigger(json!({"n": 9}), None).await.unwrap();
    let record = after.wait(DEADLINE).await.unwrap();
    assert_eq!(
        record.to_json()["instance"],
        in_flight.status().await.unwrap().to_json()["instance"]
    );
    drop(v2);
    documents.stop().await;
}
