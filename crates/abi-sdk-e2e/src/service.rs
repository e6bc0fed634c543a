//! The discovery service under test, started and stopped like a process.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::{DEADLINE, SECRET, python};

/// The reference service (naas_abi_core), for as long as ours is not wired in.
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
    child: Option<Child>,
}

impl Service {
    /// Starts the service and waits until it serves.
    pub async fn start(url: &str, project: &str, lease_seconds: f64) -> Self {
        let mut service = Self {
            url: url.to_owned(),
            project: project.to_owned(),
            lease_seconds,
            child: None,
        };
        service.resume().await;
        service
    }

    /// Stops the service (SIGTERM, then waits).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
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
    }

    /// Starts the service again after [`Service::stop`].
    pub async fn resume(&mut self) {
        assert!(self.child.is_none(), "service already running");
        let mut child = Command::new(python())
            .arg("-c")
            .arg(REFERENCE_SERVICE)
            .env("NATS_URL", &self.url)
            .env("ABI_PROJECT", &self.project)
            .env("ABI_JWT_SECRET", SECRET)
            .env("ABI_LEASE_SECONDS", self.lease_seconds.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the discovery service");
        let stdout = child.stdout.take().expect("stdout piped");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(DEADLINE, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.trim() == "READY" {
                    return true;
                }
            }
            false
        })
        .await;
        assert!(matches!(ready, Ok(true)), "discovery service did not start");
        // Keep reading so the pipe never fills.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.child = Some(child);
    }
}
