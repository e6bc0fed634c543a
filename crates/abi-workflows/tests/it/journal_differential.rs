//! The journal against the Python reference: one scenario of starts, local
//! retries, child runs, ends, replays and a second trigger of the same run
//! id runs through the reference's `StepJournal` (`tests/interop/
//! workflow_journal.py`, over an in-memory store, a counter for a clock) and
//! through our decisions over the same kind of store; every document put,
//! every read back, every result's text and every key refusal must be equal.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use std::collections::BTreeMap;

use abi_document_model::{Data, Value};
use abi_test_support::{python, workspace_root};
use abi_wire::workflows::{
    StepKind, StepStatus, check_step_key, results_collection, step_id, steps_collection,
};
use abi_workflows::{Child, Finish, Journal, encode_result};
use serde_json::{Value as Json, json};

fn to_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Int(n) => json!(n),
        Value::Float(f) => json!(f),
        Value::String(s) => json!(s),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Object(data) => data_json(data),
        other => panic!("no journal holds {other:?}"),
    }
}

fn data_json(data: &Data) -> Json {
    Json::Object(data.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
}

fn to_value(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => n
            .as_i64()
            .map_or_else(|| Value::Float(n.as_f64().unwrap()), Value::Int),
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => Value::List(items.iter().map(to_value).collect()),
        Json::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect())
        }
    }
}

/// The scenario: every transition, in the orders a host goes through them.
fn scenario() -> Vec<Json> {
    let child = json!({"module_id": "store", "workflow": "index", "run_id": "index:7"});
    let long_error = "e".repeat(2500);
    vec![
        json!({"op": "trigger", "run_id": "flow:1", "fired_at": "F1"}),
        json!({"op": "check_key", "key": "fetch"}),
        json!({"op": "check_key", "key": ""}),
        json!({"op": "check_key", "key": "a\nb"}),
        json!({"op": "check_key", "key": "k".repeat(201)}),
        json!({"op": "read", "key": "fetch"}),
        json!({"op": "start", "key": "fetch", "kind": "step"}),
        json!({"op": "retry", "key": "fetch"}),
        json!({"op": "retry", "key": "fetch"}),
        json!({"op": "encode", "key": "fetch", "value": {"a": [1, 2.5, null, true], "b": "é😀"}}),
        json!({"op": "encode", "key": "big", "value": "x".repeat(262_143)}),
        json!({"op": "finish", "key": "fetch", "status": "SUCCEEDED",
               "result": "{\"a\": [1, 2.5, null, true], \"b\": \"\\u00e9\\ud83d\\ude00\"}"}),
        json!({"op": "read", "key": "fetch"}),
        json!({"op": "result", "key": "fetch"}),
        json!({"op": "start", "key": "index", "kind": "call", "reuse_running": true}),
        json!({"op": "set_child", "key": "index", "child": child}),
        // The host died: the retried run's call re-attaches to its child.
        json!({"op": "start", "key": "index", "kind": "call", "reuse_running": true}),
        json!({"op": "finish", "key": "index", "status": "FAILED", "error": long_error}),
        // After a failed attempt the call starts a new child.
        json!({"op": "start", "key": "index", "kind": "call", "reuse_running": true}),
        json!({"op": "finish", "key": "index", "status": "CANCELLED", "error": "Run cancelled"}),
        json!({"op": "start", "key": "map[0]", "kind": "step"}),
        json!({"op": "finish", "key": "map[0]", "status": "SUCCEEDED", "result": "null"}),
        json!({"op": "result", "key": "map[0]"}),
        json!({"op": "retry", "key": "never-started"}),
        // A recreated stream reused the run id: the old journal is absent.
        json!({"op": "trigger", "run_id": "flow:1", "fired_at": "F2"}),
        json!({"op": "read", "key": "fetch"}),
        json!({"op": "result", "key": "fetch"}),
        json!({"op": "start", "key": "fetch", "kind": "step"}),
        json!({"op": "start", "key": "index", "kind": "call", "reuse_running": true}),
    ]
}

#[derive(Default)]
struct Store {
    docs: BTreeMap<(String, String), Data>,
    puts: Vec<Json>,
}

impl Store {
    fn get(&self, collection: &str, id: &str) -> Option<&Data> {
        self.docs.get(&(collection.to_owned(), id.to_owned()))
    }

