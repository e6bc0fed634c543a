//! The agent and model contracts, pinned by bytes the Python reference wrote
//! (`tests/golden/make_agent_model_vectors.py`), checked as `golden.rs` checks
//! discovery's: each file decodes to the value built here, and both encode
//! back to the file's bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use abi_proto::agent::v1 as agent;
use abi_proto::common::v1 as common;
use abi_proto::model_registry::v1 as model;

use crate::golden::{Case, exact, python, read_vectors, s, workspace_root};

const U32_MAX: u32 = u32::MAX;
const U64_MAX: u64 = u64::MAX;

fn vectors_dir() -> PathBuf {
    workspace_root().join("tests/golden/agent_model_vectors")
}

fn context() -> common::CallContext {
    common::CallContext {
        trace_id: s("trace-agents"),
        timeout_ms: 30000,
        principal_id: s("user:bob"),
        workspace_id: s("ws-7"),
        tenant_id: s("tenant-ü"),
    }
}

fn call_error() -> common::CallError {
    common::CallError {
        code: s("AGENT_BUSY"),
        message: s("Agent is busy"),
        retryable: true,
        status: Some(503),
    }
}

fn event(sequence: u64, chat_source: Option<bool>) -> agent::AgentEvent {
    agent::AgentEvent {
        sequence,
        event: s("message"),
        data: s("héllo 🌍"),
        parts: 3,
        chat_source,
    }
}

fn invocation() -> agent::Invocation {
    agent::Invocation {
        invocation_id: s("inv:2026-12-01.a_b-c"),
        thread_id: s("thread-1"),
        status: s("SUCCEEDED"),
        result: s("done ✓"),
        error_code: s("TIMED_OUT"),
        error_message: s("Run exceeded its deadline"),
        owner_instance_id: s("provider-a1b2"),
        owner_available: true,
        events: vec![
            event(1, None),
            event(2, Some(false)),
            event(U64_MAX, Some(true)),
        ],
        last_sequence: U64_MAX,
        result_parts: U32_MAX,
    }
}

fn model_ref() -> model::ModelRef {
    model::ModelRef {
        canonical_id: s("echo-chat"),
        provider: s("acme.models"),
        kind: s("chat"),
        model_id: s("echo:v1"),
    }
}

