//! A short NATS outage does not fail a running job: the nats-server
//! restarts (same port, same store) while a run waits, the job is fetched
//! again within seconds (a pull the restart lost is not waited out), the
//! run's heartbeats and progress saves resume on the new connection for
//! longer than an ack wait, and it ends SUCCEEDED on its first attempt,
//! delivered once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::documents::{Datetime, Value};
use abi_sdk::jobs::{JobHostOptions, JobSpec};
use abi_test_support::wait_until;
use abi_wire::jobs;
use async_nats::connection::State;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_restart_mid_run_does_not_fail_it() {
    let mut setup = Setup::start().await;
    let ack_wait = Duration::from_secs(3);
    let options = JobHostOptions {
        ack_wait,
        heartbeat_interval: Duration::from_millis(250),
        ..fast()
    };
    // Attempts and a slot left: a lost heartbeat would show as a second start.
    let spec = JobSpec::new("ingest")
        .unwrap()
        .max_attempts(3)
        .unwrap()
        .max_concurrency(2)
        .unwrap();
    let (host, calls) = setup.host(MODULE, "rust-1", spec, options).await;
    let job = setup.client(MODULE, "ingest");
    let run = job.trigger(json!({"gate": true}), None).await.unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();

    setup.server.restart().await;
    let back = Datetime::now().unix_micros();
    wait_until(DEADLINE, || async {
        setup.nats.connection_state() == State::Connected
    })
    .await
    .expect("the client reconnects");
    // The job is fetched again soon: a pull the restart lost is not waited out.
    let quick = job.trigger(json!({}), None).await.unwrap();
    let record = quick.wait(Duration::from_secs(20)).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED");
    let fetched = Datetime::now().unix_micros() - back;
    assert!(
        fetched < 4_500_000,
        "the next trigger ran {fetched} µs after the restart"
    );
    // Heartbeats stored for an ack wait more while the job is fetched: the
    // server would have redelivered the trigger (to the free slot) had they
    // not reached it.
    let docs = setup.links(MODULE, "x").documents;
    let collection = jobs::runs_collection(&setup.project);
    let later =
        Datetime::from_unix_micros(Datetime::now().unix_micros() + ack_wait.as_micros() as i64)
            .unwrap()
            .isoformat();
    wait_until(DEADLINE, || async {
        match docs.get(&collection, run.run_id()).await {
            Ok(doc) => matches!(&doc.data["heartbeat_at"], Value::String(t) if *t > later),
            Err(_) => false,
        }
    })
    .await
    .expect("the run heartbeats after the restart");
    calls.release.notify_one();

    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(
        (
            record.status.as_str(),
            record.attempt,
            record.error.as_str()
        ),
        ("SUCCEEDED", 1, "")
    );
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let name = jobs::JobSubjects::new(&setup.project, MODULE, "ingest").consumer();
    wait_until(DEADLINE, || async {
        let info = stream.consumer_info(&name).await.unwrap();
        info.num_pending == 0 && info.num_ack_pending == 0
    })
    .await
    .expect("the trigger is acknowledged");
    let info = stream.consumer_info(&name).await.unwrap();
    assert_eq!(info.num_redelivered, 0, "delivered once");
    assert_eq!(calls.count(), 2, "each handler started once");
    host.close_now().await;
    setup.stop().await;
}
