//! Helpers shared by the edge tests: an in-process owner, an RPC caller, tokens,
//! request fixtures and a snapshot reader.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod binary;

use std::time::Duration;

use abi_discovery::config::Config;
use abi_proto::discovery::v1 as pb;
pub use abi_test_support::requests;
use bytes::Bytes;
use clap::Parser as _;
use prost::Message as _;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The project secret every test owner uses.
pub const SECRET: &str = "edge-tests-secret-0123456789-abcdefghijklmnop";
/// Generous deadline for one call on a loaded 2-core machine.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A token for the engine's services, signed with the project secret.
pub fn service_token(identity: &str) -> String {
    requests::service_token(SECRET, identity)
}

/// A module's own token, signed with its module key.
pub fn module_token(identity: &str) -> String {
    requests::module_token(SECRET, identity)
}

/// A caller token bound to one instance (`aud`), signed with the project secret.
pub fn bound_service_token(identity: &str, instance_id: &str) -> String {
    requests::bound_service_token(SECRET, identity, instance_id)
}

/// A caller token bound to one instance, signed with the caller's module key.
pub fn bound_module_token(identity: &str, instance_id: &str) -> String {
    requests::bound_module_token(SECRET, identity, instance_id)
}

/// A registration of `module_id` with one invocable agent `Researcher`, one model
/// `chat` and one app `board`.
pub fn register_request(module_id: &str, instance_id: &str) -> pb::RegisterRequest {
    requests::register_request(
        pb::ModuleDescriptor {
            module_id: module_id.to_owned(),
            package_version: "1.0.0".to_owned(),
            contract_major: 1,
            agents: vec![pb::AgentDescriptor {
                name: "Researcher".to_owned(),
                description: "Finds facts".to_owned(),
                contract_major: 1,
                capabilities: vec!["agent.invoke.v1".to_owned()],
            }],
            ..Default::default()
        },
        instance_id,
    )
}

/// `abi-discovery`'s `run` in this process, on its own task.
pub struct Owner {
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), abi_discovery::run::RunError>>,
}

impl Owner {
    /// Starts an owner of `project` on `url` (plus `extra` flags) and waits until it
    /// answers.
    pub async fn start(url: &str, project: &str, extra: &[&str]) -> Self {
        let mut args = vec![
            "abi-discovery",
            "--nats-url",
            url,
            "--project",
            project,
            "--jwt-secret",
            SECRET,
        ];
        args.extend_from_slice(extra);
        let valid = Config::try_parse_from(args).unwrap().validate().unwrap();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(abi_discovery::run::run(valid, shutdown.clone()));
        let rpc = Rpc::connect(url, project).await;
        wait_ready(&rpc).await;
        Self { shutdown, task }
    }

    /// Stops it gracefully and returns what `run` returned.
    pub async fn stop(self) -> Result<(), abi_discovery::run::RunError> {
        self.shutdown.cancel();
        tokio::time::timeout(CALL_TIMEOUT, self.task)
            .await
            .expect("owner stops within the deadline")
            .unwrap()
    }
}

/// A NATS client calling one project's discovery subjects (the shared raw
/// wire client).
pub type Rpc = abi_test_support::WireClient;

/// Waits (30 s at most) until some owner of `rpc`'s project answers.
pub async fn wait_ready(rpc: &Rpc) {
    rpc.wait_ready(&service_token("api"), CALL_TIMEOUT).await;
}

/// The registry snapshot bytes of `project` as stored (empty when never written).
pub async fn snapshot_bytes(client: &async_nats::Client, project: &str) -> Bytes {
    abi_test_support::stored_snapshot(client, project)
        .await
        .unwrap()
        .unwrap_or_default()
}

/// The decoded registry snapshot of `project`.
pub async fn snapshot(client: &async_nats::Client, project: &str) -> pb::RegistryState {
    pb::RegistryState::decode(snapshot_bytes(client, project).await).unwrap()
}

/// Waits (30 s at most) until `n` owners answer `$SRV.PING.abi-discovery`. An owner
/// announces itself only once its endpoints serve, so after this every one of them
/// takes its share of the queue group.
pub async fn wait_for_owners(client: &async_nats::Client, n: usize) {
    use futures::StreamExt as _;
    abi_test_support::wait_until(CALL_TIMEOUT, || async {
        let inbox = client.new_inbox();
        let mut replies = client.subscribe(inbox.clone()).await.unwrap();
        client
            .publish_with_reply("$SRV.PING.abi-discovery", inbox, "".into())
            .await
            .unwrap();
        let mut seen = 0;
        // Replies from live owners come within milliseconds; stop at the first gap.
        while let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_millis(300), replies.next()).await
        {
            seen += 1;
        }
        seen >= n
    })
    .await
    .unwrap_or_else(|_| panic!("{n} owners announce themselves within 30 s"));
}