fn chat_message(kind: &str) -> model::ChatMessage {
    model::ChatMessage {
        r#type: s(kind),
        data_json: format!(r#"{{"content":"hi \u00e9","type":"{kind}"}}"#).into_bytes(),
    }
}

fn chat_request() -> model::ChatRequest {
    model::ChatRequest {
        context: Some(context()),
        r#ref: Some(model_ref()),
        messages: vec![
            chat_message("system"),
            chat_message("human"),
            chat_message("ai"),
        ],
        stop: vec![s("\n\n"), s("END")],
        options_json: br#"{"temperature":0.2}"#.to_vec(),
        tools_json: vec![
            br#"{"name":"search"}"#.to_vec(),
            br#"{"name":"calc"}"#.to_vec(),
        ],
        tool_options_json: br#"{"tool_choice":"auto"}"#.to_vec(),
    }
}

fn descriptor() -> model::ModelDescriptor {
    model::ModelDescriptor {
        r#ref: Some(model_ref()),
        model_id: s("echo:v1"),
        name: s("Echo"),
        description: s("Repeats 📣"),
        metadata_json: br#"{"context_window":8192}"#.to_vec(),
    }
}

fn cases() -> Vec<Case> {
    vec![
        // abi.agent.v1, every message empty.
        exact("agent_event_empty", agent::AgentEvent::default()),
        exact("invocation_empty", agent::Invocation::default()),
        exact("submit_request_empty", agent::SubmitRequest::default()),
        exact("run_update_empty", agent::RunUpdate::default()),
        exact("submit_response_empty", agent::SubmitResponse::default()),
        exact("status_request_empty", agent::StatusRequest::default()),
        exact("status_response_empty", agent::StatusResponse::default()),
        exact("cancel_request_empty", agent::CancelRequest::default()),
        exact("cancel_response_empty", agent::CancelResponse::default()),
        exact("event_request_empty", agent::EventRequest::default()),
        exact("event_response_empty", agent::EventResponse::default()),
        // abi.agent.v1, full and variants.
        exact("agent_event_full", event(7, Some(false))),
        exact("agent_event_chat_source_true", event(1, Some(true))),
        exact("agent_event_chat_source_absent", event(1, None)),
        exact("invocation_full", invocation()),
        exact(
            "submit_request_full",
            agent::SubmitRequest {
                context: Some(context()),
                invocation_id: s("inv-1"),
                thread_id: s("conversation 💬"),
                prompt: format!("Summarize:\n{}", "x".repeat(300)),
                mode: s("stream"),
                deadline_seconds: 3600,
                output_format: 2,
                updates_inbox: s("_INBOX_MODULES.abc.def"),
            },
        ),
        exact(
            "run_update_full",
            agent::RunUpdate {
                event: Some(event(5, None)),
                status: s("SUCCEEDED"),
                last_sequence: 5,
            },
        ),
        exact(
            "run_update_status_only",
            agent::RunUpdate {
                event: None,
                status: s("CANCELLED"),
                last_sequence: 9,
            },
        ),
        exact(
            "submit_response_full",
            agent::SubmitResponse {
                error: Some(call_error()),
                invocation: Some(invocation()),
            },
        ),
        exact(
            "status_request_full",
            agent::StatusRequest {
                context: Some(context()),
                invocation_id: s("inv-1"),
                after_sequence: U64_MAX,
                output_format: 2,
            },
        ),
        exact(
            "status_response_full",
            agent::StatusResponse {
                error: Some(call_error()),
                invocation: Some(invocation()),
            },
        ),
        exact(
            "cancel_request_full",
            agent::CancelRequest {
                context: Some(context()),
                invocation_id: s("inv-1"),
                output_format: 2,
            },
        ),
        exact(
            "cancel_response_full",
            agent::CancelResponse {
                error: Some(call_error()),
                invocation: Some(invocation()),
            },
        ),
        exact(
            "event_request_full",
            agent::EventRequest {
                context: Some(context()),
                invocation_id: s("inv-1"),
                sequence: 3,
                part: U32_MAX,
            },
        ),
        exact(
            "event_response_full",
            agent::EventResponse {
                error: Some(call_error()),
                data: (0..=255u8).collect(),
            },
        ),
        // abi.model_registry.v1, every message empty.
        exact("model_ref_empty", model::ModelRef::default()),
        exact("model_descriptor_empty", model::ModelDescriptor::default()),
        exact("chat_message_empty", model::ChatMessage::default()),
        exact(
            "list_models_request_empty",
            model::ListModelsRequest::default(),
        ),
        exact(
            "list_models_response_empty",
            model::ListModelsResponse::default(),
        ),
        exact("resolve_request_empty", model::ResolveRequest::default()),
        exact("resolve_response_empty", model::ResolveResponse::default()),
        exact("chat_request_empty", model::ChatRequest::default()),
        exact("chat_response_empty", model::ChatResponse::default()),
        exact(
            "stream_open_request_empty",
            model::StreamOpenRequest::default(),
        ),
        exact(
            "stream_open_response_empty",
            model::StreamOpenResponse::default(),
        ),
        exact(
            "stream_next_request_empty",
            model::StreamNextRequest::default(),
        ),
        exact(
            "stream_next_response_empty",
            model::StreamNextResponse::default(),
        ),
        exact(
            "stream_close_request_empty",
            model::StreamCloseRequest::default(),
        ),
        exact(
            "stream_close_response_empty",
            model::StreamCloseResponse::default(),
        ),
        exact("embed_request_empty", model::EmbedRequest::default()),
        exact("vector_empty", model::Vector::default()),
        exact("embed_response_empty", model::EmbedResponse::default()),
        // abi.model_registry.v1, full.
        exact("model_ref_full", model_ref()),
        exact("model_descriptor_full", descriptor()),
        exact("chat_message_full", chat_message("tool")),
        exact(
            "list_models_request_full",
            model::ListModelsRequest {
                context: Some(context()),
            },
        ),
        exact(
            "list_models_response_full",
            model::ListModelsResponse {
                models: vec![descriptor(), descriptor()],
                default_chat_model_id: s("echo:v1"),
                default_embedding_model_id: s("embed:v2"),
                error: Some(call_error()),
            },
        ),
        exact(
            "resolve_request_full",
            model::ResolveRequest {
                context: Some(context()),
                r#ref: Some(model_ref()),
            },
        ),
        exact(
            "resolve_response_full",
            model::ResolveResponse {
                model: Some(descriptor()),
                error: Some(call_error()),
            },
        ),
        exact("chat_request_full", chat_request()),
        exact(
            "chat_response_full",
            model::ChatResponse {
                message: Some(chat_message("ai")),
                error: Some(call_error()),
            },
        ),
        exact(
            "stream_open_request_full",
            model::StreamOpenRequest {
                context: Some(context()),
                chat: Some(chat_request()),
            },
        ),
        exact(
            "stream_open_response_full",
            model::StreamOpenResponse {
                stream_id: s("stream-1"),
                error: Some(call_error()),
            },
        ),
        exact(
            "stream_next_request_full",
            model::StreamNextRequest {
                context: Some(context()),
                stream_id: s("stream-1"),
                sequence: U64_MAX,
            },
        ),
        exact(
            "stream_next_response_full",
            model::StreamNextResponse {
                chunk: Some(chat_message("AIMessageChunk")),
                done: true,
                sequence: 4,
                error: Some(call_error()),
            },
        ),
        exact(
            "stream_close_request_full",
            model::StreamCloseRequest {
                context: Some(context()),
                stream_id: s("stream-1"),
            },
        ),
        exact(
            "stream_close_response_full",
            model::StreamCloseResponse {
                error: Some(call_error()),
            },
        ),
        exact(
            "embed_request_full",
            model::EmbedRequest {
                context: Some(context()),
                r#ref: Some(model_ref()),
                texts: vec![s("a"), s("bé"), s("")],
                query: true,
            },
        ),
        exact(
            "vector_full",
            model::Vector {
                values: vec![0.0, -1.5, 1e-300, std::f64::consts::PI],
            },
        ),
        exact(
            "embed_response_full",
            model::EmbedResponse {
                vectors: vec![
                    model::Vector {
                        values: vec![1.0, 2.0],
                    },
                    model::Vector {
                        values: vec![-0.25],
                    },
                ],
                error: Some(call_error()),
            },
        ),
    ]
}

#[test]
fn agent_and_model_vectors_decode_and_re_encode_to_the_same_bytes() {
    let files = read_vectors(&vectors_dir());
    let mut failures = Vec::new();
    for case in cases() {
        match files.get(case.name) {
            None => failures.push(format!("{}: no such vector file", case.name)),
            Some(bytes) => {
                if let Err(why) = (case.check)(bytes) {
                    failures.push(format!("{}: {why}", case.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_agent_and_model_vector_has_a_rust_counterpart_and_back() {
    let on_disk: BTreeSet<String> = read_vectors(&vectors_dir()).into_keys().collect();
    let names: Vec<&str> = cases().iter().map(|c| c.name).collect();
    let in_rust: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    assert_eq!(names.len(), in_rust.len(), "a case name is listed twice");
    assert_eq!(on_disk, in_rust, "vector files and Rust cases differ");
    assert!(in_rust.len() >= 60, "only {} vectors", in_rust.len());
}

#[test]
fn the_agent_check_sees_a_flipped_chat_source() {
    // An absent optional and a false one are different bytes: the check must
    // tell them apart, or `chat_source` could silently lose its presence bit.
    let files = read_vectors(&vectors_dir());
    let case = exact("agent_event_full", event(7, None));
    assert!((case.check)(&files["agent_event_full"]).is_err());
}

#[test]
fn make_agent_model_vectors_reproduces_the_committed_vectors() {
    let out = std::env::temp_dir().join(format!("abi-golden-agent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let script = workspace_root().join("tests/golden/make_agent_model_vectors.py");
    let result = Command::new(python())
        .arg(&script)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("cannot run the venv Python (run ./scripts/setup.sh)");
    let made = read_vectors(&out);
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        result.status.success(),
        "make_agent_model_vectors.py failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    assert_eq!(
        made,
        read_vectors(&vectors_dir()),
        "re-run the script and commit"
    );
}
