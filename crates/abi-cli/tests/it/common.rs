//! Helpers for abictl's tests: a real nats-server, the discovery service in
//! this process, registrations sent over the wire, and abictl run as a process.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::process::Output;
use std::time::Duration;

use abi_discovery::config::Config;
use abi_documents::config::{Storage, Valid};
use abi_documents::store::{SqliteConfig, SqliteStore};
use abi_process::{NatsSettings, Secret};
use abi_proto::discovery::v1 as pb;
use abi_test_support::{
    NatsServer, WireClient, requests, stored_snapshot, unique_name, wait_until,
};
use abi_wire::ServerList;
use abi_wire::discovery::Operation;
use clap::Parser as _;
use tokio::io::AsyncWriteExt as _;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The project secret of every test service.
pub const SECRET: &str = "cli-tests-secret-0123456789-abcdefghijklmnop";
/// Generous deadline for one step on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A nats-server and a discovery service for one project.
pub struct Stack {
    pub server: NatsServer,
    pub project: String,
    pub nats: async_nats::Client,
    stop: CancellationToken,
    task: JoinHandle<Result<(), abi_discovery::run::RunError>>,
}

impl Stack {
    /// Starts both and waits until the service answers.
    pub async fn start() -> Self {
        let server = NatsServer::start().await;
        let project = unique_name("cli");
        let valid = Config::try_parse_from([
            "abi-discovery",
            "--nats-url",
            &server.url(),
            "--project",
            &project,
            "--jwt-secret",
            SECRET,
            "--lease-seconds",
            "60",
        ])
        .unwrap()
        .validate()
        .unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(abi_discovery::run::run(valid, stop.clone()));
        let nats = async_nats::connect(server.url()).await.unwrap();
        let subject = abi_wire::discovery::operation_named(&project, "list_modules");
        wait_until(DEADLINE, || async {
            nats.request(subject.clone(), Vec::new().into())
                .await
                .is_ok()
        })
        .await
        .expect("the service serves");
        Self {
            server,
            project,
            nats,
            stop,
            task,
        }
    }

    /// Sends one request as `identity` (signed with its module key).
    async fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        op: Operation,
        identity: &str,
        request: &Req,
    ) -> Resp {
        let token = requests::module_token(SECRET, identity);
        WireClient::new(self.nats.clone(), &self.project)
            .with_timeout(DEADLINE)
            .call(op, Some(&token), request)
            .await
    }

    /// Registers an instance of `module_id`, initialized or not.
    pub async fn register(
        &self,
        descriptor: pb::ModuleDescriptor,
        instance_id: &str,
        initialized: bool,
    ) {
        let module_id = descriptor.module_id.clone();
        let reply: pb::RegisterResponse = self
            .call(
                Operation::Register,
                &module_id,
                &requests::register_request(descriptor, instance_id),
            )
            .await;
        assert!(reply.error.is_none(), "register failed: {:?}", reply.error);
        if initialized {
            let reply: pb::RenewResponse = self
                .call(
                    Operation::Renew,
                    &module_id,
                    &requests::renew_request(instance_id, true),
                )
                .await;
            assert!(reply.error.is_none(), "renew failed: {:?}", reply.error);
        }
    }

    /// Renews `instance_id` of `module_id` every 10 s until the task is
    /// aborted (a test longer than the 60 s lease keeps it registered).
    pub fn keep_renewed(&self, module_id: &str, instance_id: &str) -> JoinHandle<()> {
        let (nats, project) = (self.nats.clone(), self.project.clone());
        let token = requests::module_token(SECRET, module_id);
        let instance_id = instance_id.to_owned();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let _: Result<pb::RenewResponse, _> = WireClient::new(nats.clone(), &project)
                    .with_timeout(DEADLINE)
                    .try_call(
                        Operation::Renew,
                        Some(&token),
                        &requests::renew_request(&instance_id, true),
                    )
                    .await;
            }
        })
    }

    /// The raw snapshot bytes as stored.
    pub async fn raw_snapshot(&self) -> Vec<u8> {
        stored_snapshot(&self.nats, &self.project)
            .await
            .unwrap()
            .expect("a snapshot was written")
            .to_vec()
    }

    /// abictl with this stack's URL, project and secret.
    pub fn abictl(&self) -> Abictl {
        Abictl {
            env: vec![
                ("NATS_URL".into(), self.server.url()),
                ("ABI_PROJECT".into(), self.project.clone()),
                ("ABI_JWT_SECRET".into(), SECRET.into()),
            ],
            stdin: None,
        }
    }

    /// Stops the service and checks that it stopped cleanly.
    pub async fn stop(self) {
        self.stop.cancel();
        let stopped = tokio::time::timeout(DEADLINE, self.task)
            .await
            .unwrap()
            .unwrap();
        assert!(stopped.is_ok(), "service stopped with {stopped:?}");
    }
}

