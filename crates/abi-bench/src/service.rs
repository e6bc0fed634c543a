//! The services under test as child processes: our `abi-discovery` binary
//! and the Python reference (`tests/interop/reference_owner.py serve`) here;
//! the document servers (`crate::documents::servers`) reuse [`Service`],
//! [`wait_ready_line`] and [`sibling_binary`].

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use abi_proto::discovery::v1::GetModuleResponse;
use anyhow::{Context as _, bail};
use async_nats::Client;
use prost::Message as _;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use crate::measure;
use crate::wire::Member;

/// Lease granted to the bench's instances: longer than a whole run, so no
/// instance expires between the phases that renew it.
const LEASE_SECONDS: &str = "3600";
/// How long a service may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a service may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Interval between readiness probes of our service.
const PROBE_INTERVAL: Duration = Duration::from_millis(50);
/// How long a served target waits, on SIGTERM, for its last messages to
/// reach the server: well within [`STOP_TIMEOUT`], so a target whose
/// nats-server is gone still exits on its own.
const EXIT_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// A running service process.
#[derive(Debug)]
pub struct Service {
    child: Child,
    pid: u32,
    cpu_at_ready: f64,
    ticks: f64,
}

/// CPU used since the service was ready, and its peak memory.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// CPU seconds (user + system) since it started serving.
    pub cpu_secs: f64,
    /// Peak resident set size, MiB.
    pub peak_rss_mib: f64,
}

