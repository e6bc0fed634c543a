//! The binary refuses bad configurations and unreachable servers clearly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod edges_common;

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
