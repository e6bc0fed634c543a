//! abictl's chat model commands (`models`, `chat`) against a real
//! nats-server, the discovery service and the Python reference's
//! `ModelHost` (`tests/interop/model_peer.py serve`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_proto::discovery::v1 as pb;
use abi_test_support::{python, wait_until, workspace_root};
use tokio::process::Command;

use crate::common::{DEADLINE, SECRET, Stack, descriptor};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_lists_served_models_and_chat_talks_to_one() {
    let stack = Stack::start().await;
    let _reference = Command::new(python())
        .arg(workspace_root().join("tests/interop/model_peer.py"))
        .arg("serve")
        .env("NATS_URL", stack.server.url())
        .env("ABI_PROJECT", &stack.project)
        .env("E2E_ID", "py_models")
        .env(
            "ABI_MODULE_KEY",
            abi_auth::module_key(SECRET, "py_models").unwrap(),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // A declaring instance that does not serve yet.
    let mut other = descriptor("other", &[]);
    other.models = vec![pb::ModelDescriptor {
        name: "m1".into(),
        description: "not served yet".into(),
        kind: "chat".into(),
    }];
    stack.register(other, "other-1", false).await;

    let ready = || async {
        let listed = stack.abictl().run(&["--json", "models"]).await.json();
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["module"] == "py_models" && m["instances"][0]["status"] == "READY")
    };
    wait_until(DEADLINE, ready)
        .await
        .expect("the reference module serves");
    let listed = stack.abictl().run(&["--json", "models"]).await.json();
    let rows: Vec<(String, String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["module"].as_str().unwrap().to_owned(),
                m["name"].as_str().unwrap().to_owned(),
                m["instances"][0]["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("other".into(), "m1".into(), "STARTING".into()),
            ("py_models".into(), "echo".into(), "READY".into()),
            ("py_models".into(), "tools".into(), "READY".into()),
        ]
    );
    let table = stack.abictl().run(&["models", "py_models"]).await;
    assert!(table.ok().contains("says it back"), "{table:#?}");
    assert!(table.ok().contains("(READY)"), "{table:#?}");
    assert!(!table.ok().contains("m1"), "{table:#?}");

    // A chat, signed by abictl with the project secret, bound to the instance.
    let chat = stack
        .abictl()
        .run(&[
            "chat",
            "py_models",
            "echo",
            "--system",
            "be brief",
            "hello",
            "world",
        ])
        .await;
    let content: serde_json::Value = serde_json::from_str(chat.ok().trim()).unwrap();
    assert_eq!(content["echo"], "hello world");
    assert_eq!(content["types"], serde_json::json!(["system", "human"]));
    let json = stack
        .abictl()
        .run(&["--json", "chat", "py_models", "echo", "hi"])
        .await
        .json();
    assert_eq!(json["type"], "ai");
    assert_eq!(json["data"]["tool_calls"], serde_json::json!([]));

    let missing = stack
        .abictl()
        .run(&["chat", "py_models", "nope", "hi"])
        .await;
    assert_eq!(missing.code, 1, "{missing:#?}");
    assert!(missing.stderr.contains("MODEL_NOT_FOUND"), "{missing:#?}");
    let unserved = stack.abictl().run(&["chat", "other", "m1", "hi"]).await;
    assert_eq!(unserved.code, 1, "{unserved:#?}");
    assert!(
        unserved.stderr.contains("MODULE_UNAVAILABLE"),
        "{unserved:#?}"
    );
    stack.stop().await;
}
