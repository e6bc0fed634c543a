//! The Python reference against ours, both ways (tests/interop/agent_peer.py):
//! its `AgentProxy` calling our host, and our client calling its
//! `AgentHost`: invoke, stream, cancel, status from a new client (another
//! process, the other language), a deadline that expires. Both read the
//! records and fragments the other stored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::agents::{AgentErrorKind, SubmitOptions};
use abi_sdk_e2e::SECRET;
use abi_test_support::{python, spawn_until_ready, workspace_root};
use serde_json::{Value, json};
use tokio::process::Command;

use super::agents_fixture::{DEADLINE, MODULE, Provider, Setup, options, ready};

fn peer() -> std::path::PathBuf {
    workspace_root().join("tests/interop/agent_peer.py")
}

/// Runs `actions` with the reference's caller as `identity`; one JSON value each.
pub(super) async fn python_calls(setup: &Setup, identity: &str, actions: Value) -> Vec<Value> {
    let key = abi_auth::module_key(SECRET, identity).unwrap();
    let output = tokio::time::timeout(
        DEADLINE,
        Command::new(python())
            .arg(peer())
            .args([
                "call",
                &setup.world.nats.url(),
                &key,
                identity,
                &setup.world.project,
                MODULE,
                &actions.to_string(),
            ])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the reference caller ends in time")
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The reference's `AgentHost` serving [`MODULE`]'s `echo`, answers tagged `tag`.
pub(super) async fn python_host(setup: &Setup, tag: &str) -> tokio::process::Child {
    let key = abi_auth::module_key(SECRET, MODULE).unwrap();
    let mut command = Command::new(python());
    command
        .arg(peer())
        .args([
            "serve",
            &setup.world.nats.url(),
            &key,
            &setup.world.project,
            MODULE,
            tag,
        ])
        .env("PYTHONUNBUFFERED", "1")
        .stdin(std::process::Stdio::null());
    spawn_until_ready(command, "ready", DEADLINE)
        .await
        .expect("the reference host serves")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_caller_calls_our_host() {
    let setup = Setup::start(20.0).await;
    let provider = Provider::start(&setup.world, "rust", options()).await;
    ready(&setup.world, 1).await;

    let out = python_calls(
        &setup,
        "caller",
        json!([
            {"op": "invoke", "prompt": "hello", "timeout": 30},
            {"op": "stream", "prompt": "hi"},
            {"op": "submit", "prompt": "block", "id": "py-block"},
            {"op": "cancel", "id": "py-block"},
            {"op": "wait", "id": "py-block"},
            {"op": "submit", "prompt": "block", "id": "py-late", "deadline": 1},
            {"op": "wait", "id": "py-late"},
        ]),
    )
    .await;
    assert_eq!(out[0], json!({"result": "rust:hello"}));
    assert_eq!(
        out[1],
        json!({"events": [["token", "a"], ["token", "b"], ["token", "c"], ["message", "rust:hi"], ["done", "[DONE]"]]})
    );
    assert!(
        out[2]["owner"].as_str().is_some_and(|o| !o.is_empty()),
        "{}",
        out[2]
    );
    assert!(
        ["CANCELLING", "CANCELLED", "FINALIZING"].contains(&out[3]["status"].as_str().unwrap()),
        "{}",
        out[3]
    );
    assert_eq!(out[4], json!({"error": "CANCELLED"}));
    assert_eq!(out[6], json!({"error": "TIMED_OUT"}));

    // Our caller (same identity) reads the reference caller's runs...
    let agent = setup.agent("caller", "echo").await;
    let status = agent.invocation("py-late").status(0).await.unwrap();
    assert_eq!(status.status, "TIMED_OUT");
    // ...and a new reference process reads ours, events and result.
    let mut ours = agent
        .submit(
            "from rust",
            SubmitOptions {
                invocation_id: Some("rs-1".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(ours.result(Some(DEADLINE)).await.unwrap(), "rust:from rust");
    let out = python_calls(&setup, "caller", json!([{"op": "status", "id": "rs-1"}])).await;
    assert_eq!(
        out[0],
        json!({"status": "SUCCEEDED", "result": "rust:from rust", "error_code": "", "events": [["message", "rust:from rust"], ["done", "[DONE]"]]})
    );

    provider.stop().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_caller_calls_the_reference_host() {
    let setup = Setup::start(20.0).await;
    let mut host = python_host(&setup, "py").await;

    let agent = setup.agent("caller", "echo").await;
    assert_eq!(
        agent
            .invoke("hello", Some(Duration::from_secs(30)))
            .await
            .unwrap(),
        "py:hello"
    );
    let mut stream = agent
        .stream("hi", Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let events: Vec<_> = stream
        .events(Some(DEADLINE))
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.event, e.data))
        .collect();
    let expected = [
        ("token", "a"),
        ("token", "b"),
        ("token", "c"),
        ("message", "py:hi"),
        ("done", "[DONE]"),
    ];
    assert_eq!(events, expected.map(|(e, d)| (e.to_owned(), d.to_owned())));

    let mut blocked = agent
        .submit(
            "block",
            SubmitOptions {
                invocation_id: Some("rs-block".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    blocked.cancel().await.unwrap();
    let err = blocked.result(Some(DEADLINE)).await.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::Cancelled, "{err}");
    // A new client (our caller restarted) reads it from the reference's records.
    let restarted = setup.agent("caller", "echo").await;
    let status = restarted.invocation("rs-block").status(0).await.unwrap();
    assert_eq!(
        (status.status.as_str(), status.events.len()),
        ("CANCELLED", 0)
    );

    let mut late = agent
        .submit(
            "block",
            SubmitOptions {
                deadline_secs: 1,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let err = late.result(Some(DEADLINE)).await.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::TimedOut, "{err}");

    host.kill().await.unwrap();
    setup.stop().await;
}
