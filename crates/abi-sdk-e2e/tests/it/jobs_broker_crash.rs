//! A broker crash runs no job twice: nats-server is killed (-9) and
//! restarted on the same store while triggers arrive steadily and runs are
//! in flight on a live host. The server loses the consumer's last delivery
//! state (synced every two minutes by default) and hands triggers of runs
//! still RUNNING out again as first deliveries; the host sees the live
//! owner's fresh heartbeat (or its own claim) and starts no second attempt.
//! Every run ends SUCCEEDED on attempt 1 and every handler started once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use abi_sdk::documents::{FindQuery, Value};
use abi_sdk::jobs::{JobHostOptions, JobSpec};
use abi_test_support::wait_until;
use abi_wire::jobs;
use async_nats::connection::State;
use futures::StreamExt as _;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.crash";
/// How long each run works: several runs are in flight at the crash.
const WORK_MS: u64 = 2_500;
/// One trigger this often, before and after the crash.
const TRIGGER_EVERY: Duration = Duration::from_millis(100);

fn int(doc: &abi_sdk::documents::Document, key: &str) -> i64 {
    match doc.data.get(key) {
        Some(Value::Int(n)) => *n,
        _ => -1,
    }
}

fn text(doc: &abi_sdk::documents::Document, key: &str) -> String {
    match doc.data.get(key) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_crash_under_steady_triggers_runs_nothing_twice() {
    let mut setup = Setup::start().await;
    let options = JobHostOptions {
        ack_wait: Duration::from_secs(3),
        heartbeat_interval: Duration::from_millis(250),
        ..fast()
    };
    // Attempts left: a second start would show as attempt 2.
    let spec = JobSpec::new("ingest")
        .unwrap()
        .max_attempts(3)
        .unwrap()
        .max_concurrency(64)
        .unwrap();
    let (host, calls) = setup.host(MODULE, "rust-1", spec, options).await;
    let job = setup.client(MODULE, "ingest");
    let payload = json!({"sleep_ms": WORK_MS});

    // Steady triggers for a while, then the crash with runs in flight.
    for _ in 0..20 {
        job.trigger(payload.clone(), None).await.unwrap();
        tokio::time::sleep(TRIGGER_EVERY).await;
    }
    setup.server.restart().await;
    wait_until(DEADLINE, || async {
        setup.nats.connection_state() == State::Connected
    })
    .await
    .expect("the client reconnects");
    // Triggers go on after the restart (a publish the outage refused is
    // simply not a run).
    for _ in 0..10 {
        let _ = job.trigger(payload.clone(), None).await;
        tokio::time::sleep(TRIGGER_EVERY).await;
    }

    // Every run the stream holds ends, on its first attempt.
    let docs = setup.links(MODULE, "x").documents;
    let collection = jobs::runs_collection(&setup.project);
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let name = jobs::JobSubjects::new(&setup.project, MODULE, "ingest").consumer();
    wait_until(DEADLINE, || async {
        let Ok(info) = stream.consumer_info(&name).await else {
            return false;
        };
        info.num_pending == 0 && info.num_ack_pending == 0
    })
    .await
    .expect("every trigger is acknowledged");
    let records: Vec<_> = docs
        .find_all(&collection, FindQuery::default())
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(records.len() >= 20, "{} runs recorded", records.len());
    let outcomes: BTreeMap<String, (String, i64)> = records
        .iter()
        .map(|doc| (doc.id.clone(), (text(doc, "status"), int(doc, "attempt"))))
        .collect();
    let twice: Vec<_> = outcomes
        .iter()
        .filter(|(_, outcome)| *outcome != &("SUCCEEDED".to_owned(), 1))
        .collect();
    assert!(
        twice.is_empty(),
        "runs not SUCCEEDED on attempt 1: {twice:?}"
    );
    assert_eq!(
        calls.count(),
        records.len(),
        "each run's handler started exactly once"
    );
    host.close_now().await;
    setup.stop().await;
}
