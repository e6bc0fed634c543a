//! `abi-bench agents`: agent and chat model hosts side by side on one
//! nats-server, one `abi-discovery` (authorizes agent and model calls, keeps
//! the leases) and one `abi-documents` on SQLite (the agent run records,
//! event fragments and conversation claims of every target), all started by
//! the bench ([`crate::platform`], shared with `abi-bench jobs`).
//!
//! Targets, one after another, each its own process:
//!
//! 1. **raw request-reply floor**: `abi-bench agents --serve raw`, one core
//!    NATS subscription replying every request's payload;
//! 2. **ours**: `abi-bench agents --serve ours`, a module under
//!    `abi_sdk::Runner` serving an echo chat model (`ModelHost`) and an echo
//!    agent (`AgentHost`), default options;
//! 3. **reference**: `python/agent_bench_peer.py serve`, a module under
//!    naas_abi_sdk's `run_module` serving the same two with its `ModelHost`
//!    and `AgentHost`.
//!
//! The caller is the same for both hosts: our `ChatModel::invoke` and our
//! `AgentClient::invoke` (submit, then the result), as module
//! `bench.caller`. Each kind of call is measured one at a time (after
//! unmeasured warm-up calls), then with concurrent callers for a fixed time;
//! every agent caller has its own conversation (thread id) and every invoke
//! a fresh invocation id, so the conversation claim never serializes them.

mod calls;
mod phases;
mod report;
mod serve;
mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use abi_sdk::{DiscoveryClient, TokenSource};
use anyhow::Context as _;

use crate::platform::{self, Platform};
use crate::service;
use report::Column;

/// The project every target serves in (the nats-server is the bench's own).
const PROJECT: &str = "bench";
/// The secret tokens and module keys are signed with (32+ bytes, as HS256 wants).
const SECRET: &str = "abi-bench-agents-secret-0123456789abcdef!";
/// The echo agent every module serves.
const AGENT: &str = "echo";
/// The echo chat model every module serves.
const MODEL: &str = "echo";
/// The module the bench calls as.
const CALLER: &str = "bench.caller";
/// The raw floor's subject.
const RAW_SUBJECT: &str = "bench.agents.raw.echo";
/// What every call sends: the raw payload, the chat's one human message,
/// the agent's prompt.
const TEXT: &str = "hello from abi-bench";
/// How long one call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a started target may take to answer both kinds of call.
const SERVING_TIMEOUT: Duration = Duration::from_secs(60);

/// Flags of `abi-bench agents`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// A short run: 100 calls per latency cell, 3 s per throughput cell.
    #[arg(long, conflicts_with = "smoke")]
    pub quick: bool,
    /// A correctness run only (5 calls per latency cell, 0.3 s per throughput cell).
    #[arg(long)]
    pub smoke: bool,
    /// Calls per latency cell, one at a time (default 500; --quick 100; --smoke 5).
    #[arg(long)]
    pub iters: Option<usize>,
    /// Runs of each throughput cell, reported as the median and the spread
    /// (default 3; --smoke 1).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Seconds per throughput cell (default 10; --quick 3; --smoke 0.3).
    #[arg(long)]
    pub duration_secs: Option<f64>,
    /// Concurrent callers of the throughput cells.
    #[arg(long, default_value_t = 64)]
    pub callers: usize,
    /// Leave the Python reference out (its column reads "skipped").
    #[arg(long)]
    pub skip_reference: bool,
    /// The platform's binaries and the reference's Python.
    #[command(flatten)]
    pub bins: platform::Binaries,
    /// The reference module script (default: crates/abi-bench/python/agent_bench_peer.py).
    #[arg(long)]
    pub reference_script: Option<PathBuf>,
    /// Internal: serve one target on this NATS URL instead of measuring.
    #[arg(long, hide = true, value_names = ["KIND", "NATS_URL"], num_args = 2)]
    pub serve: Option<Vec<String>>,
}

impl Args {
    /// Calls per latency cell.
    pub fn iters(&self) -> usize {
        self.iters
            .unwrap_or(if self.smoke {
                5
            } else if self.quick {
                100
            } else {
                500
            })
            .max(1)
    }

    /// Runs of each throughput cell.
    pub fn repeats(&self) -> usize {
        self.repeats
            .unwrap_or(if self.smoke { 1 } else { 3 })
            .max(1)
    }

