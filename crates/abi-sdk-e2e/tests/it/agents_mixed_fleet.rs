//! A mixed fleet: the reference's `AgentHost` and ours serving one module
//! (one document namespace). Each reads the records, manifests and
//! fragments the other stored once their owner is gone, and our upkeep
//! releases the conversation claim of a reference host killed mid-run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::CallErrorKind;
use abi_sdk::agents::{AgentErrorKind, Invocation, SubmitOptions};
use serde_json::json;

use super::agents_fixture::{DEADLINE, MODULE, Provider, Setup, options, ready};
use super::agents_interop::{python_calls, python_host};

/// Submits `prompt` under `id` (a conversation of its own) until the run
/// lands on `owner`; the misses are waited for.
async fn submit_to(setup: &Setup, owner: &str, prompt: &str, id: &str) -> Invocation {
    for attempt in 0..20 {
        let agent = setup.agent("caller", "echo").await;
        let invocation_id = format!("{id}-{attempt}");
        let options = SubmitOptions {
            invocation_id: Some(invocation_id),
            ..Default::default()
        };
        let mut run = agent.submit(prompt, options).await.unwrap();
        if run.owner_instance_id() == owner {
            return run;
        }
        // A miss is stopped, then waited for. One that ended meanwhile may
        // be refused OWNER_UNAVAILABLE by the reference's host: it read the
        // record before the end was saved and looked for the live run after
        // it left (ours reads the record again and answers the end); the
        // wait below covers it too.
        if let Err(err) = run.cancel().await {
            assert_eq!(
                err.kind(),
                AgentErrorKind::Call(CallErrorKind::OwnerUnavailable),
                "{err}"
            );
        }
        let _ = run.result(Some(DEADLINE)).await;
    }
    panic!("no submit landed on {owner}");
}

async fn wait_instances(setup: &Setup, count: usize) {
    let until = tokio::time::Instant::now() + DEADLINE;
    while setup.world.statuses(MODULE).await.len() != count {
        assert!(
            tokio::time::Instant::now() < until,
            "never {count} instances"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_and_rust_hosts_read_each_others_records() {
    let setup = Setup::start(3.0).await;
    let mut py = python_host(&setup, "py").await;
    let py_id = ready(&setup.world, 1).await.remove(0);
    let upkeep = abi_sdk::agents::AgentHostOptions {
        upkeep_interval: Duration::from_millis(200),
        ..options()
    };
    let rust = Provider::start(&setup.world, "rust", upkeep).await;
    let rust_id = ready(&setup.world, 2)
        .await
        .into_iter()
        .find(|i| *i != py_id)
        .unwrap();

    let mut on_py = submit_to(&setup, &py_id, "from py", "p").await;
    assert_eq!(on_py.result(Some(DEADLINE)).await.unwrap(), "py:from py");
    let blocked = submit_to(&setup, &py_id, "block", "pb").await;
    let mut on_rust = submit_to(&setup, &rust_id, "from rust", "r").await;
    assert_eq!(
        on_rust.result(Some(DEADLINE)).await.unwrap(),
        "rust:from rust"
    );

    // The reference host dies mid-run: once its lease ended, our host
    // answers for its runs from what it stored...
    py.kill().await.unwrap();
    wait_instances(&setup, 1).await;
    let agent = setup.agent("caller", "echo").await;
    let status = agent
        .invocation(on_py.invocation_id())
        .status(0)
        .await
        .unwrap();
    assert_eq!(
        (status.status.as_str(), status.result.as_str()),
        ("SUCCEEDED", "py:from py")
    );
    let events: Vec<_> = status
        .events
        .iter()
        .map(|e| (e.event.as_str(), e.data.as_str()))
        .collect();
    assert_eq!(events, [("message", "py:from py"), ("done", "[DONE]")]);
    // ...and our upkeep releases the claim it left: FAILED OWNER_GONE.
    let until = tokio::time::Instant::now() + DEADLINE;
    loop {
        let status = agent
            .invocation(blocked.invocation_id())
            .status(0)
            .await
            .unwrap();
        if status.status == "FAILED" {
            assert_eq!(status.error_code, "OWNER_GONE");
            break;
        }
        assert!(tokio::time::Instant::now() < until, "{status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The other way: a reference host answers for a run ours stored.
    let mut py2 = python_host(&setup, "py2").await;
    wait_instances(&setup, 2).await;
    rust.stop().await;
    wait_instances(&setup, 1).await;
    let out = python_calls(
        &setup,
        "caller",
        json!([{"op": "status", "id": on_rust.invocation_id()}]),
    )
    .await;
    assert_eq!(
        out[0],
        json!({"status": "SUCCEEDED", "result": "rust:from rust", "error_code": "",
               "events": [["message", "rust:from rust"], ["done", "[DONE]"]]})
    );
    py2.kill().await.unwrap();
    setup.stop().await;
}
