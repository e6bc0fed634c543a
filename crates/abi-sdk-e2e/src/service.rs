//! The discovery service under test, started and stopped like a process.

use std::process::Stdio;

use abi_discovery::config::Config;
use abi_test_support::python;
use clap::Parser as _;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{DEADLINE, SECRET};

/// Which implementation serves discovery: ours (in process) unless
/// `E2E_SERVICE=python` asks for the reference (a Python process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `abi_discovery::run::run`, in this process.
    Rust,
    /// `naas_abi_core`'s `start_discovery`, in a Python process.
    Python,
}

impl Backend {
    /// The backend the environment asks for (default [`Backend::Rust`]).
    pub fn from_env() -> Self {
        match std::env::var("E2E_SERVICE").as_deref() {
            Ok("python") => Self::Python,
            _ => Self::Rust,
        }
    }
}

#[derive(Debug)]
enum Running {
    Rust {
        stop: CancellationToken,
        task: JoinHandle<Result<(), String>>,
    },
    Python(Child),
}

/// The reference service (naas_abi_core), printing READY once it serves.
const REFERENCE_SERVICE: &str = r#"
import asyncio, os, signal, sys
import nats
from naas_abi_core.services.discovery.discovery_factory import start_discovery

async def main():
    nc = await nats.connect(os.environ["NATS_URL"], max_reconnect_attempts=-1)
    service = await start_discovery(
        nc, os.environ["ABI_JWT_SECRET"], os.environ["ABI_PROJECT"],
        lease_seconds=float(os.environ["ABI_LEASE_SECONDS"]))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("READY", flush=True)
    await stop.wait()
    await service.stop()
    await nc.close()

asyncio.run(main())
"#;

/// A running discovery service for one project.
#[derive(Debug)]
pub struct Service {
    url: String,
    project: String,
    lease_seconds: f64,
    backend: Backend,
    running: Option<Running>,
}

impl Service {
    /// Starts the service and waits until it serves.
    pub async fn start(url: &str, project: &str, lease_seconds: f64, backend: Backend) -> Self {
        let mut service = Self {
            url: url.to_owned(),
            project: project.to_owned(),
            lease_seconds,
            backend,
            running: None,
        };
        service.resume().await;
        service
    }

    /// Stops the service gracefully and waits until it stopped.
    pub async fn stop(&mut self) {
        match self.running.take() {
            Some(Running::Rust { stop, task }) => {
                stop.cancel();
                let stopped = tokio::time::timeout(DEADLINE, task).await;
                assert!(
                    matches!(stopped, Ok(Ok(Ok(())))),
                    "discovery service did not stop cleanly: {stopped:?}"
                );
            }
            Some(Running::Python(mut child)) => {
                if let Some(pid) = child.id() {
                    let _ = std::process::Command::new("kill")
                        .arg("-TERM")
                        .arg(pid.to_string())
                        .status();
                }
                if tokio::time::timeout(DEADLINE, child.wait()).await.is_err() {
                    let _ = child.kill().await;
                }
            }
            None => {}
        }
    }

    /// Starts the service again after [`Service::stop`].
    pub async fn resume(&mut self) {
        assert!(self.running.is_none(), "service already running");
        self.running = Some(match self.backend {
            Backend::Rust => self.start_rust().await,
            Backend::Python => Running::Python(self.start_python().await),
        });
    }

    async fn start_rust(&self) -> Running {
        let lease = self.lease_seconds.to_string();
        let config = Config::try_parse_from([
            "abi-discovery",
            "--nats-url",
            &self.url,
            "--project",
            &self.project,
            "--jwt-secret",
            SECRET,
            "--lease-seconds",
            &lease,
        ])
        .expect("service flags");
        let valid = config.validate().expect("valid service config");
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                abi_discovery::run::run(valid, stop)
                    .await
                    .map_err(|e| format!("{e:#}"))
            }
        });
        // Serving once a lookup gets an answer (any answer) from it.
        let nats = async_nats::connect(&self.url)
            .await
            .expect("probe connects");
        let subject = abi_wire::discovery::operation_named(&self.project, "list_modules");
        let served = abi_test_support::wait_until(DEADLINE, || async {
            nats.request(subject.clone(), Vec::new().into())
                .await
                .is_ok()
        })
        .await;
        assert!(served.is_ok(), "discovery service did not start serving");
        Running::Rust { stop, task }
    }

    async fn start_python(&self) -> Child {
        let mut command = Command::new(python());
        command
            .arg("-c")
            .arg(REFERENCE_SERVICE)
            .env("NATS_URL", &self.url)
            .env("ABI_PROJECT", &self.project)
            .env("ABI_JWT_SECRET", SECRET)
            .env("ABI_LEASE_SECONDS", self.lease_seconds.to_string())
            .stderr(Stdio::null());
        match abi_test_support::spawn_until_ready(command, "READY", DEADLINE).await {
            Ok(child) => child,
            Err(e) => panic!("reference discovery service did not start: {e}"),
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(Running::Rust { stop, .. }) = &self.running {
            stop.cancel();
        }
    }
}
