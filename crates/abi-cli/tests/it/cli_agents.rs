//! abictl's agent commands (`agents`, `invoke`, `agent-runs`) against a
//! real nats-server, the discovery service, our document service and our
//! agent host (the SDK's `AgentHost` under the runner, in this process).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use abi_sdk::agents::{
    AgentEvent, AgentHandler, AgentHost, AgentSpec, EventStream, InvocationContext, InvokeFuture,
};
use abi_sdk::{Config, Module, ModuleSpec, Runner};
use abi_test_support::wait_until;
use tokio_util::sync::CancellationToken;

use crate::common::{DEADLINE, SECRET, Stack, documents};

const MODULE: &str = "helpers";

/// Answers `echo:<prompt>`; streamed: `token` events `a`, `b`, then that message.
struct Echo;

impl AgentHandler for Echo {
    fn invoke(&self, prompt: String, _cx: InvocationContext) -> InvokeFuture {
        Box::pin(async move { Ok(format!("echo:{prompt}")) })
    }

    fn stream(&self, prompt: String, _cx: InvocationContext) -> Option<EventStream> {
        let events = vec![
            Ok(AgentEvent::new("token", "a")),
            Ok(AgentEvent::new("token", "b")),
            Ok(AgentEvent::message(format!("echo:{prompt}"))),
        ];
        Some(Box::pin(futures::stream::iter(events)))
    }
}

struct Quiet;
impl Module for Quiet {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_lists_invoke_streams_and_agent_runs_reads_the_records() {
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(&stack, dir.path()).await;
    let key = abi_auth::module_key(SECRET, MODULE).unwrap();
    let env = [
        ("NATS_URL", stack.server.url()),
        ("ABI_PROJECT", stack.project.clone()),
        ("ABI_MODULE_KEY", key),
    ];
    let lookup = move |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
    let host = AgentHost::new().agent(AgentSpec::new("echo", "says it back"), Arc::new(Echo));
    let stop = CancellationToken::new();
    let provider = tokio::spawn(
        Runner::new(ModuleSpec::new(MODULE).serve(Arc::new(host)))
            .config(Config::from_lookup(MODULE, &lookup).unwrap())
            .handle_signals(false)
            .stop_on(stop.clone())
            .run(Quiet),
    );

    let ready = || async {
        let listed = stack.abictl().run(&["--json", "agents"]).await.json();
        listed.as_array().unwrap().iter().any(|a| {
            a["module"] == MODULE && a["name"] == "echo" && a["instances"][0]["status"] == "READY"
        })
    };
    wait_until(DEADLINE, ready)
        .await
        .expect("the provider serves");
    let listed = stack
        .abictl()
        .run(&["--json", "agents", MODULE])
        .await
        .json();
    assert_eq!(
        listed[0]["capabilities"],
        serde_json::json!(["agent.invoke.v1"])
    );
    assert_eq!(listed[0]["description"], "says it back");
    let table = stack.abictl().run(&["agents"]).await;
    assert!(
        table.ok().contains("echo") && table.ok().contains("READY"),
        "{table:?}"
    );

    // Events as they come, then the result.
    let out = stack
        .abictl()
        .run(&["invoke", MODULE, "echo", "hello", "world"])
        .await;
    assert_eq!(
        out.ok().lines().collect::<Vec<_>>(),
        [
            "token: a",
            "token: b",
            "message: echo:hello world",
            "done: [DONE]",
            "echo:hello world"
        ]
    );
    let out = stack
        .abictl()
        .run(&["--json", "invoke", "--no-stream", MODULE, "echo", "hi"])
        .await;
    let lines: Vec<serde_json::Value> = out
        .ok()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["event"], "message");
    assert_eq!(lines[2]["result"], "echo:hi");
    let missing = stack.abictl().run(&["invoke", MODULE, "nope", "x"]).await;
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(missing.stderr.contains("AGENT_UNAVAILABLE"), "{missing:?}");

    // The records, newest first.
    let runs = stack
        .abictl()
        .run(&["--json", "agent-runs", MODULE, "echo"])
        .await
        .json();
    let rows = runs.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["invocation_id"], lines[2]["invocation_id"]);
    assert!(
        rows.iter()
            .all(|r| r["status"] == "SUCCEEDED" && r["caller"] == "api")
    );
    let table = stack.abictl().run(&["agent-runs", MODULE]).await;
    assert!(table.ok().contains("SUCCEEDED"), "{table:?}");
    let none = stack
        .abictl()
        .run(&["--json", "agent-runs", MODULE, "--status", "FAILED"])
        .await
        .json();
    assert_eq!(none, serde_json::json!([]));

    stop.cancel();
    tokio::time::timeout(DEADLINE, provider)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    docs.cancel();
    stack.stop().await;
}
