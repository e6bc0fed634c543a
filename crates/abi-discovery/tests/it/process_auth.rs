//! The binary authenticates to a broker that requires it (user and password), and
//! fails with one clear line when it lacks the credentials.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::edges_common;

use std::process::{Child, Command, Stdio};

use abi_proto::discovery::v1 as pb;
use abi_test_support::{nats_server_binary, unique_name};
use abi_wire::discovery::Operation;
use edges_common::binary::{OwnerProcess, command};
use edges_common::*;

/// A nats-server requiring user `edge` / password `pw-edge`, killed on drop.
struct AuthServer {
    child: Child,
    port: u16,
    _store: tempfile::TempDir,
}

impl AuthServer {
    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let store = tempfile::tempdir().unwrap();
        let child = Command::new(nats_server_binary())
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(store.path())
            .args(["--user", "edge", "--pass", "pw-edge"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nats-server");
        let server = Self {
            child,
            port,
            _store: store,
        };
        abi_test_support::wait_until(CALL_TIMEOUT, || async { server.connect().await.is_ok() })
            .await
            .expect("nats-server with auth starts");
        server
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    async fn connect(&self) -> Result<async_nats::Client, async_nats::ConnectError> {
        async_nats::ConnectOptions::new()
            .user_and_password("edge".into(), "pw-edge".into())
            .connect(self.url())
            .await
    }

    async fn rpc(&self, project: &str) -> Rpc {
        Rpc::new(self.connect().await.unwrap(), project)
    }
}

impl Drop for AuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn user_and_password_from_the_environment() {
    let server = AuthServer::start().await;
    let project = unique_name("auth");
    let rpc = server.rpc(&project).await;
    let _owner = OwnerProcess::start_probed(
        &server.url(),
        &rpc,
        &project,
        &[("NATS_USER", "edge"), ("NATS_PASSWORD", "pw-edge")],
    )
    .await;
    let listed: pb::ListModulesResponse = rpc
        .call(
            Operation::ListModules,
            Some(&service_token("api")),
            &pb::ListModulesRequest {
                limit: 5,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(listed.error, None);
}

#[tokio::test]
async fn missing_credentials_fail_in_one_line() {
    let server = AuthServer::start().await;
    let out = tokio::task::spawn_blocking({
        let url = server.url();
        move || {
            command()
                .env("ABI_JWT_SECRET", "s3cret")
                .env("NATS_URL", url)
                .env("NATS_USER", "edge")
                .env("NATS_PASSWORD", "wrong-password")
                .env("ABI_CONNECT_TIMEOUT_SECS", "5")
                .env("ABI_LOG", "off")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("could not connect to NATS"), "{stderr}");
    assert!(!stderr.contains("wrong-password"), "{stderr}");
}
