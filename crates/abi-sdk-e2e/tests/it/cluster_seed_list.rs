//! `NATS_URL` as a cluster's seed list (issue 9), end to end on a real
//! 3-node JetStream cluster: every process that takes a NATS URL is given the
//! three node URLs, the node it is connected to (read from that node's
//! `/connz`) is killed with SIGKILL, and it carries on through another node.
//! The nodes do not advertise each other to clients (`--no_advertise`), so
//! the list is the only way a process learns of another node: given the
//! killed node's URL alone, each failover test below fails.
//!
//! - the `abi-discovery` binary (bucket with 3 replicas) answers again, and a
//!   module registers through it, after its node died;
//! - an SDK module process (`e2e-module`) keeps its lease (renewed after its
//!   node died, same lease, still READY) and drains cleanly on SIGTERM;
//! - `abictl ls` works with a list whose first entry is a dead node (and
//!   fails, exit 3, with the dead node alone); a running `abictl watch` keeps
//!   printing events after its node died;
//! - a malformed list is refused with a clear message: exit 2 from
//!   `abi-discovery` and `abictl`, `InvalidNatsUrl` from the SDK's config.
//!
//! The binaries come from this workspace's target directory; when they are
//! missing or older than the sources (a `cargo test -p abi-sdk-e2e` run), the
//! first test to need them runs `cargo build` for `abi-discovery` and
//! `abi-cli`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use abi_proto::discovery::v1::RegistryState;
use abi_sdk::{Config, ConfigErrorKind, DiscoveryClient, TokenSource};
use abi_sdk_e2e::{DEADLINE, ModuleProc, SECRET, instance_of, module_binary, now_epoch};
use abi_test_support::{NatsCluster, unique_name, wait_until};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long anything may take once a node died: the client notices and
/// reconnects, and the bucket's stream may have to elect a new leader
/// (several seconds); generous for a loaded 2-core machine.
const AFTER_KILL: Duration = Duration::from_secs(60);

/// The lease the service grants. Long enough that the renewals missed while
/// a node dies and the stream elects a new leader never let it expire (the
/// SDK renews every 5 s), so "kept its lease" is what the test shows.
const LEASE_SECONDS: f64 = 20.0;

/// Modules name their NATS connection `<module_id>@<HOSTNAME>`.
const HOSTNAME: &str = "seedlist";