/// A descriptor with one agent and optional dependencies (major 1).
pub fn descriptor(module_id: &str, deps: &[&str]) -> pb::ModuleDescriptor {
    pb::ModuleDescriptor {
        module_id: module_id.into(),
        package_version: "1.2.3".into(),
        contract_major: 1,
        dependencies: deps
            .iter()
            .map(|d| pb::Dependency {
                module_id: (*d).into(),
                contract_major: 1,
            })
            .collect(),
        agents: vec![pb::AgentDescriptor {
            name: "summarizer".into(),
            capabilities: vec!["summarize".into()],
            contract_major: 1,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// One abictl invocation under construction.
pub struct Abictl {
    env: Vec<(String, String)>,
    stdin: Option<Vec<u8>>,
}

/// What an abictl run printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Abictl {
    /// Sets (or overrides) an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
        self
    }

    /// Removes an environment variable.
    pub fn without(mut self, key: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self
    }

    /// Feeds `bytes` on stdin.
    pub fn stdin(mut self, bytes: Vec<u8>) -> Self {
        self.stdin = Some(bytes);
        self
    }

    /// Runs `abictl args...` to completion.
    pub async fn run(self, args: &[&str]) -> Run {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_abictl"));
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn abictl");
        let mut stdin = child.stdin.take().unwrap();
        if let Some(bytes) = self.stdin {
            stdin.write_all(&bytes).await.unwrap();
        }
        drop(stdin);
        let output: Output = tokio::time::timeout(DEADLINE, child.wait_with_output())
            .await
            .expect("abictl finished in time")
            .unwrap();
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Abictl {
    /// Starts `abictl args...` with stdout piped (for commands that run
    /// until stopped); killed when dropped.
    pub fn spawn(self, args: &[&str]) -> tokio::process::Child {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_abictl"))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn abictl")
    }
}

impl Run {
    /// Asserts a zero exit and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.code, 0, "abictl failed: {self:#?}");
        &self.stdout
    }

    /// Stdout as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.ok()).unwrap_or_else(|e| panic!("not JSON ({e}): {self:#?}"))
    }
}

impl Abictl {
    /// abictl pointed at `url` with the test secret and a throwaway project.
    pub fn for_url(url: &str) -> Self {
        Abictl {
            env: vec![
                ("NATS_URL".into(), url.into()),
                ("ABI_PROJECT".into(), "gone".into()),
                ("ABI_JWT_SECRET".into(), SECRET.into()),
            ],
            stdin: None,
        }
    }
}

impl Stack {
    /// Registers an initialized instance in `rollout` with cohort `modules`.
    pub async fn register_in_rollout(
        &self,
        descriptor: pb::ModuleDescriptor,
        instance_id: &str,
        rollout: &str,
        modules: &[&str],
    ) {
        let module_id = descriptor.module_id.clone();
        let reply: pb::RegisterResponse = self
            .call(
                Operation::Register,
                &module_id,
                &pb::RegisterRequest {
                    rollout_id: rollout.into(),
                    rollout_modules: modules.iter().map(|m| (*m).to_owned()).collect(),
                    ..requests::register_request(descriptor, instance_id)
                },
            )
            .await;
        assert!(reply.error.is_none(), "register failed: {:?}", reply.error);
        let reply: pb::RenewResponse = self
            .call(
                Operation::Renew,
                &module_id,
                &requests::renew_request(instance_id, true),
            )
            .await;
        assert!(reply.error.is_none(), "renew failed: {:?}", reply.error);
    }
}

/// Our document service in process, sharing the stack's secret.
pub async fn documents(stack: &Stack, dir: &std::path::Path) -> CancellationToken {
    let path = dir.join("docs.sqlite");
    let store = SqliteStore::open(SqliteConfig::new(path.clone()))
        .await
        .unwrap();
    let config = Valid {
        nats: NatsSettings::plain(ServerList::parse(&stack.server.url()).unwrap()),
        storage: Storage::Sqlite(path),
        secret: Secret::new(SECRET),
        admin_identities: vec!["api".into()],
        strict_namespaces: false,
        shutdown_grace: Duration::from_secs(5),
        max_concurrent_requests: std::num::NonZeroUsize::new(64).unwrap(),
        metrics_addr: None,
    };
    let stop = CancellationToken::new();
    tokio::spawn(abi_documents::run::run_with(config, store, stop.clone()));
    stop
}
