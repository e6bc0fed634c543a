//! `abi-bench console`: the web console (`abictl console`, crate
//! `abi-console`) under a registry of 250 instances of 25 modules, on a
//! nats-server and an `abi-discovery` (lease 3600 s, so the instances live
//! through the run) the bench starts itself.
//!
//! Measured, one phase after another:
//!
//! 1. the console's CPU with nothing happening (its view is rebuilt every
//!    second for the leases that run out);
//! 2. the registry's steady state: every instance renewing at the SDK's
//!    pace (each once per 5 s: 50 writes/s), with one event stream open:
//!    what the console spends, and pushes to each stream, against the
//!    writes a raw KV watcher sees;
//! 3. `GET /` (the HTML shell) and `GET /api/modules` (the modules view),
//!    one at a time on fresh connections: time to the first byte, total
//!    time, body size;
//! 4. updates: with one `/api/events` stream open (read raw, HTTP/1.0), a
//!    probe instance registered, timed from sending the register request
//!    to reading the `modules` event that names it, then unregistered (its
//!    event awaited too, so every write is a change); beside it the floor,
//!    a raw JetStream KV watcher of the registry key seeing the same write;
//!    the console's CPU per update and peak RSS; then the same with 10
//!    streams open (memory per stream), and with one while every instance
//!    renews as in 2.
//!
//! The first-paint target is measured by the browser test
//! (`crates/abi-sdk-e2e/tests/it/console_browser.rs`), whose
//! `first-paint.json` is quoted when found.

mod fleet;
mod http;
mod phases;
mod report;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use abi_test_support::NatsServer;
use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

use crate::platform;
use crate::service::{self, Service};

/// The project the registry and the console are in.
const PROJECT: &str = "bench";
/// The secret tokens and module keys are signed with (32+ bytes, as HS256 wants).
const SECRET: &str = "abi-bench-console-secret-0123456789abcdef!";
/// How long the console may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Settings `abictl` would take its credentials or connection from
/// instead of the bench's (the first found wins).
const INHERITED_SETTINGS: [&str; 11] = [
    "ABI_SERVICE_TOKEN",
    "ABI_MODULE_KEY",
    "ABI_JWT_SECRET_FILE",
    "NATS_CREDS",
    "NATS_USER",
    "NATS_PASSWORD",
    "NATS_TOKEN",
    "NATS_NKEY_FILE",
    "NATS_TLS_CA",
    "NATS_TLS_CERT",
    "NATS_TLS_KEY",
];

/// Flags of `abi-bench console`: the run shapes of `abi-bench agents`
/// (`--quick`, `--smoke`, `--iters`, `--duration-secs`, the binaries; those
/// of no use here hidden), the writes, the streams and the renewal pace.
#[derive(Debug, Clone, clap::Args)]
// The agents' flags already form the group `Args`.
#[group(skip)]
#[command(
    mut_arg("quick", |arg| arg.help(
        "A short run: 100 GETs per page, 100 writes per phase, 3 s idle and renewing"
    )),
    mut_arg("smoke", |arg| arg.help(
        "A correctness run only: 5 GETs per page, 5 writes per phase, 0.3 s idle and renewing"
    )),
    mut_arg("iters", |arg| arg.help(
        "GETs per page, one at a time (default 500; --quick 100; --smoke 5)"
    )),
    mut_arg("duration_secs", |arg| arg.help(
        "Seconds of the idle phase and of the renewal phase (default 10; --quick 3; --smoke 0.3)"
    )),
    mut_arg("callers", |arg| arg.hide(true)),
    mut_arg("repeats", |arg| arg.hide(true)),
    mut_arg("skip_reference", |arg| arg.hide(true)),
    mut_arg("reference_script", |arg| arg.hide(true)),
    mut_arg("python", |arg| arg.hide(true)),
    mut_arg("documents", |arg| arg.hide(true)),
)]
pub struct Args {
    /// The run's shape and the binaries (abi-documents is not started here).
    #[command(flatten)]
    pub run: crate::agents::Args,
    /// Registry writes per update phase (default 500; --quick 100; --smoke 5).
    #[arg(long)]
    pub writes: Option<usize>,
    /// Event streams open in the second update phase.
    #[arg(long, default_value_t = 10)]
    pub streams: usize,
    /// How often each instance renews in the renewal phases (default 5, the
    /// SDK's pace; --smoke 50, which a debug build's console keeps up with).
    #[arg(long, value_name = "SECS")]
    pub renew_every_secs: Option<u64>,
    /// The `abictl` binary (default: next to this executable).
    #[arg(long = "abictl-bin", env = "ABI_ABICTL_BIN")]
    pub abictl: Option<PathBuf>,
    /// The browser test's figures (default: `console-screenshots/first-paint.json`
    /// under $CARGO_TARGET_DIR, else under <workspace>/target).
    #[arg(long)]
    pub first_paint: Option<PathBuf>,
}

impl Args {
    /// `explicit`, else the value of `by_run` for a smoke, a quick or a
    /// full run (in that order).
    fn sized<T: Copy>(&self, explicit: Option<T>, by_run: [T; 3]) -> T {
        let (smoke, quick) = (self.run.smoke, self.run.quick);
        explicit.unwrap_or(by_run[usize::from(!smoke) + usize::from(!smoke && !quick)])
    }

