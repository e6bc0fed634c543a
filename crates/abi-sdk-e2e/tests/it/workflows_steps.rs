//! Workflows on our job host end to end: a real nats-server and document
//! service; a run whose second step fails once is retried by the job host,
//! and the step that had succeeded returns its stored result instead of
//! running again; the journal holds the reference's documents, and a run the
//! reference's host journaled resumes on ours without repeating its step.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use abi_sdk::documents::{FindQuery, Predicate, Value};
use abi_sdk::jobs::{BoundJobHost, JobError, JobHost, JobSpec};
use abi_sdk::workflows::{FlowContext, workflow_fn};
use abi_wire::workflows::{self as wire, field};
use serde::Deserialize;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast, reference_job_host, stop_reference};

const MODULE: &str = "acme.flows";

#[derive(Deserialize)]
struct Input {
    n: i64,
}

#[derive(Default, Clone)]
struct Counts {
    double: Arc<AtomicUsize>,
    plus: Arc<AtomicUsize>,
}

/// Two steps: `double` and `plus`, both counted; `plus` fails its first
/// call when `flaky`.
fn two_steps(counts: Counts, flaky: bool) -> impl abi_sdk::jobs::JobHandler {
    workflow_fn(move |cx: FlowContext, input: Input| {
        let counts = counts.clone();
        async move {
            let doubled: i64 = cx
                .step("double", || {
                    let calls = counts.double.clone();
                    async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        Ok(input.n * 2)
                    }
                })
                .await?;
            let plus: i64 = cx
                .step("plus", || {
                    let calls = counts.plus.clone();
                    async move {
                        if calls.fetch_add(1, Ordering::SeqCst) == 0 && flaky {
                            return Err(JobError::retryable("the first call fails"));
                        }
                        Ok(doubled + 1)
                    }
                })
                .await?;
            Ok(json!({"out": plus}))
        }
    })
}

/// Our host of the workflow `flow` (3 attempts) with [`two_steps`], started.
async fn our_host(setup: &Setup, counts: &Counts, flaky: bool) -> BoundJobHost {
    let spec = JobSpec::new("flow")
        .unwrap()
        .as_workflow()
        .max_attempts(3)
        .unwrap();
    let host = JobHost::new()
        .options(fast())
        .job(spec, two_steps(counts.clone(), flaky))
        .bind(setup.links(MODULE, "rust-1"));
    host.prepare_consumers().await.unwrap();
    host.start_serving().await.unwrap();
    host
}

