//! The Python reference owner (tests/interop/reference_owner.py) as a child process.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use super::SECRET;

/// Importing the reference on a loaded machine can take a while.
const START_TIMEOUT: Duration = Duration::from_secs(60);

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's Python: `ABI_PYTHON`, else `<workspace>/.venv/bin/python`.
pub fn python() -> PathBuf {
    let path = std::env::var_os("ABI_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(".venv/bin/python"));
    assert!(
        path.exists(),
        "the reference's Python is missing at {}: run ./scripts/setup.sh (or set ABI_PYTHON)",
        path.display()
    );
    path
}

fn script() -> PathBuf {
    workspace().join("tests/interop/reference_owner.py")
}

/// A running reference owner, killed on drop.
pub struct ReferenceOwner {
    child: Child,
    stderr: tempfile::NamedTempFile,
}

impl ReferenceOwner {
    /// Starts `start_discovery` on `project` and waits for it to serve.
    pub async fn start(url: &str, project: &str, lease_seconds: u32) -> Self {
        let stderr = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new(python())
            .arg(script())
            .args(["serve", url, SECRET, project, &lease_seconds.to_string()])
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("start the reference owner");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(START_TIMEOUT, lines.next_line()).await;
        let text = std::fs::read_to_string(stderr.path()).unwrap_or_default();
        match ready {
            Ok(Ok(Some(line))) if line == "ready" => {}
            other => panic!("the reference owner did not start: {other:?}\n{text}"),
        }
        Self { child, stderr }
    }

    /// Stops it with SIGTERM and returns whether it exited cleanly.
    pub async fn stop(mut self) -> bool {
        let pid = self.child.id().unwrap();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(Ok(status)) => status.success(),
            _ => false,
        }
    }

    /// What it wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(self.stderr.path()).unwrap_or_default()
    }
}

/// The snapshot as the reference decodes it: `(instance_id, owner)` per record.
pub async fn reference_dump(url: &str, project: &str) -> Vec<(String, String)> {
    let out = tokio::time::timeout(
        START_TIMEOUT,
        Command::new(python())
            .arg(script())
            .args(["dump", url, project])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("dump finishes")
    .unwrap();
    assert!(
        out.status.success(),
        "dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["instance_id"].as_str().unwrap().to_owned(),
                r["owner"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}