/// A malformed seed list: the second entry is empty.
const MALFORMED: &str = "nats://127.0.0.1:1,,x";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_discovery_service_answers_through_another_node_after_its_node_dies() {
    let mut stack = Stack::start().await;
    let dead = stack.node_of("abi-discovery").await;
    stack.cluster.stop_node(dead);

    // Only the service can answer a lookup: an answer through a client on
    // another node means it reconnected.
    let alive = (dead + 1) % 3;
    let admin = stack.admin(alive).await;
    let answered = wait_until(AFTER_KILL, || async {
        admin.list_modules(100, "").await.is_ok()
    })
    .await;
    assert!(
        answered.is_ok(),
        "the service never answered after node {dead} died; its log:\n{}",
        stack.discovery.log()
    );
    // And a live node lists its connection again.
    stack.node_of("abi-discovery").await;

    // A write too: a module registers and turns READY through it.
    let mut module = ModuleProc::spawn(
        "after",
        &stack.module_env("after", &stack.cluster.url(alive)),
    );
    module.expect("on_initialized").await;
    wait_status(&admin, "after", "READY").await;
    module.signal("TERM");
    assert!(module.wait().await.success(), "{:#?}", module.lines);
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_keeps_its_lease_through_another_node_and_drains_on_sigterm() {
    let mut stack = Stack::start().await;
    let mut module = ModuleProc::spawn(
        "survivor",
        &stack.module_env("survivor", &stack.seed_list()),
    );
    let instance = instance_of(&module.expect("on_initialized").await);
    let dead = stack.node_of(&format!("survivor@{HOSTNAME}")).await;
    let alive = (dead + 1) % 3;
    let admin = stack.admin(alive).await;
    wait_status(&admin, "survivor", "READY").await;
    let before = record(&admin, &stack.project, &instance)
        .await
        .expect("the instance is stored");

    stack.cluster.stop_node(dead);
    let killed_at = now_epoch();

    // A lease that ends more than a lease after the kill was renewed after
    // it, necessarily through another node.
    let renewed = wait_until(AFTER_KILL, || async {
        record(&admin, &stack.project, &instance)
            .await
            .and_then(|r| r.instance)
            .is_some_and(|i| i.expires_at > killed_at + LEASE_SECONDS)
    })
    .await;
    assert!(
        renewed.is_ok(),
        "no renewal after node {dead} died; module: {:#?}; service log:\n{}",
        module.lines,
        stack.discovery.log()
    );
    let after = record(&admin, &stack.project, &instance)
        .await
        .expect("still stored");
    assert_eq!(
        after.lease_hash, before.lease_hash,
        "the module lost its lease and registered again"
    );
    let now = statuses(&admin, "survivor").await;
    assert_eq!(now, [(instance.clone(), "READY".to_owned())]);
    assert!(
        !module.saw("exit"),
        "the module stopped: {:#?}",
        module.lines
    );
    stack.node_of(&format!("survivor@{HOSTNAME}")).await; // connected again

    module.signal("TERM");
    assert!(module.wait().await.success(), "{:#?}", module.lines);
    assert!(module.saw("on_unloaded"), "{:#?}", module.lines);
    let gone = wait_until(DEADLINE, || async {
        statuses(&admin, "survivor").await.is_empty()
    })
    .await;
    assert!(gone.is_ok(), "the drained module stayed registered");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abictl_skips_a_dead_first_server_and_its_watch_carries_on_through_another_node() {
    let mut stack = Stack::start().await;
    let mut early = ModuleProc::spawn("early", &stack.module_env("early", &stack.seed_list()));
    early.expect("on_initialized").await;

    let mut watch = Watch::start(&stack.abictl_env(&stack.seed_list()));
    // The snapshot it starts from shows the registered module.
    watch
        .expect(|l| l.contains("registered") && l.contains("early@1"))
        .await;
    let dead = stack.node_of("abictl").await;
    stack.cluster.stop_node(dead);
    let alive: Vec<usize> = (0..3).filter(|&i| i != dead).collect();

    // (a) Once the service answers again, a one-shot command given the dead
    // node first gets through; with the dead node alone it cannot.
    let admin = stack.admin(alive[0]).await;
    wait_until(AFTER_KILL, || async {
        admin.list_modules(100, "").await.is_ok()
    })
    .await
    .expect("the service answers after the node died");
    let dead_first = [
        stack.cluster.url(dead),
        stack.cluster.url(alive[0]),
        stack.cluster.url(alive[1]),
    ]
    .join(",");
    let ls = abictl(&stack.abictl_env(&dead_first), &["ls"]).await;
    assert_eq!(ls.code, 0, "{ls:#?}");
    assert!(ls.stdout.contains("early"), "{ls:#?}");
    let only_dead = abictl(&stack.abictl_env(&stack.cluster.url(dead)), &["ls"]).await;
    assert_eq!(only_dead.code, 3, "the dead node answered? {only_dead:#?}");

    // (b) A registry change after the kill reaches the running watch.
    let mut late = ModuleProc::spawn(
        "late",
        &stack.module_env("late", &stack.cluster.url(alive[1])),
    );
    late.expect("on_initialized").await;
    watch
        .expect(|l| l.contains("registered") && l.contains("late@1"))
        .await;
    stack.node_of("abictl").await; // connected again
    let status = watch.stop().await;
    assert!(status.success(), "watch: {status}; {:#?}", watch.lines);

    for module in [&mut early, &mut late] {
        module.signal("TERM");
        assert!(module.wait().await.success(), "{:#?}", module.lines);
    }
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_list_is_refused_with_a_clear_message() {
    let expected = "entry 2 of the NATS server list is empty";

    let discovery = tokio::process::Command::new(binaries().join("abi-discovery"))
        .env_clear()
        .env("NATS_URL", MALFORMED)
        .env("ABI_PROJECT", "malformed")
        .env("ABI_JWT_SECRET", SECRET)
        .output();
    let discovery = tokio::time::timeout(DEADLINE, discovery)
        .await
        .expect("abi-discovery exits")
        .expect("run abi-discovery");
    let stderr = String::from_utf8_lossy(&discovery.stderr);
    assert_eq!(discovery.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("NATS_URL") && stderr.contains(expected),
        "{stderr}"
    );

    let ls = abictl(
        &[
            ("NATS_URL".into(), MALFORMED.into()),
            ("ABI_JWT_SECRET".into(), SECRET.into()),
        ],
        &["ls"],
    )
    .await;
    assert_eq!(ls.code, 2, "{ls:#?}");
    assert!(ls.stderr.contains(expected), "{ls:#?}");

    let lookup = |key: &str| (key == "NATS_URL").then(|| MALFORMED.to_owned());
    let err = Config::from_lookup("m", &lookup).expect_err("a malformed list is refused");
    assert_eq!(err.kind(), ConfigErrorKind::InvalidNatsUrl);
    assert!(err.to_string().contains(expected), "{err}");
    // And a module process stops before connecting, saying why.
    let mut module = ModuleProc::spawn(
        "malformed",
        &[
            ("E2E_ID".into(), "malformed".into()),
            ("NATS_URL".into(), MALFORMED.into()),
        ],
    );
    let exit = module.expect("exit").await;
    assert!(exit.contains("InvalidNatsUrl"), "{exit}");
    assert!(!module.wait().await.success());
}

/// A 3-node cluster whose nodes do not advertise each other to clients, and
/// the `abi-discovery` binary, given all three URLs, serving a fresh project.
struct Stack {
    /// First, so the service is killed before the cluster.
    discovery: Discovery,
    cluster: NatsCluster,
    project: String,
}

impl Stack {
    async fn start() -> Self {
        let cluster = NatsCluster::start_unadvertised(3).await;
        let project = unique_name("seed");
        let seed_list = cluster.urls().join(",");
        let discovery = Discovery::spawn(&[
            ("NATS_URL", seed_list.as_str()),
            ("ABI_PROJECT", project.as_str()),
            ("ABI_JWT_SECRET", SECRET),
            ("ABI_KV_REPLICAS", "3"),
            ("ABI_LEASE_SECONDS", &LEASE_SECONDS.to_string()),
        ]);
        let stack = Self {
            discovery,
            cluster,
            project,
        };
        let admin = stack.admin(0).await;
        let serving = wait_until(DEADLINE, || async {
            admin.list_modules(100, "").await.is_ok()
        })
        .await;
        assert!(
            serving.is_ok(),
            "abi-discovery did not start serving; its log:\n{}",
            stack.discovery.log()
        );
        stack
    }

    /// The three node URLs, comma-separated.
    fn seed_list(&self) -> String {
        self.cluster.urls().join(",")
    }

    /// An admin client connected to node `i` only.
    async fn admin(&self, i: usize) -> DiscoveryClient {
        let connection = async_nats::connect(self.cluster.url(i))
            .await
            .expect("admin connects");
        let token = abi_test_support::requests::service_token(SECRET, "engine");
        DiscoveryClient::new(connection, self.project.clone(), TokenSource::issued(token))
    }

    /// The node the client called `name` is connected to (waiting until it
    /// is connected somewhere).
    async fn node_of(&self, name: &str) -> usize {
        let found = Mutex::new(None);
        let connected = wait_until(AFTER_KILL, || async {
            let node = self.cluster.connected_node(name).await;
            *found.lock().expect("lock") = node;
            node.is_some()
        })
        .await;
        assert!(connected.is_ok(), "{name} is connected to no node");
        found.into_inner().expect("lock").expect("found")
    }

    /// What the test module `id` needs to join, on `nats_url`.
    fn module_env(&self, id: &str, nats_url: &str) -> Vec<(String, String)> {
        vec![
            ("E2E_ID".into(), id.into()),
            ("NATS_URL".into(), nats_url.into()),
            ("ABI_PROJECT".into(), self.project.clone()),
            (
                "ABI_MODULE_KEY".into(),
                abi_auth::module_key(SECRET, id).expect("module key"),
            ),
            ("HOSTNAME".into(), HOSTNAME.into()),
        ]
    }

    /// What abictl needs to reach this project on `nats_url`.
    fn abictl_env(&self, nats_url: &str) -> Vec<(String, String)> {
        vec![
            ("NATS_URL".into(), nats_url.into()),
            ("ABI_PROJECT".into(), self.project.clone()),
            ("ABI_JWT_SECRET".into(), SECRET.into()),
        ]
    }

    /// Stops the service with SIGTERM; it must exit cleanly.
    async fn stop(mut self) {
        self.discovery.signal("TERM");
        let status = self.discovery.wait().await;
        assert!(
            status.success(),
            "abi-discovery: {status}; its log:\n{}",
            self.discovery.log()
        );
    }
}

/// The `abi-discovery` binary as a child process; its stderr is kept for
/// failure messages.
struct Discovery {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl Discovery {
    fn spawn(env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(binaries().join("abi-discovery"))
            .env_clear()
            .env("ABI_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn abi-discovery");
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut lines = BufReader::new(child.stderr.take().expect("stderr piped")).lines();
        tokio::spawn({
            let log = Arc::clone(&log);
            async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    log.lock().expect("log lock").push(line);
                }
            }
        });
        Self { child, log }
    }

    fn log(&self) -> String {
        self.log.lock().expect("log lock").join("\n")
    }

    fn signal(&self, signal: &str) {
        send_signal(self.child.id().expect("running"), signal);
    }

    async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("abi-discovery exits in time")
            .expect("wait for abi-discovery")
    }
}

/// A running `abictl watch` and the lines it printed.
struct Watch {
    child: Child,
    lines_rx: mpsc::UnboundedReceiver<String>,
    lines: Vec<String>,
}

impl Watch {
    fn start(env: &[(String, String)]) -> Self {
        let mut child = abictl_command(env)
            .arg("watch")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn abictl watch");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
        let (lines_tx, lines_rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines_rx,
            lines: Vec::new(),
        }
    }

    /// Waits for a line that `matches` (one printed already counts).
    async fn expect(&mut self, matches: impl Fn(&str) -> bool) {
        if self.lines.iter().any(|l| matches(l)) {
            return;
        }
        let deadline = tokio::time::Instant::now() + AFTER_KILL;
        loop {
            match tokio::time::timeout_at(deadline, self.lines_rx.recv()).await {
                Ok(Some(line)) => {
                    let hit = matches(&line);
                    self.lines.push(line);
                    if hit {
                        return;
                    }
                }
                Ok(None) => panic!("abictl watch ended; it printed {:#?}", self.lines),
                Err(_) => panic!(
                    "abictl watch did not print the line within {AFTER_KILL:?}; it printed {:#?}",
                    self.lines
                ),
            }
        }
    }

    /// Interrupts it (Ctrl-C) and waits for its exit.
    async fn stop(&mut self) -> ExitStatus {
        send_signal(self.child.id().expect("running"), "INT");
        tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("abictl watch exits in time")
            .expect("wait for abictl watch")
    }
}

/// What a finished abictl run printed and how it exited.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `abictl args...` with exactly `env` (and `PATH`) to completion.
async fn abictl(env: &[(String, String)], args: &[&str]) -> Run {
    let output = abictl_command(env)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(AFTER_KILL, output)
        .await
        .expect("abictl finishes in time")
        .expect("run abictl");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn abictl_command(env: &[(String, String)]) -> Command {
    let mut command = Command::new(binaries().join("abictl"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (k, v)));
    command
}

fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} {pid} failed");
}