/// The step summaries `run_id` journaled, by document id.
async fn summaries(setup: &Setup, run_id: &str) -> Vec<(String, abi_sdk::documents::Data)> {
    let documents = setup.links(MODULE, "rust-1").documents;
    let query = FindQuery {
        where_: vec![Predicate::new(field::RUN_ID, "eq", run_id)],
        ..FindQuery::default()
    };
    let steps = wire::steps_collection(&setup.project);
    let page = documents.find(&steps, query).await.unwrap();
    let mut found: Vec<_> = page
        .items
        .into_iter()
        .map(|doc| (doc.id, doc.data))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn text(data: &abi_sdk::documents::Data, key: &str) -> String {
    match data.get(key) {
        Some(Value::String(s)) => s.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_run_does_not_run_a_completed_step_again() {
    let setup = Setup::start().await;
    let counts = Counts::default();
    let host = our_host(&setup, &counts, true).await;
    let documents = setup.links(MODULE, "rust-1").documents;

    let run = setup
        .client(MODULE, "flow")
        .trigger(json!({"n": 20}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{record:?}");
    assert_eq!(record.attempt, 2, "the first attempt failed in `plus`");
    assert_eq!(record.result, Some(json!({"out": 41})));
    assert_eq!(
        counts.double.load(Ordering::SeqCst),
        1,
        "replayed, not run again"
    );
    assert_eq!(counts.plus.load(Ordering::SeqCst), 2);

    let summaries = summaries(&setup, run.run_id()).await;
    let ids: Vec<&str> = summaries.iter().map(|(id, _)| id.as_str()).collect();
    let double_id = wire::step_id(run.run_id(), "double");
    let plus_id = wire::step_id(run.run_id(), "plus");
    assert_eq!(ids, [double_id.as_str(), plus_id.as_str()]);
    let (double, plus) = (&summaries[0].1, &summaries[1].1);
    assert_eq!(text(double, field::STATUS), "SUCCEEDED");
    assert_eq!(double.get(field::ATTEMPT), Some(&Value::Int(1)));
    assert_eq!(double.get(field::RESULT_BYTES), Some(&Value::Int(2)));
    assert_eq!(text(plus, field::STATUS), "SUCCEEDED");
    assert_eq!(
        plus.get(field::ATTEMPT),
        Some(&Value::Int(2)),
        "started twice"
    );
    assert_eq!(text(plus, field::KIND), "step");
    assert_eq!(text(plus, field::FIRED_AT), text(double, field::FIRED_AT));
    assert_eq!(
        text(double, field::FIRED_AT),
        record
            .data
            .get("fired_at")
            .map_or(String::new(), |v| match v {
                Value::String(s) => s.clone(),
                _ => String::new(),
            }),
        "the journal belongs to the run's trigger"
    );
    let results = wire::results_collection(&setup.project);
    let stored = documents.get(&results, &double_id).await.unwrap();
    assert_eq!(text(&stored.data, field::RESULT_JSON), "40");

    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_that_does_not_decode_fails_the_run_at_once() {
    let setup = Setup::start().await;
    let counts = Counts::default();
    let host = our_host(&setup, &counts, true).await;

    let run = setup
        .client(MODULE, "flow")
        .trigger(json!({"n": "twenty"}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "FAILED", "{record:?}");
    assert_eq!(record.attempt, 1, "not retried");
    assert!(
        record
            .error
            .starts_with("InvalidWorkflowInput: Invalid input: "),
        "{}",
        record.error
    );
    assert_eq!(counts.double.load(Ordering::SeqCst), 0);

    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_and_outputs_the_declared_schemas_refuse_fail_the_run_at_once() {
    let setup = Setup::start().await;
    let spec = JobSpec::new("checked")
        .unwrap()
        .input_schema(&json!({
            "type": "object",
            "required": ["n"],
            "properties": {"n": {"type": "integer"}}
        }))
        .unwrap()
        .output_schema(&json!({"type": "object", "required": ["out"]}))
        .unwrap()
        .as_workflow();
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = ran.clone();
    let handler = workflow_fn(move |_cx: FlowContext, input: serde_json::Value| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move {
            if input["bad_output"] == json!(true) {
                return Ok(json!({"nope": 1}));
            }
            Ok(json!({"out": input["n"]}))
        }
    });
    let host = setup.serve_one(MODULE, "rust-1", spec, handler).await;
    let job = setup.client(MODULE, "checked");

    let rows = [
        (
            json!({"n": "x"}),
            "FAILED",
            r#"InvalidWorkflowInput: Invalid input: "x" is not of type "integer" (at /n)"#,
        ),
        (
            json!({"m": 1}),
            "FAILED",
            r#"InvalidWorkflowInput: Invalid input: "n" is a required property"#,
        ),
        (
            json!({"n": 1, "bad_output": true}),
            "FAILED",
            r#"InvalidWorkflowOutput: Invalid output: "out" is a required property"#,
        ),
        (json!({"n": 2}), "SUCCEEDED", ""),
    ];
    for (input, status, error) in rows {
        let record = job
            .trigger(input.clone(), None)
            .await
            .unwrap()
            .wait(DEADLINE)
            .await
            .unwrap();
        assert_eq!(record.status, status, "{input}: {record:?}");
        assert_eq!(record.attempt, 1, "{input}: not retried");
        assert_eq!(record.error, error, "{input}");
    }
    assert_eq!(
        ran.load(Ordering::SeqCst),
        2,
        "refused inputs never reach the handler"
    );
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_the_reference_journaled_resumes_on_our_host_without_repeating_a_step() {
    let setup = Setup::start().await;
    // The reference runs attempt 1: `double` succeeds, `plus` raises.
    let python = reference_job_host(
        &setup.server.url(),
        &setup.token(MODULE),
        &setup.project,
        MODULE,
        &["flow:workflow:3"],
    )
    .await;
    let job = setup.client(MODULE, "flow");
    let run = job
        .trigger(json!({"n": 20, "python_fails": true}), None)
        .await
        .unwrap();
    abi_test_support::wait_until(DEADLINE, || async {
        run.status()
            .await
            .is_ok_and(|r| r.status == "RETRYING" && r.error.contains("python fails plus"))
    })
    .await
    .expect("the reference's attempt fails in `plus`");
    stop_reference(python).await;

    // Ours takes the retry: `double` is the reference's stored result.
    let counts = Counts::default();
    let host = our_host(&setup, &counts, false).await;
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{record:?}");
    assert_eq!(record.attempt, 2);
    assert_eq!(record.result, Some(json!({"out": 41})));
    assert_eq!(
        counts.double.load(Ordering::SeqCst),
        0,
        "the reference's journaled step is not run again"
    );
    assert_eq!(counts.plus.load(Ordering::SeqCst), 1);
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_our_host_journaled_resumes_on_the_reference_without_repeating_a_step() {
    let setup = Setup::start().await;
    // Ours runs attempt 1: `double` succeeds, `plus` is still going when the
    // host closes (a deploy) and hands the run back.
    let doubled = Arc::new(AtomicUsize::new(0));
    let counted = doubled.clone();
    let handler = workflow_fn(move |cx: FlowContext, input: Input| {
        let doubled = counted.clone();
        async move {
            let _: i64 = cx
                .step("double", || {
                    let doubled = doubled.clone();
                    async move {
                        doubled.fetch_add(1, Ordering::SeqCst);
                        Ok(input.n * 2)
                    }
                })
                .await?;
            let _: i64 = cx
                .step("plus", || {
                    futures::future::pending::<Result<i64, JobError>>()
                })
                .await?;
            Ok(json!({}))
        }
    });
    let spec = JobSpec::new("flow")
        .unwrap()
        .as_workflow()
        .max_attempts(3)
        .unwrap();
    let ours = JobHost::new()
        .options(fast())
        .job(spec, handler)
        .bind(setup.links(MODULE, "rust-1"));
    ours.prepare_consumers().await.unwrap();
    ours.start_serving().await.unwrap();
    let run = setup
        .client(MODULE, "flow")
        .trigger(json!({"n": 20}), None)
        .await
        .unwrap();
    let documents = setup.links(MODULE, "rust-1").documents;
    abi_test_support::wait_until(DEADLINE, || async {
        let steps = abi_sdk::workflows::read_steps(&documents, &setup.project, run.run_id())
            .await
            .unwrap();
        steps.iter().any(|s| {
            s.get(field::KEY) == Some(&Value::from("plus"))
                && s.get(field::STATUS) == Some(&Value::from("RUNNING"))
        })
    })
    .await
    .expect("our attempt is in `plus`");
    ours.close_now().await;
    assert_eq!(doubled.load(Ordering::SeqCst), 1);

    // The reference takes the handed-back run: `double` is our stored result.
    let python = reference_job_host(
        &setup.server.url(),
        &setup.token(MODULE),
        &setup.project,
        MODULE,
        &["flow:workflow:3"],
    )
    .await;
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{record:?}");
    assert_eq!(record.attempt, 1, "the hand-back gave the attempt back");
    assert_eq!(record.result, Some(json!({"out": 41})));
    let journal = summaries(&setup, run.run_id()).await;
    let (double, plus) = (&journal[0].1, &journal[1].1);
    assert_eq!(
        double.get(field::ATTEMPT),
        Some(&Value::Int(1)),
        "the reference replayed our journaled step instead of running it"
    );
    assert_eq!(text(plus, field::STATUS), "SUCCEEDED");
    assert_eq!(plus.get(field::ATTEMPT), Some(&Value::Int(2)));
    stop_reference(python).await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_is_claim_checked_when_its_step_opts_in_and_replayed_from_there() {
    let setup = Setup::start().await;
    let (blobs, afters) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (blob_count, after_count) = (blobs.clone(), afters.clone());
    let handler = workflow_fn(move |cx: FlowContext, _input: serde_json::Value| {
        let (blobs, afters) = (blob_count.clone(), after_count.clone());
        async move {
            let large = abi_sdk::workflows::StepOptions {
                large_results: true,
                ..abi_sdk::workflows::StepOptions::default()
            };
            let blob: String = cx
                .step_with("blob", large, || {
                    let blobs = blobs.clone();
                    async move {
                        blobs.fetch_add(1, Ordering::SeqCst);
                        Ok("é".repeat(150_000))
                    }
                })
                .await?;
            let _: bool = cx
                .step("after", || {
                    let afters = afters.clone();
                    async move {
                        if afters.fetch_add(1, Ordering::SeqCst) == 0 {
                            return Err(JobError::retryable("after fails once"));
                        }
                        Ok(true)
                    }
                })
                .await?;
            Ok(json!({"chars": blob.chars().count()}))
        }
    });
    let spec = JobSpec::new("big")
        .unwrap()
        .as_workflow()
        .max_attempts(2)
        .unwrap();
    let host = setup.serve_one(MODULE, "rust-1", spec, handler).await;

    let run = setup
        .client(MODULE, "big")
        .trigger(json!({}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{record:?}");
    assert_eq!(record.attempt, 2);
    assert_eq!(record.result, Some(json!({"chars": 150_000})));
    assert_eq!(
        blobs.load(Ordering::SeqCst),
        1,
        "replayed from the claim check"
    );
    let journal = summaries(&setup, run.run_id()).await;
    let blob = &journal
        .iter()
        .find(|(id, _)| id.ends_with("#blob"))
        .unwrap()
        .1;
    assert_eq!(text(blob, field::STATUS), "SUCCEEDED");
    // "\u00e9" per character, plus the quotes: above the journal's limit.
    assert_eq!(blob.get(field::RESULT_BYTES), Some(&Value::Int(900_002)));
    assert!(!text(blob, field::RESULT_CLAIM_CHECK).is_empty());
    let documents = setup.links(MODULE, "rust-1").documents;
    let results = wire::results_collection(&setup.project);
    let stored = documents
        .try_get(&results, &wire::step_id(run.run_id(), "blob"))
        .await
        .unwrap();
    assert!(
        stored.is_none(),
        "no result document: a Python host runs the step again"
    );
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_map_runs_only_the_items_that_did_not_succeed() {
    let setup = Setup::start().await;
    // Item 3 fails its first call; the others succeed once each.
    let calls: Arc<Vec<AtomicUsize>> = Arc::new((0..6).map(|_| AtomicUsize::new(0)).collect());
    let counted = calls.clone();
    let handler = workflow_fn(move |cx: FlowContext, _input: serde_json::Value| {
        let calls = counted.clone();
        async move {
            let items: Vec<usize> = (0..6).collect();
            let squares: Vec<usize> = cx
                .map("square", items, 2, |i| {
                    let calls = calls.clone();
                    async move {
                        if calls[i].fetch_add(1, Ordering::SeqCst) == 0 && i == 3 {
                            return Err(JobError::retryable("item 3 fails once"));
                        }
                        Ok(i * i)
                    }
                })
                .await?;
            Ok(json!({"squares": squares}))
        }
    });
    let spec = JobSpec::new("fan")
        .unwrap()
        .as_workflow()
        .max_attempts(2)
        .unwrap();
    let host = setup.serve_one(MODULE, "rust-1", spec, handler).await;

    let run = setup
        .client(MODULE, "fan")
        .trigger(json!({}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{record:?}");
    assert_eq!(record.attempt, 2);
    assert_eq!(
        record.result,
        Some(json!({"squares": [0, 1, 4, 9, 16, 25]})),
        "in order"
    );
    let counts: Vec<usize> = calls.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert_eq!(counts[3], 2, "{counts:?}");
    assert!(counts.iter().all(|&n| n >= 1), "{counts:?}");
    // Besides item 3, at most the one item going beside it (two at a time)
    // when it failed ran again; every item the first attempt finished was
    // replayed: its summary shows one start, and it ran once.
    assert!(counts.iter().filter(|&&n| n > 1).count() <= 2, "{counts:?}");
    let journal = summaries(&setup, run.run_id()).await;
    assert_eq!(journal.len(), 6, "one summary per item");
    for (id, summary) in &journal {
        assert_eq!(text(summary, field::STATUS), "SUCCEEDED", "{id}");
        let i: usize = id
            .rsplit_once('[')
            .and_then(|(_, n)| n.trim_end_matches(']').parse().ok())
            .unwrap();
        if summary.get(field::ATTEMPT) == Some(&Value::Int(1)) {
            assert_eq!(counts[i], 1, "{id} was journaled once, so it ran once");
        }
    }
    host.close_now().await;
    setup.stop().await;
}