    /// GETs per page.
    pub fn iters(&self) -> usize {
        self.run.iters()
    }

    /// Registry writes per update phase.
    pub fn writes(&self) -> usize {
        self.sized(self.writes, [5, 100, 500]).max(1)
    }

    /// Event streams of the second update phase.
    pub fn streams(&self) -> usize {
        self.streams.max(2)
    }

    /// Length of the idle phase and of the renewal phase.
    pub fn idle(&self) -> Duration {
        self.run.duration()
    }

    /// How often each instance renews in the renewal phases, s.
    pub fn renew_every_secs(&self) -> u64 {
        self.sized(self.renew_every_secs, [50, 5, 5]).max(1)
    }

    /// Where the browser test writes its figures.
    fn first_paint(&self) -> PathBuf {
        self.first_paint.clone().unwrap_or_else(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .filter(|dir| dir.join("console-screenshots").is_dir())
                .unwrap_or_else(|| service::workspace_root().join("target"));
            target.join("console-screenshots/first-paint.json")
        })
    }
}

/// The console process: `abictl console` on a port of its choosing.
pub struct ConsoleProcess {
    /// The process, stopped with SIGTERM at the end.
    pub svc: Service,
    /// Its pid, for `/proc`.
    pub pid: u32,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl ConsoleProcess {
    /// Starts `abictl console` on `url` and waits for its address line.
    ///
    /// # Errors
    ///
    /// When it does not start or print its address in time.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the child is spawned with `kill_on_drop`.
    async fn start(abictl: &std::path::Path, url: &str) -> anyhow::Result<Self> {
        let mut command = Command::new(abictl);
        for name in INHERITED_SETTINGS {
            command.env_remove(name);
        }
        let settings = [
            ("NATS_URL", url),
            ("ABI_PROJECT", PROJECT),
            ("ABI_JWT_SECRET", SECRET),
            ("ABI_LOG", "warn"),
        ];
        command.envs(settings).kill_on_drop(true);
        command.stdin(Stdio::null()).stderr(Stdio::inherit());
        let mut child = command
            .args(["console", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {} console", abictl.display()))?;
        let pid = child.id().context("abictl console exited at once")?;
        let stdout = child.stdout.take().context("abictl console stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(START_TIMEOUT, lines.next_line())
            .await
            .context("abictl console printed no address in time")??
            .context("abictl console exited before printing its address")?;
        let addr = line
            .strip_prefix("console on http://")
            .and_then(|rest| rest.trim_end_matches('/').parse().ok())
            .with_context(|| format!("abictl console's first line: {line:?}"))?;
        // It prints nothing more; the pipe stays read so a line never fails.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            svc: Service::ready(child, pid)?,
            pid,
            addr,
        })
    }
}

/// The whole run, returned as markdown: the notes, the table, the verdicts.
///
/// # Errors
///
/// A process that cannot start, a registry that cannot be filled, a console
/// that never shows it; a failed GET or write is counted in the table
/// instead.
///
/// # Cancel safety
///
/// Not cancel safe: the processes are killed (`kill_on_drop`, the
/// nats-server's `Drop`) rather than stopped, and nothing is reported.
pub async fn run(args: &Args) -> anyhow::Result<String> {
    eprintln!(
        "abi-bench console: {} instances of {} modules, {:.1} s idle and renewing (each \
         instance every {} s), {} GETs per page, {} writes per phase with 1 and with {} event \
         streams",
        fleet::INSTANCES,
        fleet::MODULES,
        args.idle().as_secs_f64(),
        args.renew_every_secs(),
        args.iters(),
        args.writes(),
        args.streams(),
    );
    let started = Instant::now();
    let mut loads = vec![platform::load_average()];
    let abictl = service::sibling_binary("abictl", args.abictl.clone(), "--abictl-bin")
        .context("abictl is package abi-cli's binary")?;
    let discovery = service::discovery_binary(args.run.bins.discovery.clone())?;
    eprintln!("starting nats-server (JetStream, temporary store)");
    let server = NatsServer::start().await;
    let url = server.url();
    let nats = async_nats::connect(&url).await.context("connect to nats")?;
    let fleet = fleet::fleet(SECRET);
    eprintln!("starting {} (lease 3600 s)", discovery.display());
    let discovery =
        service::start_ours(&discovery, &url, SECRET, PROJECT, &nats, &fleet[0].member).await?;
    let filling = Instant::now();
    fleet::fill(&nats, PROJECT, &fleet)
        .await
        .context("register the instances")?;
    eprintln!(
        "{} instances registered and initialized in {:.2} s",
        fleet.len(),
        filling.elapsed().as_secs_f64()
    );
    eprintln!("starting {} console", abictl.display());
    let console = ConsoleProcess::start(&abictl, &url).await?;
    let bench = phases::Bench {
        nats: &nats,
        console: &console,
        fleet: &fleet,
        args,
    };
    let results = bench.all().await?;
    loads.push(platform::load_average());
    console.svc.stop().await;
    discovery.stop().await;
    drop(server);
    let figures = report::FirstPaint::read(&args.first_paint());
    Ok(report::markdown(
        &results,
        figures.as_ref(),
        args,
        started.elapsed(),
        &loads,
    ))
}
