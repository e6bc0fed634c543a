//! Workflow calls end to end: a real nats-server and document service, our
//! job hosts and the reference's. A Rust workflow calls a Python workflow
//! (started by the reference's caller) and a Python workflow calls a Rust one
//! (started by ours); a parent handed back while it waits for its child
//! re-attaches to that child on another host, spending no attempt and
//! starting no second child; a cancelled parent cancels its child; a
//! workflow calling itself fails at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use abi_sdk::documents::{Data, FindQuery, Predicate, Value};
use abi_sdk::jobs::{BoundJobHost, JobError, JobHandler, JobHost, JobSpec};
use abi_sdk::workflows::{FlowContext, WorkflowClient, workflow_fn};
use abi_test_support::{python, workspace_root};
use abi_wire::jobs;
use abi_wire::workflows::field;
use serde_json::json;
use tokio::sync::Semaphore;

use super::jobs_fixture::{DEADLINE, Setup, fast, reference_job_host, stop_reference};

const PARENT: &str = "acme.parent";
const CHILD: &str = "acme.child";

/// Our host of `workflows` (name, max attempts, handler) for `module`,
/// started as `instance`.
async fn serve(
    setup: &Setup,
    module: &str,
    instance: &str,
    workflows: Vec<(&str, u32, Box<dyn JobHandler>)>,
) -> BoundJobHost {
    let mut host = JobHost::new().options(fast());
    for (name, attempts, handler) in workflows {
        let spec = JobSpec::new(name)
            .unwrap()
            .as_workflow()
            .max_attempts(attempts)
            .unwrap();
        let handler: Arc<dyn JobHandler> = Arc::from(handler);
        host = host.job(spec, move |cx| handler.call(cx));
    }
    let host = host.bind(setup.links(module, instance));
    host.prepare_consumers().await.unwrap();
    host.start_serving().await.unwrap();
    host
}

/// A child whose one step counts its starts and waits for a permit of
/// `gate`, then returns `{"n": n * 10}`.
fn gated(started: Arc<AtomicUsize>, gate: Arc<Semaphore>) -> Box<dyn JobHandler> {
    Box::new(workflow_fn(
        move |cx: FlowContext, input: serde_json::Value| {
            let (started, gate) = (started.clone(), gate.clone());
            async move {
                let n = input["n"].as_i64().unwrap_or_default();
                let out: i64 = cx
                    .step("work", || {
                        let (started, gate) = (started.clone(), gate.clone());
                        async move {
                            started.fetch_add(1, Ordering::SeqCst);
                            gate.acquire().await.unwrap().forget();
                            Ok(n * 10)
                        }
                    })
                    .await?;
                Ok(json!({"n": out}))
            }
        },
    ))
}

/// Our host of [`CHILD`]'s `gated` workflow, its gate holding `permits`:
/// the host, the count of its step's starts, the gate.
async fn gated_child(
    setup: &Setup,
    permits: usize,
) -> (BoundJobHost, Arc<AtomicUsize>, Arc<Semaphore>) {
    let (started, gate) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Semaphore::new(permits)),
    );
    let host = serve(
        setup,
        CHILD,
        "child-1",
        vec![("gated", 1, gated(started.clone(), gate.clone()))],
    )
    .await;
    (host, started, gate)
}

/// A parent that calls `module`'s `workflow` as step `child` on its input.
fn parent_of(module: &'static str, workflow: &'static str) -> Box<dyn JobHandler> {
    Box::new(workflow_fn(
        move |cx: FlowContext, input: serde_json::Value| async move {
            let child: serde_json::Value = cx.call_keyed("child", module, workflow, &input).await?;
            Ok(json!({"child": child}))
        },
    ))
}

/// The record of every run of `job` in `module`'s namespace.
async fn runs_of(setup: &Setup, module: &str, job: &str) -> Vec<Data> {
    let documents = setup.links(module, "reader").documents;
    let query = FindQuery {
        where_: vec![Predicate::new(jobs::field::JOB, "eq", job)],
        ..FindQuery::default()
    };
    let page = documents
        .find(&jobs::runs_collection(&setup.project), query)
        .await
        .unwrap();
    page.items.into_iter().map(|doc| doc.data).collect()
}

