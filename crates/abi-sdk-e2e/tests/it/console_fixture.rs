//! What the console tests share: the console in this process, served on a
//! loopback port, signing as `api` with the project secret as `abictl
//! console` does; plain HTTP/1.0 requests to it (the answer ends with the
//! connection, so an event stream is read as it comes, unchunked); and the
//! module processes the pages show.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use abi_console::{Console, ConsoleOptions};
use abi_sdk::{DiscoveryClient, TokenSource};
use abi_sdk_e2e::{SECRET, World};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// Generous for one step on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A console serving one world's project.
pub struct ConsoleUnderTest {
    pub addr: SocketAddr,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl ConsoleUnderTest {
    /// Starts a console of `world`'s project, actions allowed or not.
    pub async fn start(world: &World, allow_actions: bool) -> Self {
        let nats = async_nats::connect(world.nats.url()).await.unwrap();
        let client = DiscoveryClient::new(
            nats,
            world.project.clone(),
            TokenSource::project_secret("api", SECRET),
        );
        let stop = CancellationToken::new();
        let options = ConsoleOptions {
            allow_actions,
            identity: "api".into(),
        };
        let console = Console::start(client, options, stop.clone()).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(console.serve(listener));
        Self { addr, stop, task }
    }

    /// The URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `GET path`: (status, JSON body, or the text as a JSON string).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        request(self.addr, "GET", path, "").await
    }

    /// `POST path` with `body`.
    pub async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        request(self.addr, "POST", path, body).await
    }

    /// Stops it, and checks it stopped within the deadline with pages open.
    pub async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the console stops at once, event streams open or not")
            .unwrap()
            .unwrap();
    }
}

/// One HTTP/1.0 request: (status, body as JSON, or as a JSON string).
pub async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    let answer = abi_test_support::http::exchange(
        &addr.to_string(),
        method,
        path,
        body.as_bytes(),
        DEADLINE,
    )
    .await
    .expect("the console answers");
    let body = serde_json::from_str(&answer.body).unwrap_or(Value::String(answer.body));
    (answer.status, body)
}

/// The console's event stream, read as it comes.
pub struct EventStream {
    lines: tokio::io::Lines<BufReader<TcpStream>>,
}

impl EventStream {
    /// Opens `/api/events`.
    pub async fn open(addr: SocketAddr) -> Self {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = format!("GET /api/events HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut lines = BufReader::new(stream).lines();
        // The response head, up to its blank line.
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.is_empty() {
                break;
            }
        }
        Self { lines }
    }

    /// The next event of any kind: (kind, data).
    pub async fn next(&mut self) -> (String, Value) {
        let (mut kind, mut data) = (String::new(), String::new());
        loop {
            let line = tokio::time::timeout(DEADLINE, self.lines.next_line())
                .await
                .expect("an event within the deadline")
                .unwrap()
                .expect("the stream stays open");
            if let Some(k) = line
                .strip_prefix("event: ")
                .or_else(|| line.strip_prefix("event:"))
            {
                kind = k.trim().to_owned();
            } else if let Some(d) = line
                .strip_prefix("data: ")
                .or_else(|| line.strip_prefix("data:"))
            {
                data.push_str(d);
            } else if line.is_empty() && !kind.is_empty() {
                return (kind, serde_json::from_str(&data).unwrap_or(Value::Null));
            }
        }
    }

    /// Events until one of `kind` whose data satisfies `want`: that data.
    pub async fn until(&mut self, kind: &str, want: impl Fn(&Value) -> bool) -> Value {
        loop {
            let (k, data) = self.next().await;
            if k == kind && want(&data) {
                return data;
            }
        }
    }
}

/// The instances of `module` in a modules view: (instance id, status, generation).
pub fn instances(view: &Value, module: &str) -> Vec<(String, String, String)> {
    view["modules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["module_id"] == module)
        .flat_map(|m| m["instances"].as_array().cloned().unwrap_or_default())
        .map(|i| {
            let text = |k: &str| i[k].as_str().unwrap_or("").to_owned();
            (text("instance_id"), text("status"), text("generation"))
        })
        .collect()
}

/// A `job-module` process as module `id` (`block`: a `{"block": true}`
/// run waits until cancelled, and the workflow's second step never ends).
pub fn job_module(world: &World, id: &str, block: bool, env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_job-module"))
        .env_remove("ABI_ROLLOUT_ID")
        .env_remove("ABI_ROLLOUT_MODULES")
        .envs(world.module_env(id))
        .env("E2E_JOB_BLOCK", if block { "1" } else { "0" })
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// SIGTERM to `child`, and its exit.
pub async fn stop_process(child: &mut Child) {
    let pid = child.id().expect("still running");
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("the module stops")
        .unwrap();
}