    /// Length of each throughput cell.
    pub fn duration(&self) -> Duration {
        let secs = self.duration_secs.unwrap_or(if self.smoke {
            0.3
        } else if self.quick {
            3.0
        } else {
            10.0
        });
        Duration::from_secs_f64(secs.max(0.01))
    }

    fn callers(&self) -> usize {
        self.callers.max(1)
    }
}

/// The module key of `identity` under the bench's secret.
fn module_key(identity: &str) -> anyhow::Result<String> {
    abi_auth::module_key(SECRET, identity).context("module key")
}

/// Runs every target and returns the notes, the table and the verdicts
/// (markdown); with `--serve`, serves one target until SIGTERM and exits.
///
/// # Errors
///
/// When a process cannot be started or set up, or the bus cannot be
/// reached; failed calls are counted in the table instead.
///
/// # Cancel safety
///
/// Not cancel safe: dropped, the platform and the target are killed (their `Drop` and
/// `kill_on_drop`) rather than stopped, and no table comes out; with `--serve`, as `serve::run`.
pub async fn run(args: &Args) -> anyhow::Result<String> {
    if let Some(serve) = &args.serve {
        serve::run(&serve[0], &serve[1]).await?;
        // The parent stopped reading stdout after "ready": exit before
        // main prints an (empty) table into the closed pipe.
        std::process::exit(0);
    }
    let (iters, duration, callers) = (args.iters(), args.duration(), args.callers());
    eprintln!(
        "abi-bench agents: {iters} calls per latency cell, {:.1} s per throughput cell \
         with {callers} callers",
        duration.as_secs_f64()
    );
    let load_before = platform::load_average();
    let started = Instant::now();
    let root = service::workspace_root();
    let python = args.bins.python();
    let script = args
        .reference_script
        .clone()
        .unwrap_or_else(|| root.join("crates/abi-bench/python/agent_bench_peer.py"));
    let bins = args.bins.clone();
    let platform = Platform::start(bins, PROJECT, SECRET).await?;
    let nats = async_nats::connect(platform.url())
        .await
        .context("connect to nats")?;
    let caller = DiscoveryClient::new(
        nats.clone(),
        PROJECT,
        TokenSource::module_key(CALLER, module_key(CALLER)?),
    );

    let mut raw = Column::new("raw request-reply floor");
    let svc = serve::spawn_rust("raw", &platform.url()).await?;
    let before = platform.cpu();
    raw.raw = Some(phases::raw(&platform, &svc, &nats, args).await);
    phases::finish(&platform, svc, before, &mut raw).await;

    let mut ours = Column::new("ours (Rust ModelHost, AgentHost)");
    let svc = serve::spawn_rust("ours", &platform.url()).await?;
    let target = phases::Target {
        platform: &platform,
        nats: &nats,
        caller: &caller,
        args,
    };
    target.host(svc, serve::OURS_MODULE, &mut ours).await?;

    let mut reference = Column::new("reference (Python ModelHost, AgentHost)");
    if args.skip_reference {
        reference.skipped = Some("--skip-reference".to_owned());
    } else {
        let svc = serve::spawn_reference(&python, &script, &platform.url()).await?;
        target
            .host(svc, serve::REFERENCE_MODULE, &mut reference)
            .await?;
    }

    let load_after = platform::load_average();
    let elapsed = started.elapsed();
    platform.stop().await;
    let verdicts = report::verdicts(&raw, &ours, &reference, callers);
    let notes = format!(
        "Targets ran one after another on one nats-server with one abi-discovery (leases, \
         agent and model authorizations) and one abi-documents on SQLite (agent run records, \
         events, conversation claims), each target a process of its own; the caller, in the \
         bench's process, is our SDK's for both hosts (ChatModel::invoke, AgentClient::invoke: \
         submit, then the result). Latency: {iters} calls one at a time, {warmup} unmeasured \
         first; throughput: {callers} concurrent callers for {secs:.1} s each (every agent \
         caller its own conversation, every invoke a fresh invocation id). {total:.0} s in all. \
         Load average (1 min) before / after: {load_before} / {load_after}.",
        warmup = workload::WARMUP,
        secs = duration.as_secs_f64(),
        total = elapsed.as_secs_f64(),
    );
    let columns = [raw, ours, reference];
    Ok(format!(
        "{notes}\n\n{}\n{verdicts}",
        report::table(&columns, callers)
    ))
}