/// The directory of this workspace's binaries (`<target>/<profile>`, where
/// the test module is), with `abi-discovery` and `abictl` in it.
///
/// `cargo test --workspace --all-targets` (CI) builds them before any test
/// runs, and they are used as they are: building them again with other
/// features would cost minutes. A narrower run (`cargo test -p abi-sdk-e2e`)
/// builds only this package's binaries, so they are built here when missing
/// or older than a source file of the workspace (an old build would test old
/// code).
fn binaries() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = module_binary()
            .parent()
            .expect("binary directory")
            .to_path_buf();
        let workspace = abi_test_support::workspace_root();
        let bins = ["abi-discovery", "abictl"];
        let built = bins
            .iter()
            .map(|bin| modified(&dir.join(bin)))
            .min()
            .flatten();
        let sources = ["crates", "vendor", "proto"]
            .iter()
            .filter_map(|d| newest_source(&workspace.join(d)))
            .chain(modified(&workspace.join("Cargo.lock")))
            .max();
        if built.is_none_or(|built| sources.is_some_and(|s| s > built)) {
            let mut build = std::process::Command::new(
                std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()),
            );
            build.current_dir(&workspace).args([
                "build",
                "--quiet",
                "-p",
                "abi-discovery",
                "-p",
                "abi-cli",
                "--bins",
            ]);
            match dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") | None => {}
                Some("release") => {
                    build.arg("--release");
                }
                Some(profile) => {
                    build.args(["--profile", profile]);
                }
            }
            let status = build.status().expect("run cargo build");
            assert!(status.success(), "building abi-discovery and abictl failed");
        }
        for bin in bins {
            assert!(dir.join(bin).exists(), "{bin} missing in {}", dir.display());
        }
        dir
    })
    .clone()
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The latest change to a `.rs`, `.toml` or `.proto` file under `dir`
/// (skipping `target` directories).
fn newest_source(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            newest_source(&path)
        } else if path
            .extension()
            .is_some_and(|e| e == "rs" || e == "toml" || e == "proto")
        {
            modified(&path)
        } else {
            None
        };
        newest = newest.max(time);
    }
    newest
}