/// Starts the `abi-discovery` binary at `bin` on `project` and waits until it
/// answers `get_module`.
///
/// # Errors
///
/// When it does not start or does not answer within a minute.
///
/// # Cancel safety
///
/// Cancel safe: the child is spawned with `kill_on_drop`, so dropping the future before it answers
/// kills it.
pub async fn start_ours(
    bin: &Path,
    nats_url: &str,
    secret: &str,
    project: &str,
    client: &Client,
    probe: &Member,
) -> anyhow::Result<Service> {
    let mut cmd = Command::new(bin);
    cmd.env("NATS_URL", nats_url)
        .env("ABI_PROJECT", project)
        .env("ABI_JWT_SECRET", secret)
        .env("ABI_LEASE_SECONDS", LEASE_SECONDS)
        .env("ABI_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    let pid = child.id().context("abi-discovery exited at once")?;
    let subject = abi_wire::discovery::operation_named(project, "get_module");
    wait_answering(&mut child, "abi-discovery", || async {
        // Any reply that decodes means it serves (the module may not exist yet).
        let answer = tokio::time::timeout(
            Duration::from_secs(2),
            client.request_with_headers(
                subject.clone(),
                probe.headers.clone(),
                probe.get_module.clone(),
            ),
        )
        .await;
        match answer {
            Ok(Ok(reply)) => GetModuleResponse::decode(reply.payload).is_ok(),
            _ => false,
        }
    })
    .await?;
    Service::ready(child, pid)
}

/// Polls `answers` until it says the service `name` serves, bounded by the
/// start timeout; fails at once if the process exits first.
///
/// # Errors
///
/// When the process exits, or nothing answers within the start timeout.
///
/// # Cancel safety
///
/// Cancel safe: it only polls `answers` and sleeps; `child` is borrowed, so dropping the future
/// leaves it to its owner.
pub async fn wait_answering<F, Fut>(
    child: &mut tokio::process::Child,
    name: &str,
    mut answers: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !answers().await {
        if let Some(status) = child.try_wait()? {
            bail!("{name} exited with {status} before serving");
        }
        if start.elapsed() > START_TIMEOUT {
            bail!("{name} did not answer within {START_TIMEOUT:?}");
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    Ok(())
}

/// Starts the Python reference with `python script serve ...` and waits for
/// its `ready` line.
///
/// # Errors
///
/// When it does not start or does not print `ready` within a minute.
///
/// # Cancel safety
///
/// Cancel safe: the child is spawned with `kill_on_drop`, so dropping the future before `ready`
/// kills it.
pub async fn start_reference(
    python: &Path,
    script: &Path,
    nats_url: &str,
    secret: &str,
    project: &str,
) -> anyhow::Result<Service> {
    let child = Command::new(python)
        .arg(script)
        .args(["serve", nats_url, secret, project, LEASE_SECONDS])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {} {}", python.display(), script.display()))?;
    wait_ready_line(child, "reference").await
}

/// Waits (up to a minute) for `child` to print a line reading `ready` on its
/// piped stdout, then adopts it as a [`Service`]. `what` names it in errors.
///
/// # Errors
///
/// When it exits, or does not print `ready` in time.
///
/// # Cancel safety
///
/// Cancel safe: `child` is moved in, so dropping the future drops it, which kills it when it was
/// spawned with `kill_on_drop` (as every child of this crate is).
pub async fn wait_ready_line(mut child: Child, what: &str) -> anyhow::Result<Service> {
    let pid = child
        .id()
        .with_context(|| format!("{what} exited at once"))?;
    let stdout = child
        .stdout
        .take()
        .with_context(|| format!("{what} stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await? {
            if line.trim() == "ready" {
                return Ok(true);
            }
        }
        Ok::<_, std::io::Error>(false)
    })
    .await;
    match ready {
        Ok(Ok(true)) => Service::ready(child, pid),
        Ok(Ok(false)) => bail!("{what} exited before printing ready"),
        Ok(Err(e)) => Err(e).with_context(|| format!("read {what} stdout")),
        Err(_) => bail!("{what} not ready within {START_TIMEOUT:?}"),
    }
}

impl Service {
    /// Adopts a child that serves now: its CPU from here on is the
    /// service's.
    ///
    /// # Errors
    ///
    /// When its `/proc` entry cannot be read (it exited).
    pub fn ready(child: Child, pid: u32) -> anyhow::Result<Self> {
        let ticks = measure::ticks_per_second();
        let cpu_at_ready = measure::cpu_seconds(pid, ticks)?;
        Ok(Self {
            child,
            pid,
            cpu_at_ready,
            ticks,
        })
    }

    /// CPU seconds (user + system) the process has used so far.
    ///
    /// # Errors
    ///
    /// When its `/proc` entry cannot be read.
    pub fn cpu_now(&self) -> anyhow::Result<f64> {
        measure::cpu_seconds(self.pid, self.ticks)
    }

    /// CPU since ready and peak RSS so far.
    ///
    /// # Errors
    ///
    /// When `/proc` cannot be read (the process exited).
    pub fn usage(&self) -> anyhow::Result<Usage> {
        Ok(Usage {
            cpu_secs: measure::cpu_seconds(self.pid, self.ticks)? - self.cpu_at_ready,
            peak_rss_mib: measure::peak_rss_mib(self.pid)?,
        })
    }

    /// Asks the process to stop (SIGTERM), and kills it if it has not exited
    /// within 10 s.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the service is moved in; dropped before it exits, its child is dropped and so
    /// killed (SIGKILL, as spawned with `kill_on_drop`).
    pub async fn stop(mut self) {
        let term = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .await;
        let exited = term.is_ok()
            && tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
                .await
                .is_ok();
        if !exited {
            let _ = self.child.kill().await;
        }
    }
}

/// The `abi-discovery` binary: `explicit`, else next to this executable (or
/// one directory up, for test binaries in `deps/`).
///
/// # Errors
///
/// When none exists, saying how to build it.
pub fn discovery_binary(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    sibling_binary("abi-discovery", explicit, "--discovery-bin")
}

/// The binary `name` of this workspace: `explicit`, else next to this
/// executable (or one directory up, for test binaries in `deps/`). `flag` is
/// the option that overrides it, for the error message.
///
/// # Errors
///
/// When none exists, saying how to build it.
pub fn sibling_binary(
    name: &str,
    explicit: Option<PathBuf>,
    flag: &str,
) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        if path.is_file() {
            return Ok(path);
        }
        bail!("{flag} {} is not a file", path.display());
    }
    let exe = std::env::current_exe()?;
    let found = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file());
    found.with_context(|| {
        format!(
            "{name} not found next to {}: build it first with \
             `cargo build --release -p {name}` (same profile and target dir), \
             or pass {flag}",
            exe.display()
        )
    })
}

/// The workspace root: this crate lives in `<root>/crates/abi-bench`.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Flushes `nats` before a served target exits, giving up after
/// [`EXIT_FLUSH_TIMEOUT`]: with its server gone a flush waits for a
/// reconnect that never comes, and the target must still stop.
///
/// # Cancel safety
///
/// Cancel safe: dropping it only stops waiting for the flush.
pub async fn flush_before_exit(nats: &Client) {
    match tokio::time::timeout(EXIT_FLUSH_TIMEOUT, nats.flush()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("flush before exit failed: {e}"),
        Err(_) => eprintln!("flush before exit gave up after {EXIT_FLUSH_TIMEOUT:?}"),
    }
}
