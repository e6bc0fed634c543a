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

mod report;
mod serve;
mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use abi_sdk::agents::{AgentClient, AgentError};
use abi_sdk::models::{ChatMessage, ChatModel};
use abi_sdk::{CallError, DiscoveryClient, TokenSource};
use anyhow::Context as _;

use crate::platform::{self, CpuSplit, Platform};
use crate::service::{self, Service};
use report::{Column, Phase};
use workload::{Code, Measured};

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
    /// Seconds per throughput cell (default 10; --quick 3; --smoke 0.3).
    #[arg(long)]
    pub duration_secs: Option<f64>,
    /// Concurrent callers of the throughput cells.
    #[arg(long, default_value_t = 64)]
    pub callers: usize,
    /// Leave the Python reference out (its column reads "skipped").
    #[arg(long)]
    pub skip_reference: bool,
    /// The `abi-discovery` binary (default: next to this executable).
    #[arg(long, env = "ABI_DISCOVERY_BIN")]
    pub discovery_bin: Option<PathBuf>,
    /// The `abi-documents` binary (default: next to this executable).
    #[arg(long, env = "ABI_DOCUMENTS_BIN")]
    pub documents_bin: Option<PathBuf>,
    /// Python with naas_abi_sdk installed (default: <workspace>/.venv/bin/python).
    #[arg(long, env = "ABI_PYTHON")]
    pub python: Option<PathBuf>,
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
    let python = args
        .python
        .clone()
        .unwrap_or_else(|| root.join(".venv/bin/python"));
    let script = args
        .reference_script
        .clone()
        .unwrap_or_else(|| root.join("crates/abi-bench/python/agent_bench_peer.py"));
    let bins = platform::Binaries {
        discovery: args.discovery_bin.clone(),
        documents: args.documents_bin.clone(),
    };
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
    raw.raw = Some(raw_phase(&platform, &svc, &nats, args).await);
    finish(&platform, svc, before, &mut raw).await;

    let mut ours = Column::new("ours (Rust ModelHost, AgentHost)");
    let svc = serve::spawn_rust("ours", &platform.url()).await?;
    host_phases(&platform, svc, &caller, serve::OURS_MODULE, args, &mut ours).await?;

    let mut reference = Column::new("reference (Python ModelHost, AgentHost)");
    if args.skip_reference {
        reference.skipped = Some("--skip-reference".to_owned());
    } else {
        let svc = serve::spawn_reference(&python, &script, &platform.url()).await?;
        host_phases(
            &platform,
            svc,
            &caller,
            serve::REFERENCE_MODULE,
            args,
            &mut reference,
        )
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

/// Records the CPU the target and the shared services spent since
/// `before`, and the target's usage, then stops the target.
async fn finish(
    platform: &Platform,
    svc: Service,
    before: platform::SharedCpu,
    column: &mut Column,
) {
    let after = platform.cpu();
    let spent = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
    column.documents_cpu = spent(before.documents, after.documents);
    column.nats_cpu = spent(before.nats, after.nats);
    match svc.usage() {
        Ok(usage) => column.usage = Some(usage),
        Err(error) => eprintln!("  {}: no CPU/RSS: {error:#}", column.name),
    }
    svc.stop().await;
}

/// The raw floor: request-reply round trips one at a time, then with the
/// concurrent callers.
async fn raw_phase(
    platform: &Platform,
    svc: &Service,
    nats: &async_nats::Client,
    args: &Args,
) -> Phase {
    let call = |_k: usize| async move {
        match tokio::time::timeout(CALL_TIMEOUT, nats.request(RAW_SUBJECT, TEXT.into())).await {
            Ok(Ok(reply)) if reply.payload.as_ref() == TEXT.as_bytes() => Ok(()),
            Ok(Ok(_)) => Err("WRONG_ANSWER".to_owned()),
            Ok(Err(error)) => Err(format!("{:?}", error.kind())),
            Err(_) => Err("CALL_TIMEOUT".to_owned()),
        }
    };
    let mut measured = Measured::default();
    let name = "raw request-reply";
    eprintln!("{name}: one at a time x{}", args.iters());
    workload::latency(name, args.iters(), &mut measured, call).await;
    eprintln!("{name}: {} callers", args.callers());
    let before = CpuSplit::now(platform, svc);
    workload::throughput(
        name,
        args.callers(),
        args.duration(),
        &mut measured,
        |_, k| call(k),
    )
    .await;
    let cpu_per_call = CpuSplit::now(platform, svc).per_run_since(&before, measured.succeeded);
    report_rate(name, &measured);
    Phase {
        measured,
        cpu_per_call,
    }
}

/// A host target: waits until it answers both kinds of call, then measures
/// chats, then agent invokes, then stops it.
async fn host_phases(
    platform: &Platform,
    svc: Service,
    caller: &DiscoveryClient,
    module: &str,
    args: &Args,
    column: &mut Column,
) -> anyhow::Result<()> {
    let proxy = caller.module(module, 1);
    let model = proxy.chat_model(MODEL).timeout(CALL_TIMEOUT);
    let agent = proxy.agent_client(AGENT);
    wait_serving(&model, &agent)
        .await
        .with_context(|| format!("{} never answered", column.name))?;
    let before = platform.cpu();

    let name = column.name;
    eprintln!("{name}: chat one at a time x{}", args.iters());
    let mut measured = Measured::default();
    let chat = |model: &ChatModel| {
        let model = model.clone();
        async move { chat_once(&model).await }
    };
    workload::latency("chat", args.iters(), &mut measured, |_| chat(&model)).await;
    eprintln!("{name}: chat with {} callers", args.callers());
    let split = CpuSplit::now(platform, &svc);
    workload::throughput(
        "chat",
        args.callers(),
        args.duration(),
        &mut measured,
        |_, _| chat(&model),
    )
    .await;
    let cpu_per_call = CpuSplit::now(platform, &svc).per_run_since(&split, measured.succeeded);
    report_rate("chat", &measured);
    column.chat = Some(Phase {
        measured,
        cpu_per_call,
    });

    eprintln!("{name}: agent invoke one at a time x{}", args.iters());
    let mut measured = Measured::default();
    workload::latency("agent", args.iters(), &mut measured, |_| {
        invoke_once(&agent)
    })
    .await;
    // One client per caller: each has its own conversation.
    let agents: Vec<AgentClient> = (0..args.callers())
        .map(|_| proxy.agent_client(AGENT))
        .collect();
    eprintln!("{name}: agent invoke with {} callers", args.callers());
    let split = CpuSplit::now(platform, &svc);
    workload::throughput(
        "agent",
        args.callers(),
        args.duration(),
        &mut measured,
        |c, _| invoke_once(&agents[c]),
    )
    .await;
    let cpu_per_call = CpuSplit::now(platform, &svc).per_run_since(&split, measured.succeeded);
    report_rate("agent", &measured);
    column.agent = Some(Phase {
        measured,
        cpu_per_call,
    });

    finish(platform, svc, before, column).await;
    Ok(())
}

/// Polls one chat and one agent invoke until both succeed (the module may
/// print `ready` before discovery lists it READY), bounded.
async fn wait_serving(model: &ChatModel, agent: &AgentClient) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        let chat = chat_once(model).await;
        let invoke = match chat {
            Ok(()) => invoke_once(agent).await,
            Err(code) => Err(code),
        };
        match invoke {
            Ok(()) => return Ok(()),
            Err(code) if start.elapsed() > SERVING_TIMEOUT => {
                anyhow::bail!("last failure {code} after {SERVING_TIMEOUT:?}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// One chat of the echo model: its answer must be the message sent.
async fn chat_once(model: &ChatModel) -> Result<(), Code> {
    match model.invoke([ChatMessage::human(TEXT)]).await {
        Ok(answer) if answer.content_text() == TEXT => Ok(()),
        Ok(_) => Err("WRONG_ANSWER".to_owned()),
        Err(error) => Err(call_code(&error)),
    }
}

/// One invoke of the echo agent (submit to result), with a fresh
/// invocation id: its result must be the prompt.
async fn invoke_once(agent: &AgentClient) -> Result<(), Code> {
    match agent.invoke(TEXT, Some(CALL_TIMEOUT)).await {
        Ok(result) if result == TEXT => Ok(()),
        Ok(_) => Err("WRONG_ANSWER".to_owned()),
        Err(error) => Err(agent_code(&error)),
    }
}

fn call_code(error: &CallError) -> Code {
    error
        .code()
        .map_or_else(|| error.kind().to_string(), str::to_owned)
}

fn agent_code(error: &AgentError) -> Code {
    error
        .code()
        .map_or_else(|| error.kind().to_string(), str::to_owned)
}

fn report_rate(what: &str, measured: &Measured) {
    if let Some(rate) = measured.rate {
        eprintln!("  {what}: {rate:.0}/s ({} succeeded)", measured.succeeded);
    }
}
