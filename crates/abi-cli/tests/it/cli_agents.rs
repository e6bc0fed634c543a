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

    // One whole record by its invocation id; a missing or malformed id.
    let id = rows[0]["invocation_id"].as_str().unwrap();
    let one = stack.abictl().run(&["agent-run", MODULE, id]).await.json();
    assert_eq!(one["invocation_id"], id, "{one}");
    assert_eq!(one["agent_name"], "echo");
    assert_eq!(one["status"], "SUCCEEDED");
    let unknown = stack
        .abictl()
        .run(&["agent-run", MODULE, "no-such-invocation"])
        .await;
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(unknown.stderr.contains("no such invocation"), "{unknown:?}");
    let bad = stack.abictl().run(&["agent-run", MODULE, "bad id!"]).await;
    assert_eq!(bad.code, 2, "{bad:?}");

    // etcdctl-style writes: put, put at a version, delete at a version,
    // in a collection the module declared.
    let module_docs = abi_sdk::documents::DocumentClient::new(
        stack.nats.clone(),
        abi_sdk::TokenSource::module_key(MODULE, abi_auth::module_key(SECRET, MODULE).unwrap()),
        MODULE,
    );
    module_docs
        .ensure_collection(abi_sdk::documents::CollectionSpec::new("notes"))
        .await
        .unwrap();
    let undeclared = stack
        .abictl()
        .run(&["docs", "put", MODULE, "nothing", "n1", "{}"])
        .await;
    assert_eq!(undeclared.code, 1, "{undeclared:?}");
    assert!(
        undeclared.stderr.contains("no collection helpers/nothing"),
        "{undeclared:?}"
    );
    let put = |args: &'static [&'static str]| {
        let ctl = stack.abictl();
        async move {
            let mut all = vec!["docs"];
            all.extend_from_slice(args);
            ctl.run(&all).await
        }
    };
    let first = put(&[
        "put",
        MODULE,
        "notes",
        "n1",
        r#"{"a": 1, "b": [true, "x"]}"#,
    ])
    .await
    .json();
    assert_eq!(first["version"], 1, "{first}");
    assert_eq!(first["data"], serde_json::json!({"a": 1, "b": [true, "x"]}));
    let stale = put(&[
        "put",
        MODULE,
        "notes",
        "n1",
        r#"{"a": 9}"#,
        "--if-version",
        "0",
    ])
    .await;
    assert_eq!(stale.code, 1, "{stale:?}");
    assert!(stale.stderr.contains("VERSION_CONFLICT"), "{stale:?}");
    let second = put(&[
        "put",
        MODULE,
        "notes",
        "n1",
        r#"{"a": 2}"#,
        "--if-version",
        "1",
    ])
    .await
    .json();
    assert_eq!(second["version"], 2, "{second}");
    let read = put(&["get", MODULE, "notes", "n1"]).await.json();
    assert_eq!(
        read["data"],
        serde_json::json!({"a": 2}),
        "the conflict wrote nothing"
    );
    let not_object = put(&["put", MODULE, "notes", "n2", "[1]"]).await;
    assert_eq!(not_object.code, 2, "{not_object:?}");
    assert!(not_object.stderr.contains("JSON object"), "{not_object:?}");
    let stale = put(&["delete", MODULE, "notes", "n1", "--if-version", "1"]).await;
    assert_eq!(stale.code, 1, "{stale:?}");
    let deleted = put(&["delete", MODULE, "notes", "n1", "--if-version", "2"]).await;
    assert!(deleted.ok().contains("deleted"), "{deleted:?}");
    let gone = put(&["get", MODULE, "notes", "n1"]).await;
    assert_eq!(gone.code, 1, "{gone:?}");
    assert!(gone.stderr.contains("DOCUMENT_NOT_FOUND"), "{gone:?}");

    // The services on `$SRV`, for users without the `nats` CLI: discovery
    // and the document service answer, and the latter counted the puts.
    let services = stack.abictl().run(&["--json", "micro", "ls"]).await.json();
    let names: Vec<&str> = services
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&abi_discovery::SERVICE_NAME)
            && names.contains(&abi_wire::documents::SERVICE_NAME),
        "{names:?}"
    );
    let stats = stack
        .abictl()
        .run(&["micro", "stats", abi_wire::documents::SERVICE_NAME])
        .await;
    let put_row = stats
        .ok()
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some("put"))
        .unwrap_or_else(|| panic!("{stats:?}"));
    let requests: u64 = put_row.split_whitespace().nth(3).unwrap().parse().unwrap();
    assert!(requests >= 3, "{put_row}");

    // The registry's bucket: one value (the snapshot), its revision.
    let kv = stack.abictl().run(&["--json", "kv", "info"]).await.json();
    assert_eq!(
        kv["bucket"],
        abi_wire::discovery::registry_bucket(&stack.project)
    );
    assert_eq!(kv["values"], 1, "{kv}");
    assert!(kv["revision"].as_u64().unwrap() >= 1, "{kv}");
    let buckets = stack.abictl().run(&["kv", "ls"]).await;
    assert!(
        buckets
            .ok()
            .lines()
            .any(|l| l == abi_wire::discovery::registry_bucket(&stack.project)),
        "{buckets:?}"
    );
    let missing = stack.abictl().run(&["kv", "info", "no_such_bucket"]).await;
    assert_eq!(missing.code, 1, "{missing:?}");

    stop.cancel();
    tokio::time::timeout(DEADLINE, provider)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    docs.cancel();
    stack.stop().await;
}
