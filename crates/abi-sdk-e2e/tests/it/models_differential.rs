//! A small differential: the same bad chats, byte for byte, to the
//! reference's `ModelHost` (`model_peer.py serve`) and to ours, serving the
//! same two models in one project; both answer every one with the same code
//! and the same message (the reference's wording, `"CODE: text"`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_proto::Message as _;
use abi_proto::model_registry::v1 as mpb;
use abi_sdk_e2e::World;
use abi_wire::models::MAX_REQUEST_BYTES;

use super::models_fixture::{Process, Provider, bound_token, raw_chat, ready_instances};

fn message(kind: &str, data: &str) -> mpb::ChatMessage {
    mpb::ChatMessage {
        r#type: kind.into(),
        data_json: data.as_bytes().to_vec(),
    }
}

fn request(messages: Vec<mpb::ChatMessage>) -> mpb::ChatRequest {
    mpb::ChatRequest {
        r#ref: Some(mpb::ModelRef {
            canonical_id: "echo".into(),
            kind: "chat".into(),
            ..Default::default()
        }),
        messages,
        options_json: b"{}".to_vec(),
        tool_options_json: b"{}".to_vec(),
        ..Default::default()
    }
}

fn hi() -> mpb::ChatMessage {
    message("human", r#"{"content":"hi"}"#)
}

/// `(name, model, payload, overflow header, token bound to the instance)`.
fn cases() -> Vec<(&'static str, &'static str, Vec<u8>, bool, bool)> {
    let encode = |r: mpb::ChatRequest| r.encode_to_vec();
    let mut other = request(vec![hi()]);
    other.r#ref.as_mut().unwrap().canonical_id = "other".into();
    let mut tools = request(vec![hi()]);
    tools.tools_json = vec![br#"{"type":"function"}"#.to_vec()];
    let mut many_tools = request(vec![hi()]);
    many_tools.tools_json = vec![b"{}".to_vec(); 129];
    let mut tool_list = request(vec![hi()]);
    tool_list.tools_json = vec![b"[1]".to_vec()];
    let mut tool_bad_json = request(vec![hi()]);
    tool_bad_json.tools_json = vec![b"{".to_vec()];
    let mut options_only = request(vec![hi()]);
    options_only.tool_options_json = br#"{"tool_choice":"auto"}"#.to_vec();
    let mut options_list = request(vec![hi()]);
    options_list.tools_json = vec![b"{}".to_vec()];
    options_list.tool_options_json = b"[]".to_vec();
    let mut big = request(vec![hi()]);
    big.stop = vec!["x".repeat(MAX_REQUEST_BYTES)];
    vec![
        ("valid", "echo", encode(request(vec![hi()])), false, true),
        ("too large", "echo", encode(big), false, true),
        ("overflowed", "echo", Vec::new(), true, true),
        ("not protobuf", "echo", vec![0xff, 0xff, 0xff], false, true),
        (
            "no token",
            "echo",
            encode(request(vec![hi()])),
            false,
            false,
        ),
        ("names another model", "echo", encode(other), false, true),
        ("no message", "echo", encode(request(vec![])), false, true),
        (
            "1025 messages",
            "echo",
            encode(request(vec![hi(); 1025])),
            false,
            true,
        ),
        ("129 tools", "tools", encode(many_tools), false, true),
        (
            "unknown type",
            "echo",
            encode(request(vec![message("developer", r#"{"content":"x"}"#)])),
            false,
            true,
        ),
        (
            "bad JSON",
            "echo",
            encode(request(vec![message("human", "{")])),
            false,
            true,
        ),
        (
            "NaN",
            "echo",
            encode(request(vec![message(
                "human",
                r#"{"content":"x","n":NaN}"#,
            )])),
            false,
            true,
        ),
        (
            "huge number",
            "echo",
            encode(request(vec![message(
                "human",
                r#"{"content":"x","n":1e999}"#,
            )])),
            false,
            true,
        ),
        (
            "not an object",
            "echo",
            encode(request(vec![message("human", "[]")])),
            false,
            true,
        ),
        (
            "empty data",
            "echo",
            encode(request(vec![message("human", "")])),
            false,
            true,
        ),
        (
            "other type in data",
            "echo",
            encode(request(vec![message(
                "human",
                r#"{"content":"x","type":"ai"}"#,
            )])),
            false,
            true,
        ),
        (
            "no content",
            "echo",
            encode(request(vec![message("human", "{}")])),
            false,
            true,
        ),
        (
            "content a number",
            "echo",
            encode(request(vec![message("human", r#"{"content":1}"#)])),
            false,
            true,
        ),
        (
            "chat without role",
            "echo",
            encode(request(vec![message("chat", r#"{"content":"x"}"#)])),
            false,
            true,
        ),
        (
            "tool not an object",
            "tools",
            encode(tool_list),
            false,
            true,
        ),
        ("tool bad JSON", "tools", encode(tool_bad_json), false, true),
        (
            "tool options without tools",
            "tools",
            encode(options_only),
            false,
            true,
        ),
        (
            "tool options a list",
            "tools",
            encode(options_list),
            false,
            true,
        ),
        (
            "tools to a handler without tools",
            "echo",
            encode(tools),
            false,
            true,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_chats_get_the_reference_codes_and_messages() {
    let world = World::start(5.0).await;
    let mut reference = Process::reference(&world, "py_models");
    let theirs = reference.instance_id().await;
    let ours_provider = Provider::start(&world, "rs_models", "rust", None).await;
    ready_instances(&world, "py_models", 1).await;
    let ours = ready_instances(&world, "rs_models", 1).await.remove(0);

    let mut differ = Vec::new();
    for (name, model, payload, overflowed, token) in cases() {
        let mut answers = Vec::new();
        for instance in [&theirs, &ours] {
            let mut headers = Vec::new();
            if token {
                headers.push((abi_wire::AUTH_HEADER, bound_token(instance)));
            }
            if overflowed {
                headers.push((abi_wire::overflow::REQUEST_HEADER, "upload-1".to_owned()));
            }
            answers.push(raw_chat(&world, instance, model, payload.clone(), &headers).await);
        }
        if answers[0] != answers[1] {
            differ.push(format!(
                "{name}: reference {:?}, ours {:?}",
                answers[0], answers[1]
            ));
        }
        if name == "valid" {
            assert_eq!(answers[1], (String::new(), "ai".to_owned()));
        } else {
            assert!(
                !answers[1].0.is_empty(),
                "{name} was refused: {:?}",
                answers[1]
            );
        }
    }
    assert!(differ.is_empty(), "answers differ:\n{}", differ.join("\n"));
    reference.sigterm();
    reference.exits_ok().await;
    ours_provider.stop().await;
}
