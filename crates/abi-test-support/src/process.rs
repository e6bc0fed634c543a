//! One `nats-server` process: spawn with a fixed set of ports, wait until it
//! is healthy, kill.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server gets to become healthy; generous for a loaded 2-core
/// machine.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one health probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between health probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(25);

/// A `nats-server` process and everything needed to start it again the same
/// way (same ports, same store directory).
#[derive(Debug)]
pub(crate) struct Process {
    bin: PathBuf,
    /// Arguments after the common ones (cluster settings).
    extra_args: Vec<OsString>,
    pub(crate) port: u16,
    pub(crate) http_port: u16,
    /// Holds the store directory and the log file; removed on drop.
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Process {
    /// A process description with fresh directories; not started yet.
    pub(crate) fn new(bin: PathBuf, port: u16, http_port: u16, extra_args: Vec<OsString>) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("abi-nats-")
            .tempdir()
            .expect("create a temporary directory for nats-server");
        Self {
            bin,
            extra_args,
            port,
            http_port,
            dir,
            child: None,
        }
    }

    /// The JetStream store directory (`-sd`).
    pub(crate) fn store_dir(&self) -> PathBuf {
        self.dir.path().join("jetstream")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("nats-server.log")
    }

    /// Whether the process is running (started and not killed).
    pub(crate) fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Spawns the process (it must not be running).
    pub(crate) fn spawn(&mut self) {
        assert!(self.child.is_none(), "nats-server is already running");
        let mut command = Command::new(&self.bin);
        command
            .arg("-js")
            .args(["-a", "127.0.0.1"])
            .args(["-p", &self.port.to_string()])
            .args(["-m", &self.http_port.to_string()])
            .arg("-sd")
            .arg(self.store_dir())
            .arg("-l")
            .arg(self.log_path())
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));
        self.child = Some(child);
    }

    /// Waits until `/healthz` answers 200 (JetStream enabled and, in a
    /// cluster, current with the meta leader).
    ///
    /// # Errors
    ///
    /// A description (with the log's tail) when the process exited or did not
    /// become healthy within [`START_TIMEOUT`].
    pub(crate) async fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "nats-server exited ({status}) on port {}:\n{}",
                    self.port,
                    self.log_tail()
                ));
            }
            if healthz(self.http_port).await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "nats-server on port {} not healthy within {START_TIMEOUT:?}:\n{}",
                    self.port,
                    self.log_tail()
                ));
            }
            // A real pause between probes of a real process (std, not tokio,
            // time: paused test clocks must not turn this into a spin).
            tokio::task::spawn_blocking(|| std::thread::sleep(PROBE_INTERVAL))
                .await
                .ok();
        }
    }

    /// Kills the process (SIGKILL, like a crash) and reaps it. No-op when not
    /// running.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Already exited is fine: either way it is gone after wait().
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The last lines of the server log, for failure messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reserves `n` distinct free loopback ports. The listeners are held until
/// all are chosen, so the ports differ; another process may still take one
/// before the server binds it, which callers handle by retrying.
pub(crate) fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port"))
        .collect();
    listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .expect("local address of a bound socket")
                .port()
        })
        .collect()
}

/// One `GET /healthz` on the monitoring port: true on HTTP 200.
///
/// Blocking std I/O on the blocking pool, so a paused tokio clock neither
/// times the probe out early nor advances while it runs.
async fn healthz(http_port: u16) -> bool {
    tokio::task::spawn_blocking(move || healthz_blocking(http_port))
        .await
        .unwrap_or(false)
}

fn healthz_blocking(http_port: u16) -> bool {
    use std::io::{Read, Write};
    let probe = || -> std::io::Result<Vec<u8>> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], http_port));
        let mut stream = std::net::TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
        stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
        stream.set_write_timeout(Some(PROBE_TIMEOUT))?;
        stream.write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        Ok(response)
    };
    match probe() {
        Ok(response) => {
            let head = String::from_utf8_lossy(&response[..response.len().min(16)]).into_owned();
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200")
        }
        Err(_) => false,
    }
}
