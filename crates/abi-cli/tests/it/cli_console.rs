//! `abictl console` as a process against a real nats-server and the
//! discovery service: it prints its address, serves the pages and the API,
//! keeps a registration it sees on the event stream, refuses actions unless
//! started with `--allow-actions`, and stops on SIGTERM at once even with a
//! page's event stream open.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use abi_test_support::http::exchange;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

use crate::common::{DEADLINE, Stack};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_serves_the_project_live_and_stops_on_sigterm() {
    let stack = Stack::start().await;
    let descriptor = pb::ModuleDescriptor {
        module_id: "acme.web".into(),
        contract_major: 1,
        ..Default::default()
    };
    stack.register(descriptor, "web-1", true).await;
    let mut console = stack
        .abictl()
        .spawn(&["console", "--listen", "127.0.0.1:0"]);
    let mut lines = BufReader::new(console.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .expect("the console starts")
        .unwrap()
        .unwrap();
    let addr = first
        .strip_prefix("console on http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();

    let page = exchange(&addr, "GET", "/jobs", b"", DEADLINE)
        .await
        .unwrap();
    assert_eq!(page.status, 200);
    assert!(page.body.contains("abi console"), "{}", page.body);
    assert!(
        page.body.contains(r#"content="off""#),
        "read only by default"
    );
    let script = exchange(&addr, "GET", "/assets/console.js", b"", DEADLINE)
        .await
        .unwrap();
    assert!(script.head.contains("text/javascript"), "{}", script.head);

    // A page's event stream: the registry as it is, first.
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    stream
        .write_all(format!("GET /api/events HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut events = BufReader::new(stream).lines();
    let saw_module = async {
        while let Some(line) = events.next_line().await.unwrap() {
            if line.starts_with("data:") && line.contains("acme.web") {
                return;
            }
        }
        panic!("the stream ended");
    };
    tokio::time::timeout(DEADLINE, saw_module)
        .await
        .expect("the module on the stream");

    let evict = exchange(&addr, "POST", "/api/instances/web-1/evict", b"", DEADLINE)
        .await
        .unwrap();
    assert_eq!(evict.status, 403, "{}", evict.body);
    assert!(
        evict
            .body
            .contains(abi_wire::ErrorCode::PermissionDenied.as_str())
    );

    // SIGTERM with the stream still open: the console stops at once.
    let pid = console.id().unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), console.wait())
        .await
        .expect("the console stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    drop(events);
    stack.stop().await;
}
