//! Chat models across implementations: the reference's caller
//! (`ModuleProxy.get_chat_model`, LangChain's `ainvoke`) chatting with our
//! host, and our caller chatting with the reference's `ModelHost`; stop
//! sequences and options reach our handler (the reference drops them); a
//! name that would break the subject is refused when declared.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk::CallErrorKind;
use abi_sdk::models::{ChatMessage, ChatModelSpec, DeclareErrorKind, Json};
use abi_sdk_e2e::World;
use serde_json::json;

use super::models_fixture::{Process, Provider, chat_model, ready_instances, reference_chat};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_caller_chats_with_our_host_and_its_stop_and_options_arrive() {
    let world = World::start(5.0).await;
    let provider = Provider::start(&world, "rs_models", "rust", None).await;
    ready_instances(&world, "rs_models", 1).await;

    let answer = reference_chat(
        &world,
        "rs_models",
        "echo",
        "hello",
        r#"["\n\n"]"#,
        r#"{"temperature": 0.5}"#,
    )
    .await;
    assert_eq!(answer["type"], "ai", "{answer}");
    let content: serde_json::Value =
        serde_json::from_str(answer["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["echo"], "hello");
    assert_eq!(content["types"], json!(["system", "human"]));
    let seen = provider.seen.all();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].stop,
        vec!["\n\n".to_owned()],
        "stop reached the handler"
    );
    assert_eq!(
        seen[0].options.get("temperature"),
        Some(&Json::Float(0.5)),
        "options reached the handler"
    );
    assert_eq!(seen[0].messages[0].content_text(), "be brief");

    // Refusals reach the reference caller with their codes.
    let missing = reference_chat(&world, "rs_models", "nope", "x", "null", "{}").await;
    assert_eq!(missing["error"], "MODEL_NOT_FOUND", "{missing}");
    let failed = reference_chat(&world, "rs_models", "echo", "fail", "null", "{}").await;
    assert_eq!(failed["error"], "MODEL_ERROR", "{failed}");
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_caller_chats_with_the_reference_host() {
    let world = World::start(5.0).await;
    let mut reference = Process::reference(&world, "py_models");
    reference.instance_id().await;
    ready_instances(&world, "py_models", 1).await;

    let echo = chat_model(&world, "py_models", "echo").await;
    let answer = echo
        .invoke([ChatMessage::system("be brief"), ChatMessage::human("hi")])
        .await
        .unwrap();
    assert_eq!(answer.kind().as_str(), "ai");
    let content: serde_json::Value = serde_json::from_str(&answer.content_text()).unwrap();
    assert_eq!(
        content,
        json!({"echo": "hi", "tools": 0, "types": ["system", "human"]})
    );

    // Tools to a handler without a tools parameter, and to one with it.
    let tool =
        std::collections::BTreeMap::from([("type".to_owned(), Json::Str("function".into()))]);
    let err = echo
        .request([ChatMessage::human("x")])
        .tool(tool.clone())
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.code()),
        (CallErrorKind::Unimplemented, Some("UNIMPLEMENTED"))
    );
    let tools = chat_model(&world, "py_models", "tools").await;
    let answer = tools
        .request([ChatMessage::human("x")])
        .tool(tool)
        .send()
        .await
        .unwrap();
    let content: serde_json::Value = serde_json::from_str(&answer.content_text()).unwrap();
    assert_eq!(content["tools"], 1);

    let missing = chat_model(&world, "py_models", "nope").await;
    let err = missing.invoke([ChatMessage::human("x")]).await.unwrap_err();
    assert_eq!(err.kind(), CallErrorKind::ModelNotFound);
    reference.sigterm();
    reference.exits_ok().await;
}

#[test]
fn a_model_name_with_a_dot_is_refused_when_declared() {
    let err = ChatModelSpec::new("gpt.4").unwrap_err();
    assert_eq!(err.kind(), DeclareErrorKind::InvalidName);
    assert!(err.to_string().contains("\"gpt.4\""), "{err}");
    assert!(err.to_string().contains("'.'"), "{err}");
}
