//! The targets' processes: this binary re-run with `agents --serve <kind>
//! <url>` (the raw request-reply floor, or our module serving the echo agent
//! and the echo chat model), and the reference's module from
//! `python/agent_bench_peer.py`. Each prints `ready` once it serves and
//! stops on SIGTERM.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;

use abi_sdk::agents::{AgentHost, AgentSpec, invoke_fn};
use abi_sdk::models::{ChatInput, ChatMessage, ChatModelSpec, ModelHost};
use abi_sdk::{Config, Context, DiscoveryConfig, HookResult, Module, ModuleSpec, Runner};
use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use tokio::process::Command;

use super::{AGENT, MODEL, PROJECT, RAW_SUBJECT, module_key};
use crate::service::{self, Service};

/// The module our hosts serve in.
pub const OURS_MODULE: &str = "bench.ours";
/// The module the reference's hosts serve in.
pub const REFERENCE_MODULE: &str = "bench.reference";

/// Starts this binary serving `kind` (`raw` or `ours`) and waits for `ready`.
///
/// # Errors
///
/// When it does not start or is not ready within a minute.
///
/// # Cancel safety
///
/// Cancel safe: the child is spawned with `kill_on_drop`, so dropping the future before `ready`
/// kills it.
pub async fn spawn_rust(kind: &str, url: &str) -> anyhow::Result<Service> {
    let exe = std::env::current_exe().context("this executable")?;
    eprintln!("starting {} agents --serve {kind}", exe.display());
    let child = Command::new(&exe)
        .args(["agents", "--serve", kind, url])
        .env("ABI_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {}", exe.display()))?;
    service::wait_ready_line(child, kind).await
}

/// Starts the reference's module (`python script serve ...`) serving the
/// echo agent and the echo chat model, and waits for `ready`.
///
/// # Errors
///
/// When it does not start or is not ready within a minute.
///
/// # Cancel safety
///
/// Cancel safe: the Python module is spawned with `kill_on_drop`, so dropping the future before
/// `ready` kills it.
pub async fn spawn_reference(python: &Path, script: &Path, url: &str) -> anyhow::Result<Service> {
    eprintln!("starting {} {}", python.display(), script.display());
    let child = Command::new(python)
        .arg(script)
        .args([
            "serve",
            url,
            &module_key(REFERENCE_MODULE)?,
            PROJECT,
            REFERENCE_MODULE,
            AGENT,
            MODEL,
        ])
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {} {}", python.display(), script.display()))?;
    service::wait_ready_line(child, "reference agent and model hosts").await
}

/// The `--serve` side: serves `kind` on `url` until SIGTERM.
///
/// # Errors
///
/// When `kind` is unknown or the target cannot start.
///
/// # Cancel safety
///
/// Not cancel safe: the raw floor only drops its subscription, but a dropped `Runner::run` (ours)
/// skips the drain: calls in flight are cut and the registration is not released.
pub async fn run(kind: &str, url: &str) -> anyhow::Result<()> {
    match kind {
        "raw" => raw_floor(url).await,
        "ours" => our_module(url).await,
        other => bail!("unknown target {other:?} (raw, ours)"),
    }
}

/// The floor: one core-NATS subscription answering every request with its
/// own payload.
async fn raw_floor(url: &str) -> anyhow::Result<()> {
    let nats = async_nats::connect(url).await.context("connect to nats")?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut requests = nats.subscribe(RAW_SUBJECT).await?;
    nats.flush().await?;
    println!("ready");
    loop {
        tokio::select! {
            _ = term.recv() => break,
            msg = requests.next() => {
                let Some(msg) = msg else { break };
                if let Some(reply) = msg.reply {
                    // A lost reply shows up as a timed-out call in the bench.
                    let _ = nats.publish(reply, msg.payload).await;
                }
            }
        }
    }
    crate::service::flush_before_exit(&nats).await;
    Ok(())
}

/// Prints `ready` once the runner reaches `run` (hosts serving, READY).
struct Announce;

impl Module for Announce {
    async fn run(&self, cx: Context) -> HookResult {
        println!("ready");
        cx.stopping().cancelled().await;
        Ok(())
    }
}

/// Our module: a `ModelHost` serving the echo chat model and an
/// `AgentHost` serving the echo agent, both with their default options,
/// under the runner (which drains on SIGTERM).
async fn our_module(url: &str) -> anyhow::Result<()> {
    let models = ModelHost::new().model(
        ChatModelSpec::new(MODEL)?.description("says the last message back"),
        |input: ChatInput| async move {
            let last = input
                .messages
                .last()
                .map(ChatMessage::content_text)
                .unwrap_or_default();
            Ok(ChatMessage::ai(last))
        },
    )?;
    let agents = AgentHost::new().agent(
        AgentSpec::new(AGENT, "says the prompt back"),
        invoke_fn(|prompt, _cx| async move { Ok(prompt) }),
    );
    // Models first: the runner closes hosts in this order (the reference's).
    let spec = ModuleSpec::new(OURS_MODULE)
        .serve(Arc::new(models))
        .serve(Arc::new(agents));
    let config = Config::default()
        .nats_url(url)
        .token(abi_sdk::TokenSource::module_key(
            OURS_MODULE,
            module_key(OURS_MODULE)?,
        ))
        .discovery(DiscoveryConfig::default().project(PROJECT));
    Runner::new(spec).config(config).run(Announce).await?;
    Ok(())
}
