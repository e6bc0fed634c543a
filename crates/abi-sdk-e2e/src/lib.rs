//! Harness for the end-to-end tests: a nats-server, a discovery service, and
//! module processes whose stdout `EVENT` lines the tests wait on.
//!
//! Everything here panics with a message on failure: that is how a test fails.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod service;

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, SystemTime};

use abi_sdk::{DiscoveryClient, TokenSource};
use abi_test_support::{NatsServer, python, unique_name};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

pub use service::{Backend, Service};

/// Generous: the machine running the tests may be loaded.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// The project secret every test service and module key derives from.
pub const SECRET: &str = "e2e-secret-which-is-long-enough-for-hs256";

/// A nats-server, a discovery service for a fresh project, and an admin client.
#[allow(missing_debug_implementations)]
pub struct World {
    /// First, so it is dropped (killed) before the server it talks to.
    pub service: Service,
    /// The broker.
    pub nats: NatsServer,
    /// The fresh project the service serves.
    pub project: String,
    /// A client with an admin identity.
    pub admin: DiscoveryClient,
    /// The lease the service grants, in seconds.
    pub lease_seconds: f64,
}

impl World {
    /// A world whose service grants `lease_seconds` leases.
    pub async fn start(lease_seconds: f64) -> Self {
        let nats = NatsServer::start().await;
        let project = unique_name("p");
        let service =
            Service::start(&nats.url(), &project, lease_seconds, Backend::from_env()).await;
        let connection = async_nats::connect(nats.url())
            .await
            .expect("admin connects");
        let token = abi_test_support::requests::service_token(SECRET, "engine");
        let admin = DiscoveryClient::new(connection, project.clone(), TokenSource::issued(token));
        Self {
            nats,
            project,
            service,
            admin,
            lease_seconds,
        }
    }

    /// The environment a module `id` needs to join this world.
    pub fn module_env(&self, id: &str) -> Vec<(String, String)> {
        vec![
            ("E2E_ID".into(), id.into()),
            ("NATS_URL".into(), self.nats.url()),
            ("ABI_PROJECT".into(), self.project.clone()),
            (
                "ABI_MODULE_KEY".into(),
                abi_auth::module_key(SECRET, id).expect("module key"),
            ),
        ]
    }

    /// Spawns the test module `id` with extra `env`.
    pub fn spawn(&self, id: &str, env: &[(&str, &str)]) -> ModuleProc {
        let mut all = self.module_env(id);
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        ModuleProc::spawn(id, &all)
    }

    /// The statuses of `module_id`'s live instances (empty when none).
    pub async fn statuses(&self, module_id: &str) -> Vec<(String, String)> {
        match self.admin.get_module(module_id, 1).await {
            Ok(instances) => instances
                .into_iter()
                .map(|i| (i.instance_id, i.status))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Waits until `module_id` has an instance with `status`.
    pub async fn wait_status(&self, module_id: &str, status: &str) {
        let found = abi_test_support::wait_until(DEADLINE, || async {
            self.statuses(module_id)
                .await
                .iter()
                .any(|(_, s)| s == status)
        })
        .await;
        assert!(
            found.is_ok(),
            "{module_id} never {status}; now {:?}",
            self.statuses(module_id).await
        );
    }

    /// Waits until `module_id` has no live instance.
    pub async fn wait_gone(&self, module_id: &str) {
        let gone = abi_test_support::wait_until(DEADLINE, || async {
            self.statuses(module_id).await.is_empty()
        })
        .await;
        assert!(gone.is_ok(), "{module_id} never left the registry");
    }
}

/// The test module binary.
///
/// Integration tests run from `<target>/debug/deps/`, binaries (the bench)
/// from `<target>/debug/`: the module binary sits in the latter. Cargo builds
/// it before any integration test of this package runs.
pub fn module_binary() -> PathBuf {
    let me = std::env::current_exe().expect("current exe");
    let mut dir = me.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join("e2e-module");
    assert!(path.exists(), "no test module at {}", path.display());
    path
}

/// A running module process and the `EVENT` lines it printed.
#[derive(Debug)]
pub struct ModuleProc {
    /// The instance id it registers with.
    pub id: String,
    child: Child,
    lines_rx: mpsc::UnboundedReceiver<String>,
    /// Every line read so far.
    pub lines: Vec<String>,
}

impl ModuleProc {
    /// Spawns the test module with exactly `env` added.
    pub fn spawn(id: &str, env: &[(String, String)]) -> Self {
        let mut command = Command::new(module_binary());
        // Rollout variables only when the test sets them.
        command
            .env_remove("ABI_ROLLOUT_ID")
            .env_remove("ABI_ROLLOUT_MODULES")
            .envs(env.iter().map(|(k, v)| (k, v)));
        Self::from_command(id, command)
    }

    /// Spawns a module written with the Python reference SDK (`script`).
    pub fn spawn_python(id: &str, script: &str, env: &[(String, String)]) -> Self {
        let mut command = Command::new(python());
        command
            .arg("-c")
            .arg(script)
            .envs(env.iter().map(|(k, v)| (k, v)));
        Self::from_command(id, command)
    }

    fn from_command(id: &str, mut command: Command) -> Self {
        command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn a module process");
        let stdout = child.stdout.take().expect("stdout piped");
        let (lines_tx, lines_rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            id: id.to_owned(),
            child,
            lines_rx,
            lines: Vec::new(),
        }
    }

    /// Waits for the next line starting with `EVENT <what>`, returns it.
    pub async fn expect(&mut self, what: &str) -> String {
        let prefix = format!("EVENT {what}");
        if let Some(line) = self.lines.iter().find(|l| l.starts_with(&prefix)) {
            return line.clone();
        }
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines_rx.recv()).await;
            match line {
                Ok(Some(line)) => {
                    self.lines.push(line.clone());
                    if line.starts_with(&prefix) {
                        return line;
                    }
                }
                Ok(None) => panic!(
                    "{}: exited before `{what}`; lines: {:#?}",
                    self.id, self.lines
                ),
                Err(_) => panic!(
                    "{}: no `{what}` within {DEADLINE:?}; lines: {:#?}",
                    self.id, self.lines
                ),
            }
        }
    }

