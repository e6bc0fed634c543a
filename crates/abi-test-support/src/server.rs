//! A single JetStream server.

use std::path::PathBuf;

use crate::binary::nats_server_binary;
use crate::process::{Process, free_ports};

/// How many times a start picks new ports when another process took one
/// first.
const START_ATTEMPTS: usize = 3;

/// A `nats-server -js` on a free loopback port with its own temporary store
/// directory. Killed (and its directory removed) on `Drop`.
///
/// ```no_run
/// # async fn demo() {
/// let mut server = abi_test_support::NatsServer::start().await;
/// let url = server.url(); // "nats://127.0.0.1:<port>"
/// server.restart().await; // same port, same store: acknowledged data survives
/// # let _ = url;
/// # }
/// ```
#[derive(Debug)]
pub struct NatsServer {
    process: Process,
}

impl NatsServer {
    /// Starts a server and waits (up to 30 s) until it is healthy with
    /// JetStream enabled.
    ///
    /// # Panics
    ///
    /// When `nats-server` cannot be found (run `./scripts/setup.sh`) or does
    /// not start.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future kills the process being started.
    pub async fn start() -> Self {
        let bin = nats_server_binary();
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let ports = free_ports(2);
            let mut process = Process::new(bin.clone(), ports[0], ports[1], Vec::new());
            process.spawn();
            match process.wait_healthy().await {
                Ok(()) => return Self { process },
                Err(e) => failures.push(e),
            }
        }
        panic!("nats-server did not start:\n{}", failures.join("\n---\n"));
    }

    /// The client URL, `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.process.port)
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.process.port
    }

    /// The JetStream store directory (kept across [`restart`](Self::restart)).
    pub fn store_dir(&self) -> PathBuf {
        self.process.store_dir()
    }

    /// Whether the server process is running.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Kills the server abruptly (SIGKILL, like a crash). Its store stays.
    pub fn stop(&mut self) {
        self.process.kill();
    }

    /// Kills the server if running, then starts it again on the same port
    /// with the same store directory and waits until it is healthy.
    ///
    /// # Panics
    ///
    /// When it does not come back within 30 s (for example because another
    /// process took the port meanwhile).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the server starting; it is still killed on
    /// `Drop`.
    pub async fn restart(&mut self) {
        self.process.kill();
        self.process.spawn();
        if let Err(e) = self.process.wait_healthy().await {
            panic!("nats-server did not restart: {e}");
        }
    }
}
