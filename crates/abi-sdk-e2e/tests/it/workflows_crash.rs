//! A host killed at each journal write point of a step, end to end. A step's
//! end is two writes, the result then the summary, after the start; a kill -9
//! leaves the journal in one of the prefixes of that sequence, and nothing
//! else (each write is one compare-and-swap put). So each prefix is written
//! here exactly as a dead host leaves it, with the RUNNING run record its
//! attempt wrote before its handler ran (its heartbeat long stale), for a
//! trigger no live host holds, and our host then runs the trigger: a step whose result was stored never runs
//! again (better than the reference, which runs it again when the host died
//! between the result and the summary), and the run's output is the stored
//! results, not fresh ones.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use abi_sdk::documents::Value;
use abi_sdk::jobs::JobSpec;
use abi_sdk::workflows::journal::Finish;
use abi_sdk::workflows::{FlowContext, Journal, StepStore, workflow_fn};
use abi_wire::jobs::field as jobs_field;
use abi_wire::workflows::{self as wire, StepKind, StepStatus, field};
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup};

const MODULE: &str = "acme.crashy";
/// A heartbeat no host would take for a live owner's.
const LONG_AGO: &str = "2020-01-01T00:00:00+00:00";

/// Where the previous host died, in step `b`'s writes.
#[derive(Debug, Clone, Copy)]
enum KilledAt {
    /// After `b`'s start, before its result.
    BeforeResult,
    /// After `b`'s result, before its summary.
    BetweenResultAndSummary,
    /// After `b`'s summary.
    AfterSummary,
}

/// When the stream stored the trigger at `sequence`, as a host reads it.
async fn fired_at(setup: &Setup, sequence: u64) -> String {
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js
        .get_stream(abi_wire::jobs::stream(&setup.project))
        .await
        .unwrap();
    let stored = stream.get_raw_message(sequence).await.unwrap();
    abi_sdk::jobs::time::fired_at(stored.time.unix_timestamp_nanos())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_result_was_stored_never_runs_again_after_a_kill_at_any_write() {
    let setup = Setup::start().await;
    let documents = setup.links(MODULE, "rust-1").documents;
    let client = setup.client(MODULE, "crashy");
    let points = [
        KilledAt::BeforeResult,
        KilledAt::BetweenResultAndSummary,
        KilledAt::AfterSummary,
    ];
    // One trigger per kill point, stored before any host serves the job;
    // step `a` finished (result 10) and `b` was at the kill point (result 20).
    let runs_collection = abi_wire::jobs::runs_collection(&setup.project);
    documents
        .ensure_collection(abi_sdk::documents::CollectionSpec::new(
            runs_collection.clone(),
        ))
        .await
        .unwrap();
    let mut runs = Vec::new();
    for point in points {
        let run = client.trigger(json!({}), None).await.unwrap();
        let sequence = abi_wire::jobs::parse_run_id(run.run_id()).unwrap().1;
        let fired = fired_at(&setup, sequence).await;
        // The dead host's attempt 1, as it wrote its record before running.
        let record = [
            (jobs_field::JOB, Value::from("crashy")),
            (jobs_field::RUN_ID, Value::from(run.run_id())),
            (jobs_field::MODULE_ID, Value::from(MODULE)),
            (jobs_field::STATUS, Value::from("RUNNING")),
            (jobs_field::ATTEMPT, Value::Int(1)),
            (jobs_field::MAX_ATTEMPTS, Value::Int(3)),
            (jobs_field::INSTANCE, Value::from("dead-1")),
            (
                jobs_field::SEQUENCE,
                Value::Int(i64::try_from(sequence).unwrap()),
            ),
            (jobs_field::FIRED_AT, Value::from(fired.as_str())),
            (jobs_field::STARTED_AT, Value::from(LONG_AGO)),
            (jobs_field::HEARTBEAT_AT, Value::from(LONG_AGO)),
            (jobs_field::ERROR, Value::from("")),
        ];
        let record = record.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        documents
            .put(&runs_collection, run.run_id(), record, Some(0))
            .await
            .unwrap();
        let store = StepStore::new(documents.clone(), &setup.project, run.run_id(), &fired);
        store.ensure().await.unwrap();
        let done = |json: &'static str| Finish {
            status: StepStatus::Succeeded,
            result_json: Some(json),
            error: "",
            duration_ms: 1,
            claim_check: None,
        };
        store.start("a", StepKind::Step, "T0", false).await.unwrap();
        store.finish("a", &done("10"), "T1").await.unwrap();
        store.start("b", StepKind::Step, "T2", false).await.unwrap();
        match point {
            KilledAt::BeforeResult => {}
            KilledAt::BetweenResultAndSummary => {
                let journal = Journal {
                    run_id: run.run_id(),
                    fired_at: &fired,
                };
                documents
                    .put(
                        &wire::results_collection(&setup.project),
                        &wire::step_id(run.run_id(), "b"),
                        journal.result("b", "20"),
                        None,
                    )
                    .await
                    .unwrap();
            }
            KilledAt::AfterSummary => {
                store.finish("b", &done("20"), "T3").await.unwrap();
            }
        }
        runs.push((point, run));
    }

    // Our host takes the three triggers; live steps would return 1 and 2.
    let (a_runs, b_runs) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a_count, b_count) = (a_runs.clone(), b_runs.clone());
    let handler = workflow_fn(move |cx: FlowContext, _input: serde_json::Value| {
        let (a_count, b_count) = (a_count.clone(), b_count.clone());
        async move {
            let a: i64 = cx
                .step("a", || {
                    let n = a_count.clone();
                    async move {
                        n.fetch_add(1, Ordering::SeqCst);
                        Ok(1)
                    }
                })
                .await?;
            let b: i64 = cx
                .step("b", || {
                    let n = b_count.clone();
                    async move {
                        n.fetch_add(1, Ordering::SeqCst);
                        Ok(2)
                    }
                })
                .await?;
            Ok(json!({"a": a, "b": b}))
        }
    });
    let spec = JobSpec::new("crashy")
        .unwrap()
        .as_workflow()
        .max_attempts(3)
        .unwrap();
    let host = setup.serve_one(MODULE, "rust-1", spec, handler).await;

    for (point, run) in &runs {
        let record = run.wait(DEADLINE).await.unwrap();
        assert_eq!(record.status, "SUCCEEDED", "{point:?}: {record:?}");
        let b = match point {
            KilledAt::BeforeResult => 2,
            KilledAt::BetweenResultAndSummary | KilledAt::AfterSummary => 20,
        };
        assert_eq!(
            record.result,
            Some(json!({"a": 10, "b": b})),
            "{point:?}: the stored results, not fresh ones"
        );
        let summary = documents
            .get(
                &wire::steps_collection(&setup.project),
                &wire::step_id(run.run_id(), "b"),
            )
            .await
            .unwrap()
            .data;
        assert_eq!(
            summary.get(field::STATUS),
            Some(&Value::from("SUCCEEDED")),
            "{point:?}: the summary is completed"
        );
        assert_eq!(
            summary.get(field::RESULT_BYTES),
            Some(&Value::Int(if b == 2 { 1 } else { 2 })),
            "{point:?}"
        );
    }
    assert_eq!(
        a_runs.load(Ordering::SeqCst),
        0,
        "a finished before every kill"
    );
    assert_eq!(
        b_runs.load(Ordering::SeqCst),
        1,
        "b runs again only where its result was never stored"
    );

    host.close_now().await;
    setup.stop().await;
}
