//! The real `abi-discovery` binary as a child process.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use super::{CALL_TIMEOUT, Rpc, SECRET};

/// The binary under test.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_abi-discovery"))
}

/// A command for the binary with a clean environment (no inherited ABI_/NATS_
/// settings) and quiet logs.
pub fn command() -> Command {
    let mut cmd = Command::new(binary());
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("ABI_") || key.starts_with("NATS_") || key == "RUST_LOG" {
            cmd.env_remove(key);
        }
    }
    cmd.env("ABI_LOG", "warn");
    cmd
}

/// A running owner process, killed on drop. Its stderr goes to a file kept for
/// failure messages.
pub struct OwnerProcess {
    child: Child,
    stderr: tempfile::NamedTempFile,
}

impl OwnerProcess {
    /// Starts the binary on `url`/`project` with extra env, and waits until it answers.
    pub async fn start(url: &str, project: &str, env: &[(&str, &str)]) -> Self {
        let probe = Rpc::connect(url, project).await;
        Self::start_probed(url, &probe, project, env).await
    }

    /// As [`OwnerProcess::start`], probing readiness with `probe` (e.g. a client
    /// holding credentials the binary gets another way).
    pub async fn start_probed(url: &str, probe: &Rpc, project: &str, env: &[(&str, &str)]) -> Self {
        let stderr = tempfile::NamedTempFile::new().unwrap();
        let mut cmd = command();
        cmd.env("NATS_URL", url)
            .env("ABI_PROJECT", project)
            .env("ABI_JWT_SECRET", SECRET)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr.reopen().unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start abi-discovery");
        let owner = Self { child, stderr };
        super::wait_ready(probe).await;
        owner
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (`TERM`, `KILL`, ...) with `kill(1)`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit (30 s at most).
    pub async fn wait(&mut self) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + CALL_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "abi-discovery did not exit within {CALL_TIMEOUT:?}; stderr:\n{}",
                self.stderr_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What it wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }
}

impl Drop for OwnerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
