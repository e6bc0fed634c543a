//! The Python reference discovery service as a child process.
//!
//! [`spawn_until_ready`] is the one way a Python process is started and
//! waited for: its stdout is piped, the call returns once it printed its
//! ready line, and the rest of its output is read away so the pipe never
//! fills. [`ReferenceOwner`] runs `tests/interop/reference_owner.py serve`
//! with it, for tests; `abi-bench` and the end-to-end tests build their own
//! commands and start them the same way.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use crate::python::{python, workspace_root};

/// How long the reference may take to start serving: importing it on a
/// loaded 2-core machine can take a while.
pub const REFERENCE_START_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`ReferenceOwner::stop`] waits for the process to exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// `<workspace>/tests/interop/reference_owner.py`: the reference owner script
/// (`serve` and `dump` modes).
pub fn reference_owner_script() -> PathBuf {
    workspace_root().join("tests/interop/reference_owner.py")
}

/// The command `python script serve <url> <secret> <project> <lease_seconds>`:
/// the reference's `start_discovery` on `project`, printing `ready` once it
/// serves and stopping cleanly on SIGTERM. Stdin is closed; stderr is left
/// to the caller.
pub fn serve_command(
    python: &Path,
    script: &Path,
    url: &str,
    secret: &str,
    project: &str,
    lease_seconds: &str,
) -> Command {
    let mut command = Command::new(python);
    command
        .arg(script)
        .args(["serve", url, secret, project, lease_seconds])
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null());
    command
}

/// Why [`spawn_until_ready`] returned no process.
#[derive(Debug)]
#[non_exhaustive]
pub enum SpawnError {
    /// The process could not be started.
    Spawn(std::io::Error),
    /// Reading its stdout failed.
    Read(std::io::Error),
    /// It closed stdout (exited) before printing the ready line.
    Exited,
    /// It printed no ready line within the timeout.
    TimedOut(Duration),
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Spawn(e) => write!(f, "cannot start the process: {e}"),
            Self::Read(e) => write!(f, "cannot read its stdout: {e}"),
            Self::Exited => f.write_str("it exited before printing its ready line"),
            Self::TimedOut(after) => write!(f, "no ready line within {after:?}"),
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn(e) | Self::Read(e) => Some(e),
            Self::Exited | Self::TimedOut(_) => None,
        }
    }
}

/// Starts `command` (stdout piped, killed on drop) and waits until it prints
/// a line equal to `ready_line` (surrounding blanks ignored), at most
/// `timeout`. Lines before it are skipped; everything after it is read away
/// on a task of its own.
///
/// # Errors
///
/// [`SpawnError`] when it cannot be started, exits first or stays silent.
///
/// # Cancel safety
///
/// Cancelling drops (and so kills) the child.
pub async fn spawn_until_ready(
    mut command: Command,
    ready_line: &str,
    timeout: Duration,
) -> Result<Child, SpawnError> {
    let mut child = command
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(SpawnError::Spawn)?;
    let stdout = child
        .stdout
        .take()
        .ok_or(SpawnError::Read(std::io::ErrorKind::BrokenPipe.into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(timeout, async {
        while let Some(line) = lines.next_line().await.map_err(SpawnError::Read)? {
            if line.trim() == ready_line {
                return Ok(());
            }
        }
        Err(SpawnError::Exited)
    })
    .await
    .map_err(|_| SpawnError::TimedOut(timeout))?;
    ready?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(child)
}

/// A running reference owner (`reference_owner.py serve`), killed on drop.
#[derive(Debug)]
pub struct ReferenceOwner {
    child: Child,
    stderr: tempfile::NamedTempFile,
}

impl ReferenceOwner {
    /// Starts the reference's `start_discovery` on `project` at `url`, signed
    /// with `secret`, and waits until it serves. Its stderr goes to a
    /// temporary file ([`ReferenceOwner::stderr_text`]).
    ///
    /// # Panics
    ///
    /// When it does not start serving within [`REFERENCE_START_TIMEOUT`],
    /// with what it wrote on stderr.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the child is spawned with `kill_on_drop` ([`spawn_until_ready`]), so dropping
    /// the future kills it and removes the stderr file.
    pub async fn start(url: &str, secret: &str, project: &str, lease_seconds: u32) -> Self {
        let stderr = tempfile::NamedTempFile::new().expect("a temporary file for stderr");
        let mut command = serve_command(
            &python(),
            &reference_owner_script(),
            url,
            secret,
            project,
            &lease_seconds.to_string(),
        );
        command.stderr(stderr.reopen().expect("reopen the stderr file"));
        match spawn_until_ready(command, "ready", REFERENCE_START_TIMEOUT).await {
            Ok(child) => Self { child, stderr },
            Err(e) => panic!(
                "the reference owner did not start: {e}\n{}",
                std::fs::read_to_string(stderr.path()).unwrap_or_default()
            ),
        }
    }

    /// Stops it with SIGTERM and returns whether it exited cleanly (within
    /// 30 s).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: SIGTERM is sent before the first await; dropped before the owner exits, its
    /// child is dropped too and so killed (SIGKILL).
    pub async fn stop(mut self) -> bool {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(Ok(status)) => status.success(),
            _ => false,
        }
    }

    /// What it wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }
}

/// The snapshot of `project` as the reference decodes it
/// (`reference_owner.py dump`): `(instance_id, owner)` per record.
///
/// # Panics
///
/// When the dump fails or does not finish within
/// [`REFERENCE_START_TIMEOUT`].
///
/// # Cancel safety
///
/// Not cancel safe: dropped before the dump ends, the Python process is not killed (no
/// `kill_on_drop`); it runs on until it finishes by itself.
pub async fn reference_dump(url: &str, project: &str) -> Vec<(String, String)> {
    let out = tokio::time::timeout(
        REFERENCE_START_TIMEOUT,
        Command::new(python())
            .arg(reference_owner_script())
            .args(["dump", url, project])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("dump finishes")
    .expect("run the reference dump");
    assert!(
        out.status.success(),
        "dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("dump prints JSON");
    json["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| {
            (
                r["instance_id"].as_str().expect("instance_id").to_owned(),
                r["owner"].as_str().expect("owner").to_owned(),
            )
        })
        .collect()
}