    fn put(&mut self, collection: &str, id: &str, data: Data) {
        self.puts.push(json!([collection, id, data_json(&data)]));
        self.docs
            .insert((collection.to_owned(), id.to_owned()), data);
    }
}

/// The scenario through our decisions; the same output as the script's.
fn ours(ops: &[Json]) -> Json {
    let (steps, results) = (steps_collection("default"), results_collection("default"));
    let mut store = Store::default();
    let mut answers = Vec::new();
    let mut clock = 0..;
    let mut now = || {
        let n = clock.next().unwrap();
        format!("2026-12-01T00:{:02}:{:02}+00:00", n / 60, n % 60)
    };
    let (mut run_id, mut fired_at) = (String::new(), String::new());
    for op in ops {
        let key = op["key"].as_str().unwrap_or("");
        let journal = Journal {
            run_id: &run_id,
            fired_at: &fired_at,
        };
        let id = step_id(&run_id, key);
        let prior = journal.prior(store.get(&steps, &id));
        let summary = match op["op"].as_str().unwrap() {
            "trigger" => {
                run_id = op["run_id"].as_str().unwrap().to_owned();
                fired_at = op["fired_at"].as_str().unwrap().to_owned();
                None
            }
            "start" => {
                let kind = match op["kind"].as_str().unwrap() {
                    "call" => StepKind::Call,
                    _ => StepKind::Step,
                };
                let reuse = op["reuse_running"].as_bool().unwrap_or(false);
                Some(journal.start(&prior, key, kind, &now(), reuse))
            }
            "retry" => Some(journal.retry(&prior)),
            "set_child" => {
                let child = &op["child"];
                let child = Child {
                    module_id: child["module_id"].as_str().unwrap().into(),
                    workflow: child["workflow"].as_str().unwrap().into(),
                    run_id: child["run_id"].as_str().unwrap().into(),
                };
                Some(journal.with_child(&prior, &child))
            }
            "finish" => {
                let result_json = op["result"].as_str();
                if let Some(json) = result_json {
                    store.put(&results, &id, journal.result(key, json));
                }
                let status = StepStatus::parse(op["status"].as_str().unwrap()).unwrap();
                let end = Finish {
                    status,
                    result_json,
                    error: op["error"].as_str().unwrap_or(""),
                    duration_ms: 0,
                    claim_check: None,
                };
                Some(journal.finish(&prior, key, &end, &now()))
            }
            "read" => {
                answers.push(data_json(&prior));
                None
            }
            "result" => {
                let stored = store
                    .get(&results, &id)
                    .and_then(|doc| journal.stored_result(doc))
                    .map(|text| serde_json::from_str::<Json>(text).unwrap());
                answers.push(stored.unwrap_or(Json::Null));
                None
            }
            "encode" => {
                answers.push(match encode_result(key, &op["value"]) {
                    Ok(text) => json!(text),
                    Err(err) => json!({"error": err.to_string()}),
                });
                None
            }
            "check_key" => {
                answers.push(match check_step_key(key) {
                    Ok(_) => json!("ok"),
                    Err(err) => json!({"error": err.to_string()}),
                });
                None
            }
            other => panic!("unknown op {other}"),
        };
        if let Some(summary) = summary {
            store.put(&steps, &id, summary);
        }
    }
    json!({"puts": store.puts, "answers": answers})
}

#[test]
fn the_journal_writes_and_reads_what_the_reference_does() {
    let ops = scenario();
    let mut child = std::process::Command::new(python())
        .arg(workspace_root().join("tests/interop/workflow_journal.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the reference");
    serde_json::to_writer(child.stdin.take().unwrap(), &ops).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Json = serde_json::from_slice(&out.stdout).expect("JSON");
    let ours = ours(&ops);
    let (our_puts, their_puts) = (
        ours["puts"].as_array().unwrap(),
        theirs["puts"].as_array().unwrap(),
    );
    for (i, (a, b)) in our_puts.iter().zip(their_puts).enumerate() {
        assert_eq!(a, b, "put {i}");
    }
    assert_eq!(our_puts.len(), their_puts.len(), "puts");
    assert_eq!(ours["answers"], theirs["answers"]);
    // What a Python host journaled reads back through ours as the same value.
    let last = their_puts.last().unwrap();
    let data = match to_value(&last[2]) {
        Value::Object(data) => data,
        other => panic!("a summary is an object, not {other:?}"),
    };
    assert_eq!(
        abi_workflows::journal::status(&data),
        Some(StepStatus::Running)
    );
}
