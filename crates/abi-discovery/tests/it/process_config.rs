//! The binary refuses bad configurations and unreachable servers clearly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::edges_common;

use edges_common::binary::command;

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn refuses_to_start_without_a_secret() {
    let out = command().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = lines(&out.stderr);
    assert_eq!(stderr.len(), 1, "{stderr:?}");
    assert!(stderr[0].contains("ABI_JWT_SECRET"), "{stderr:?}");
}

#[test]
fn reports_every_bad_setting_at_once() {
    let out = command()
        .env("ABI_PROJECT", "no.dots")
        .env("ABI_LEASE_SECONDS", "0")
        .env("ABI_JWT_SECRET_FILE", "/nonexistent/secret")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = lines(&out.stderr);
    assert_eq!(stderr.len(), 3, "{stderr:?}");
    for setting in ["ABI_PROJECT", "ABI_LEASE_SECONDS", "ABI_JWT_SECRET_FILE"] {
        assert!(
            stderr.iter().any(|l| l.contains(setting)),
            "{setting}: {stderr:?}"
        );
    }
    // The secret never shows, even in a usage error.
    let out = command()
        .env("ABI_JWT_SECRET", "do-not-print-me")
        .arg("--no-such-flag")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("do-not-print-me"));
}

#[test]
fn an_unreachable_server_is_one_line_and_a_failure() {
    // A port nothing listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = command()
        .env("ABI_JWT_SECRET", "s3cret-value")
        .env("NATS_URL", format!("nats://127.0.0.1:{port}"))
        .env("ABI_CONNECT_TIMEOUT_SECS", "3")
        .env("ABI_LOG", "off")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = lines(&out.stderr);
    assert_eq!(stderr.len(), 1, "{stderr:?}");
    assert!(
        stderr[0].contains("could not connect to NATS"),
        "{stderr:?}"
    );
    assert!(!stderr[0].contains("s3cret-value"));
}

/// Runs the binary against a real server with `ABI_LOG=info`, its stderr
/// going to a file (no terminal), until it stops on SIGTERM; returns what
/// it logged.
async fn logged_to_a_file(format: Option<&str>) -> String {
    let server = abi_test_support::NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stderr.log");
    let mut cmd = command();
    cmd.env("ABI_JWT_SECRET", "s3cret-value")
        .env("NATS_URL", server.url())
        .env("ABI_PROJECT", abi_test_support::unique_name("logs"))
        .env("ABI_LOG", "info")
        .stderr(std::fs::File::create(&path).unwrap());
    if let Some(format) = format {
        cmd.env("ABI_LOG_FORMAT", format);
    }
    let mut child = cmd.spawn().unwrap();
    abi_test_support::wait_until(edges_common::CALL_TIMEOUT, || async {
        std::fs::read_to_string(&path).is_ok_and(|text| text.contains("abi-discovery ready"))
    })
    .await
    .expect("the service logs that it serves");
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(child.wait().unwrap().success());
    std::fs::read_to_string(&path).unwrap()
}

#[tokio::test]
async fn logs_into_a_file_are_plain_text_or_json_lines() {
    let text = logged_to_a_file(None).await;
    assert!(
        !text.contains('\u{1b}'),
        "escape sequences in a file:\n{text}"
    );
    assert!(text.contains("abi-discovery stopped"), "{text}");
    assert!(!text.contains("s3cret-value"));

    let json = logged_to_a_file(Some("json")).await;
    for line in json.lines() {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        assert!(
            event["level"].is_string() && event["fields"].is_object(),
            "{line}"
        );
    }
    assert!(json.contains("abi-discovery stopped"), "{json}");
    assert!(!json.contains('\u{1b}') && !json.contains("s3cret-value"));
}

#[test]
fn an_unknown_log_format_is_refused() {
    let out = command()
        .env("ABI_JWT_SECRET", "s3cret-value")
        .env("ABI_LOG_FORMAT", "yaml")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ABI_LOG_FORMAT"), "{stderr}");
}
