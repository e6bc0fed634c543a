//! Starting a target's process: this binary re-run with `apps --serve
//! <kind> <url>`, the reference's module (`python/app_bench_peer.py
//! serve`), or a document service, each adopted once it answers a probe
//! of the caller's (so no readiness line is needed), with its pid kept for
//! its peak memory.

use std::path::Path;
use std::process::Stdio;

use anyhow::Context as _;
use tokio::process::Command;

use super::serve::REFERENCE_MODULE;
use super::{APP, PROJECT, module_key};
use crate::service::{self, Service};

/// A running target process.
#[derive(Debug)]
pub struct Target {
    /// The process, stopped with SIGTERM at the end.
    pub svc: Service,
    /// Its pid, for `/proc/<pid>/status` and `clear_refs`.
    pub pid: u32,
}

/// This binary serving `kind` (`raw` or `ours`) on `url`.
///
/// # Errors
///
/// When this executable's path cannot be read.
pub fn rust(kind: &str, url: &str) -> anyhow::Result<Command> {
    let exe = std::env::current_exe().context("this executable")?;
    let mut command = Command::new(exe);
    command
        .args(["apps", "--serve", kind, url])
        .env("ABI_LOG", "warn");
    Ok(command)
}

/// The reference's module serving the bench app on `url`.
///
/// # Errors
///
/// When the module key cannot be derived.
pub fn reference(python: &Path, script: &Path, url: &str) -> anyhow::Result<Command> {
    let mut command = Command::new(python);
    command
        .arg(script)
        .args(["serve", url, &module_key(REFERENCE_MODULE)?])
        .args([PROJECT, REFERENCE_MODULE, APP])
        .env("PYTHONUNBUFFERED", "1");
    Ok(command)
}

/// Starts `command` (named `what` in messages) and adopts it once
/// `answers` says it serves, polling within the start timeout.
///
/// # Errors
///
/// When it does not start, exits, or does not answer in time.
///
/// # Cancel safety
///
/// Cancel safe: the child is spawned with `kill_on_drop`, so dropping the
/// future before it answers kills it.
pub async fn spawn<F, Fut>(mut command: Command, what: &str, answers: F) -> anyhow::Result<Target>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eprintln!("{what}: starting {:?}", command.as_std().get_program());
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {what}"))?;
    let pid = child
        .id()
        .with_context(|| format!("{what} exited at once"))?;
    service::wait_answering(&mut child, what, answers).await?;
    Ok(Target {
        svc: Service::ready(child, pid)?,
        pid,
    })
}

/// Resets the peak resident set size (`VmHWM`) of `pid` to its current
/// size (`/proc/<pid>/clear_refs`, Linux 4.0 and later), so the next
/// reading is the peak of what follows.
///
/// # Errors
///
/// When the file cannot be written (another user's process, an old kernel).
pub fn reset_peak(pid: u32) -> anyhow::Result<()> {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
        .with_context(|| format!("reset the peak RSS of {pid}"))
}
