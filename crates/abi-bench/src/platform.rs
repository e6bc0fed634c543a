//! What the jobs and agents benchmarks' targets share: a nats-server
//! (temporary store), our `abi-discovery` on the bench's project (it creates
//! the jobs stream and the claim-check store before it serves, as the
//! platform does) and our `abi-documents` on a fresh SQLite file (every
//! target's records), plus the CPU each process spends while measured.

use std::process::Stdio;
use std::time::Duration;

use abi_sdk::{JobClient, TokenSource};
use abi_test_support::NatsServer;
use anyhow::Context as _;
use tokio::process::Command;

use crate::measure;
use crate::service::{self, Service};

/// Settings of our services the bench leaves at their defaults, removed
/// from the environment they inherit so a developer's shell cannot change
/// what is measured.
const INHERITED_SETTINGS: [&str; 8] = [
    "ABI_DOCUMENTS_DATA_DIR",
    "ABI_DOCUMENTS_PG_SCHEMA",
    "ABI_DOCUMENTS_STRICT_NAMESPACES",
    "ABI_MAX_CONCURRENT_REQUESTS",
    "ABI_METRICS_ADDR",
    "ABI_JWT_SECRET_FILE",
    "ABI_ADMIN_IDENTITIES",
    "ABI_KV_REPLICAS",
];
/// Deadline of one readiness probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Where the platform's binaries and the reference's Python are: the flags
/// `abi-bench jobs` and `abi-bench agents` share.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Binaries {
    /// The `abi-discovery` binary (default: next to this executable).
    #[arg(long = "discovery-bin", env = "ABI_DISCOVERY_BIN")]
    pub discovery: Option<std::path::PathBuf>,
    /// The `abi-documents` binary (default: next to this executable).
    #[arg(long = "documents-bin", env = "ABI_DOCUMENTS_BIN")]
    pub documents: Option<std::path::PathBuf>,
    /// Python with naas_abi_sdk installed (default: <workspace>/.venv/bin/python).
    #[arg(long, env = "ABI_PYTHON")]
    pub python: Option<std::path::PathBuf>,
}

impl Binaries {
    /// The Python that runs the reference.
    pub fn python(&self) -> std::path::PathBuf {
        self.python
            .clone()
            .unwrap_or_else(|| service::workspace_root().join(".venv/bin/python"))
    }
}

/// The running shared services.
pub struct Platform {
    nats: NatsServer,
    discovery: Service,
    documents: Service,
    documents_pid: u32,
    discovery_pid: u32,
    nats_pid: Option<u32>,
    ticks: f64,
    _scratch: tempfile::TempDir,
}

/// CPU seconds the shared services have used so far.
#[derive(Debug, Clone, Copy)]
pub struct SharedCpu {
    /// `abi-documents`.
    pub documents: Option<f64>,
    /// `abi-discovery`.
    pub discovery: Option<f64>,
    /// nats-server.
    pub nats: Option<f64>,
}

impl Platform {
    /// Starts nats-server, then `abi-discovery` (waiting for the jobs
    /// stream), then `abi-documents` (waiting for an answer).
    ///
    /// # Errors
    ///
    /// When a binary is missing or a service does not come up in a minute.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: what it started goes with the future: the nats-server by its `Drop`, the
    /// services by `kill_on_drop`, and the scratch directory is removed.
    pub async fn start(bins: Binaries, project: &str, secret: &str) -> anyhow::Result<Self> {
        let discovery_bin = service::discovery_binary(bins.discovery)?;
        let documents_bin =
            service::sibling_binary("abi-documents", bins.documents, "--documents-bin")?;
        let scratch = tempfile::Builder::new()
            .prefix("abi-bench-")
            .tempdir()
            .context("create a temporary directory")?;
        eprintln!("starting nats-server (temporary store)");
        let nats = NatsServer::start().await;
        let url = nats.url();
        let client = async_nats::connect(&url).await.context("connect to nats")?;

        eprintln!(
            "starting {} (creates the jobs stream)",
            discovery_bin.display()
        );
        let mut child = command(&discovery_bin, &url, secret)
            .env("ABI_PROJECT", project)
            .spawn()
            .with_context(|| format!("start {}", discovery_bin.display()))?;
        let pid = child.id().context("abi-discovery exited at once")?;
        let js = async_nats::jetstream::new(client.clone());
        let stream = abi_wire::jobs::stream(project);
        service::wait_answering(&mut child, "abi-discovery", || async {
            js.get_stream(&stream).await.is_ok()
        })
        .await?;
        let discovery = Service::ready(child, pid)?;
        let discovery_pid = pid;

        let path = scratch.path().join("runs.sqlite");
        eprintln!("starting {} on {}", documents_bin.display(), path.display());
        let mut child = command(&documents_bin, &url, secret)
            .env("ABI_DOCUMENTS_URL", &path)
            .spawn()
            .with_context(|| format!("start {}", documents_bin.display()))?;
        let pid = child.id().context("abi-documents exited at once")?;
        // A run id of no trigger reads as "no such run" once the service
        // answered that there is no record.
        let probe = JobClient::new(
            client.clone(),
            TokenSource::issued(abi_test_support::requests::service_token(secret, "api")),
            project,
            "bench.probe",
            "probe",
        )
        .run("probe:1");
        service::wait_answering(&mut child, "abi-documents", || async {
            match tokio::time::timeout(PROBE_TIMEOUT, probe.status()).await {
                Ok(Ok(_)) => true,
                Ok(Err(e)) => e.kind() == abi_sdk::CallErrorKind::RunNotFound,
                Err(_) => false,
            }
        })
        .await?;
        let documents = Service::ready(child, pid)?;
        let nats_pid = nats_server_pid(nats.port());
        Ok(Self {
            nats,
            discovery,
            documents,
            documents_pid: pid,
            discovery_pid,
            nats_pid,
            ticks: measure::ticks_per_second(),
            _scratch: scratch,
        })
    }