    /// Whether a line starting with `EVENT <what>` was read so far (after
    /// reading whatever is already buffered).
    pub fn saw(&mut self, what: &str) -> bool {
        while let Ok(line) = self.lines_rx.try_recv() {
            self.lines.push(line);
        }
        let prefix = format!("EVENT {what}");
        self.lines.iter().any(|l| l.starts_with(&prefix))
    }

    /// The names of the events read so far, in order.
    pub fn events(&mut self) -> Vec<String> {
        while let Ok(line) = self.lines_rx.try_recv() {
            self.lines.push(line);
        }
        self.lines
            .iter()
            .filter_map(|l| l.strip_prefix("EVENT "))
            .map(|l| l.split(' ').next().unwrap_or("").to_owned())
            .collect()
    }

    /// The `t_us=` timestamp of a line.
    pub fn time_of(line: &str) -> u128 {
        line.rsplit("t_us=")
            .next()
            .and_then(|t| t.trim().parse().ok())
            .expect("line has a timestamp")
    }

    /// Sends a real signal (`TERM`, `INT`, `KILL`) to the process.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("process still running");
        let status = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {pid} failed");
    }

    /// Waits for the process to exit.
    pub async fn wait(&mut self) -> ExitStatus {
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} did not exit within {DEADLINE:?}", self.id))
            .expect("wait for child");
        // Collect what it printed before it exited.
        while let Some(line) = self.lines_rx.recv().await {
            self.lines.push(line);
        }
        status
    }

    /// Kills the process at once (no drain) and waits for it.
    pub async fn kill(&mut self) {
        self.signal("KILL");
        let _ = self.wait().await;
    }
}

/// The registry snapshot as the service stored it (for lease checks); empty
/// when it cannot be read.
pub async fn stored_records(world: &World) -> Vec<abi_sdk::pb::RegistryRecord> {
    use abi_proto::Message as _;
    let Some(nats) = world.admin.nats() else {
        return Vec::new();
    };
    let bytes = abi_test_support::stored_snapshot(nats, &world.project)
        .await
        .ok()
        .flatten();
    bytes
        .map(|b| {
            abi_proto::discovery::v1::RegistryState::decode(b.as_ref())
                .map(|s| s.records)
                .unwrap_or_default()
        })
        .unwrap_or_default()
}

/// The instance id a module printed at `on_initialized`.
pub fn instance_of(line: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("instance="))
        .expect("line names the instance")
        .to_owned()
}

/// Seconds since the Unix epoch.
pub fn now_epoch() -> f64 {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A module written with the Python reference SDK (`E2E_ID`, `E2E_DEPS`):
/// it prints `EVENT on_initialized` and `EVENT run` like the test module.
pub const PYTHON_MODULE: &str = r#"
import asyncio, os, time
from naas_abi_sdk.module import BaseModule, ModuleDependencies, run_module
from naas_abi_sdk.discovery import DiscoveryConfiguration
from naas_abi_sdk.service_token import ModuleToken

class M(BaseModule):
    module_id = os.environ["E2E_ID"]
    dependencies = ModuleDependencies(modules=tuple(
        d.split(":")[0] for d in os.environ.get("E2E_DEPS", "").split(",") if d))
    def on_initialized(self):
        print(f"EVENT on_initialized t_us={time.time_ns() // 1000}", flush=True)
    async def run(self):
        print(f"EVENT run t_us={time.time_ns() // 1000}", flush=True)
        await asyncio.Event().wait()

asyncio.run(run_module(M, url=os.environ["NATS_URL"],
    token=ModuleToken(M.module_id, os.environ["ABI_MODULE_KEY"]),
    discovery=DiscoveryConfiguration(project=os.environ["ABI_PROJECT"])))
"#;

/// `GET path` on a module's health probe: the status code and body.
pub async fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let answer = abi_test_support::http::exchange(addr, "GET", path, b"", DEADLINE)
        .await
        .ok()?;
    (answer.status != 0).then(|| (answer.status, answer.body.trim().to_owned()))
}

/// The address a module printed in its `health addr=` line.
pub fn health_addr(line: &str) -> String {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("addr="))
        .expect("line names the address")
        .to_owned()
}