fn text(data: &Data, key: &str) -> String {
    match data.get(key) {
        Some(Value::String(s)) => s.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

/// The child run id the summary of step `key` names, once it names one.
fn child_of(steps: &[Data], key: &str) -> Option<String> {
    let step = steps.iter().find(|s| text(s, field::KEY) == key)?;
    match step.get(field::CHILD) {
        Some(Value::Object(child)) => Some(text(child, field::CHILD_RUN_ID)),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_handed_back_mid_call_reattaches_to_its_child_spending_no_attempt() {
    let setup = Setup::start().await;
    let (child_host, started, gate) = gated_child(&setup, 0).await;
    let first = serve(
        &setup,
        PARENT,
        "parent-1",
        vec![("parent", 3, parent_of(CHILD, "gated"))],
    )
    .await;
    let client = WorkflowClient::new(setup.client(PARENT, "parent"));
    let run = client.start(&json!({"n": 4}), None).await.unwrap();

    abi_test_support::wait_until(DEADLINE, || async {
        let steps = run.steps().await.unwrap();
        child_of(&steps, "child").is_some() && started.load(Ordering::SeqCst) == 1
    })
    .await
    .expect("the call journals its child, and the child starts");
    let child_run = child_of(&run.steps().await.unwrap(), "child").unwrap();

    // A deploy: the parent's host hands the run back while it waits.
    first.close_now().await;
    let handed = run.status().await.unwrap();
    assert_eq!(handed.status, "RETRYING", "{handed:?}");
    assert_eq!(handed.attempt, 0, "the attempt is given back");

    let second = serve(
        &setup,
        PARENT,
        "parent-2",
        vec![("parent", 3, parent_of(CHILD, "gated"))],
    )
    .await;
    gate.add_permits(1);
    let out: serde_json::Value = run.result(DEADLINE).await.unwrap();
    assert_eq!(out, json!({"child": {"n": 40}}));
    let record = run.status().await.unwrap();
    assert_eq!(record.attempt, 1, "the hand-back spent no attempt");

    let steps = run.steps().await.unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(
        child_of(&steps, "child").as_deref(),
        Some(child_run.as_str())
    );
    assert_eq!(text(&steps[0], field::STATUS), "SUCCEEDED");
    assert_eq!(text(&steps[0], field::KIND), "call");
    assert_eq!(
        steps[0].get(field::ATTEMPT),
        Some(&Value::Int(1)),
        "re-attached, not started again"
    );
    assert_eq!(
        runs_of(&setup, CHILD, "gated").await.len(),
        1,
        "one child run"
    );
    assert_eq!(started.load(Ordering::SeqCst), 1, "the child ran once");

    second.close_now().await;
    child_host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_parent_cancels_its_child_and_a_self_call_fails_at_once() {
    let setup = Setup::start().await;
    let (child_host, started, _gate) = gated_child(&setup, 0).await;
    let parent_host = serve(
        &setup,
        PARENT,
        "parent-1",
        vec![
            ("parent", 3, parent_of(CHILD, "gated")),
            ("selfish", 3, parent_of(PARENT, "selfish")),
        ],
    )
    .await;

    let selfish = WorkflowClient::new(setup.client(PARENT, "selfish"));
    let refused = selfish
        .run::<_, serde_json::Value>(&json!({}), DEADLINE)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(
            "ended FAILED: SelfCall: Workflow 'selfish' of module 'acme.parent' cannot call itself"
        ),
        "{refused}"
    );
    let selfish_runs = runs_of(&setup, PARENT, "selfish").await;
    assert_eq!(
        selfish_runs[0].get(jobs::field::ATTEMPT),
        Some(&Value::Int(1))
    );

    let client = WorkflowClient::new(setup.client(PARENT, "parent"));
    let run = client.start(&json!({"n": 1}), None).await.unwrap();
    abi_test_support::wait_until(DEADLINE, || async {
        let steps = run.steps().await.unwrap();
        child_of(&steps, "child").is_some() && started.load(Ordering::SeqCst) == 1
    })
    .await
    .expect("the child starts");
    run.cancel().await.unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "CANCELLED", "{record:?}");

    let steps = run.steps().await.unwrap();
    let child_run = child_of(&steps, "child").unwrap();
    assert_eq!(text(&steps[0], field::STATUS), "CANCELLED");
    assert_eq!(
        text(&steps[0], field::ERROR),
        "The parent run was cancelled"
    );
    let child = setup
        .client(CHILD, "gated")
        .run(child_run)
        .wait(DEADLINE)
        .await
        .unwrap();
    assert_eq!(
        child.status, "CANCELLED",
        "the child freed its slot: {child:?}"
    );

    parent_host.close_now().await;
    child_host.close_now().await;
    setup.stop().await;
}

/// `run_workflow` of `tests/interop/job_peer.py`: the reference's
/// `WorkflowProxy.start` and `WorkflowRun.result` and `steps`.
async fn python_run(
    setup: &Setup,
    module: &str,
    workflow: &str,
    input: &serde_json::Value,
) -> serde_json::Value {
    let out = tokio::process::Command::new(python())
        .arg(workspace_root().join("tests/interop/job_peer.py"))
        .args([
            "run_workflow",
            &setup.server.url(),
            &setup.token("api"),
            &setup.project,
            module,
            workflow,
            &input.to_string(),
            &DEADLINE.as_secs().to_string(),
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_workflow_calls_a_python_one_and_its_retry_replays_the_call() {
    let setup = Setup::start().await;
    let python_host = reference_job_host(
        &setup.server.url(),
        &setup.token("acme.pyflows"),
        &setup.project,
        "acme.pyflows",
        &["flow:workflow:3"],
    )
    .await;
    let after = Arc::new(AtomicUsize::new(0));
    let counted = after.clone();
    let parent = workflow_fn(move |cx: FlowContext, input: serde_json::Value| {
        let after = counted.clone();
        async move {
            let child: serde_json::Value = cx.call("acme.pyflows", "flow", &input).await?;
            let done: bool = cx
                .step("after", || {
                    let after = after.clone();
                    async move {
                        if after.fetch_add(1, Ordering::SeqCst) == 0 {
                            return Err(JobError::retryable("after fails once"));
                        }
                        Ok(true)
                    }
                })
                .await?;
            Ok(json!({"child": child, "after": done}))
        }
    });
    let host = serve(
        &setup,
        PARENT,
        "parent-1",
        vec![("parent", 3, Box::new(parent))],
    )
    .await;

    let ran = python_run(&setup, PARENT, "parent", &json!({"n": 20})).await;
    assert_eq!(ran["output"], json!({"child": {"out": 41}, "after": true}));
    assert_eq!(
        ran["steps"],
        json!(["call:acme.pyflows.flow#1", "after"]),
        "the reference reads our journal"
    );
    assert_eq!(after.load(Ordering::SeqCst), 2);
    let parent_runs = runs_of(&setup, PARENT, "parent").await;
    assert_eq!(
        parent_runs[0].get(jobs::field::ATTEMPT),
        Some(&Value::Int(2))
    );
    let children = runs_of(&setup, "acme.pyflows", "flow").await;
    assert_eq!(
        children.len(),
        1,
        "the retry replayed the call: {children:?}"
    );
    assert_eq!(text(&children[0], jobs::field::STATUS), "SUCCEEDED");

    host.close_now().await;
    stop_reference(python_host).await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_workflow_calls_a_rust_one_started_by_our_caller() {
    let setup = Setup::start().await;
    let (child_host, started, _gate) = gated_child(&setup, 1).await;
    let python_host = reference_job_host(
        &setup.server.url(),
        &setup.token("acme.pyparent"),
        &setup.project,
        "acme.pyparent",
        &["parent:caller:3"],
    )
    .await;

    let client = WorkflowClient::new(setup.client("acme.pyparent", "parent"));
    let run = client
        .start(&json!({"module": CHILD, "workflow": "gated", "n": 5}), None)
        .await
        .unwrap();
    let out: serde_json::Value = run.result(DEADLINE).await.unwrap();
    assert_eq!(out, json!({"child": {"n": 50}}));
    let steps = run.steps().await.unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(text(&steps[0], field::KEY), "call:acme.child.gated#1");
    assert_eq!(text(&steps[0], field::STATUS), "SUCCEEDED");
    let child_run = child_of(&steps, "call:acme.child.gated#1").unwrap();
    let child = setup
        .client(CHILD, "gated")
        .run(child_run)
        .status()
        .await
        .unwrap();
    assert_eq!(child.status, "SUCCEEDED", "{child:?}");
    assert_eq!(started.load(Ordering::SeqCst), 1);

    stop_reference(python_host).await;
    child_host.close_now().await;
    setup.stop().await;
}