    /// CPU used so far by the document service and the nats-server.
    pub fn cpu(&self) -> SharedCpu {
        let read = |pid: u32| measure::cpu_seconds(pid, self.ticks).ok();
        SharedCpu {
            documents: read(self.documents_pid),
            discovery: read(self.discovery_pid),
            nats: self.nats_pid.and_then(read),
        }
    }

    /// The nats-server's URL.
    pub fn url(&self) -> String {
        self.nats.url()
    }

    /// Stops the services, then the nats-server.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it drops the services and the nats-server, which kills them (SIGKILL)
    /// rather than stopping them with SIGTERM.
    pub async fn stop(self) {
        self.documents.stop().await;
        self.discovery.stop().await;
        drop(self.nats);
    }
}

/// CPU seconds used so far by each process of a measurement: the target
/// host, the shared services and this process (the bench's callers).
pub struct CpuSplit {
    host: Option<f64>,
    shared: SharedCpu,
    caller: Option<f64>,
}

impl CpuSplit {
    /// The counters now, `svc` being the target host.
    pub fn now(platform: &Platform, svc: &Service) -> Self {
        let ticks = measure::ticks_per_second();
        Self {
            host: svc.usage().ok().map(|u| u.cpu_secs),
            shared: platform.cpu(),
            caller: measure::cpu_seconds(std::process::id(), ticks).ok(),
        }
    }

    /// Microseconds of CPU `abi-discovery` spent per run since `before`.
    pub fn discovery_per_run_since(&self, before: &Self, runs: u64) -> Option<f64> {
        Some((self.shared.discovery? - before.shared.discovery?) * 1e6 / runs.max(1) as f64)
    }

    /// Microseconds of CPU per run since `before`: host, abi-documents,
    /// nats-server, the bench's caller.
    pub fn per_run_since(&self, before: &Self, runs: u64) -> Option<[f64; 4]> {
        let runs = runs.max(1) as f64;
        Some(self.spent_since(before)?.map(|secs| secs * 1e6 / runs))
    }

    /// Seconds of CPU spent since `before`: host, abi-documents,
    /// nats-server, the bench's caller (add intervals, then divide).
    pub fn spent_since(&self, before: &Self) -> Option<[f64; 4]> {
        let spent = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
        Some([
            spent(before.host, self.host)?,
            spent(before.shared.documents, self.shared.documents)?,
            spent(before.shared.nats, self.shared.nats)?,
            spent(before.caller, self.caller)?,
        ])
    }
}

/// The 1-minute load average from `/proc/loadavg`, or "?".
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// The nats-server process listening on `port` (started by the test
/// support with `-p <port>`), found in `/proc`.
fn nats_server_pid(port: u16) -> Option<u32> {
    let port = port.to_string();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let is_nats = args
                .first()
                .is_some_and(|exe| exe.ends_with(b"nats-server"));
            let on_port = args
                .windows(2)
                .any(|w| w[0] == b"-p" && w[1] == port.as_bytes());
            (is_nats && on_port).then_some(pid)
        })
}

/// One of our service binaries on `url`, signing with `secret`, quiet.
fn command(bin: &std::path::Path, url: &str, secret: &str) -> Command {
    let mut cmd = Command::new(bin);
    for name in INHERITED_SETTINGS {
        cmd.env_remove(name);
    }
    cmd.env("NATS_URL", url)
        .env("ABI_JWT_SECRET", secret)
        .env("ABI_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    cmd
}
