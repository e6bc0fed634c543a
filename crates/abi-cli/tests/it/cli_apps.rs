//! abictl's web app commands (`apps`, `serve-apps`) against a real
//! nats-server, the discovery service and the Python reference's `AppHost`
//! (`tests/interop/app_peer.py serve`): a plain HTTP client reaches the app
//! through the gateway, files and the ASGI app alike, and SIGTERM stops it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_test_support::{python, wait_until, workspace_root};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

use crate::common::{DEADLINE, SECRET, Stack};

/// One GET over a fresh connection: (status, headers, body).
async fn http_get(addr: &str, path: &str) -> (u16, String, String) {
    http(addr, "GET", path, &[]).await
}

/// One HTTP request over a fresh connection: (status, headers, body).
async fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, String, String) {
    let answer = abi_test_support::http::exchange(addr, method, path, body, DEADLINE)
        .await
        .expect("the gateway answers");
    (answer.status, answer.head, answer.body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_lists_them_and_serve_apps_reaches_them_over_plain_http() {
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let board = dir.path().join("board");
    std::fs::create_dir_all(&board).unwrap();
    std::fs::write(board.join("index.html"), "<h1>board</h1>").unwrap();
    let _reference = Command::new(python())
        .arg(workspace_root().join("tests/interop/app_peer.py"))
        .arg("serve")
        .arg(&board)
        .env("NATS_URL", stack.server.url())
        .env("ABI_PROJECT", &stack.project)
        .env("E2E_ID", "py_apps")
        .env(
            "ABI_MODULE_KEY",
            abi_auth::module_key(SECRET, "py_apps").unwrap(),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let ready = || async {
        let listed = stack.abictl().run(&["--json", "apps"]).await.json();
        listed.as_array().unwrap().iter().any(|a| {
            a["module"] == "py_apps" && a["instances"][0]["status"] == abi_wire::status::READY
        })
    };
    wait_until(DEADLINE, ready)
        .await
        .expect("the reference module serves");
    let listed = stack
        .abictl()
        .run(&["--json", "apps", "py_apps"])
        .await
        .json();
    assert_eq!(listed[0]["name"], "board");
    assert_eq!(listed[0]["path"], "/apps/py_apps/board");
    let table = stack.abictl().run(&["apps"]).await;
    assert!(table.ok().contains("/apps/py_apps/board/"), "{table:#?}");

    let mut gateway = stack
        .abictl()
        .spawn(&["serve-apps", "--listen", "127.0.0.1:0"]);
    let mut lines = BufReader::new(gateway.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .expect("the gateway starts")
        .unwrap()
        .unwrap();
    let addr = first
        .strip_prefix("serving apps on http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();

    let (status, head, _) = http_get(&addr, "/apps/py_apps/board").await;
    assert_eq!(status, 308);
    assert!(head.contains("location: /apps/py_apps/board/"), "{head}");
    let (status, head, body) = http_get(&addr, "/apps/py_apps/board/").await;
    assert_eq!((status, body.as_str()), (200, "<h1>board</h1>"), "{head}");
    assert!(head.contains("etag: \""), "{head}");
    let (status, _, body) = http_get(&addr, "/apps/py_apps/board/api/echo?x=1").await;
    assert_eq!(status, 200);
    let echoed: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(echoed["path"], "/api/echo", "{echoed}");
    assert_eq!(echoed["query"], "x=1");
    assert_eq!(
        echoed["caller"], "api",
        "the gateway calls as the API identity"
    );
    // An upload above the inline limit crosses the gateway as the app
    // reads it.
    let upload = vec![b'u'; 600 * 1024];
    let (status, _, body) = http(&addr, "POST", "/apps/py_apps/board/api/echo", &upload).await;
    assert_eq!(status, 200, "{body}");
    let echoed: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(echoed["body_len"], upload.len(), "{echoed}");
    let (status, _, body) = http_get(&addr, "/apps/py_apps/nope/").await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body.contains(abi_wire::ErrorCode::AppNotFound.as_str()),
        "{body}"
    );

    let pid = gateway.id().unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), gateway.wait())
        .await
        .expect("the gateway stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    stack.stop().await;
}