/// `(instance id, status)` of `module_id`'s live instances (none on error).
async fn statuses(admin: &DiscoveryClient, module_id: &str) -> Vec<(String, String)> {
    admin
        .get_module(module_id, 1)
        .await
        .map(|instances| {
            instances
                .into_iter()
                .map(|i| (i.instance_id, i.status))
                .collect()
        })
        .unwrap_or_default()
}

async fn wait_status(admin: &DiscoveryClient, module_id: &str, status: &str) {
    let reached = wait_until(AFTER_KILL, || async {
        statuses(admin, module_id)
            .await
            .iter()
            .any(|(_, s)| s == status)
    })
    .await;
    assert!(
        reached.is_ok(),
        "{module_id} never {status}; now {:?}",
        statuses(admin, module_id).await
    );
}

/// The stored registry record of `instance` (read from the KV key the
/// service writes), if there is one.
async fn record(
    admin: &DiscoveryClient,
    project: &str,
    instance: &str,
) -> Option<abi_sdk::pb::RegistryRecord> {
    let js = async_nats::jetstream::new(admin.nats()?.clone());
    let read = async {
        let store = js
            .get_key_value(format!("ABI_DISCOVERY_{project}"))
            .await
            .ok()?;
        store.get("registry").await.ok().flatten()
    };
    let bytes = tokio::time::timeout(DEADLINE, read).await.ok().flatten()?;
    let state = <RegistryState as abi_proto::Message>::decode(bytes.as_ref()).ok()?;
    state.records.into_iter().find(|r| {
        r.instance
            .as_ref()
            .is_some_and(|i| i.instance_id == instance)
    })
}
