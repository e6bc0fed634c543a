//! The phases of one target: the raw floor's request-reply, and a host's
//! chats then agent invokes (one at a time, with the concurrent callers,
//! and a counted pass of the service calls each makes), with the CPU each
//! process spends.

use abi_sdk::agents::AgentsExt as _;
use abi_sdk::models::ModelsExt as _;
use std::time::{Duration, Instant};

use abi_sdk::agents::{AgentClient, AgentError};
use abi_sdk::models::{ChatMessage, ChatModel};
use abi_sdk::{CallError, DiscoveryClient};
use anyhow::Context as _;

use super::report::{Column, Phase};
use super::workload::{self, Code, Measured};
use super::{AGENT, Args, CALL_TIMEOUT, MODEL, PROJECT, RAW_SUBJECT, SERVING_TIMEOUT, TEXT, calls};
use crate::platform::{self, CpuSplit, Platform};
use crate::service::Service;

/// What a host target's phases use.
pub struct Target<'a> {
    /// The shared services.
    pub platform: &'a Platform,
    /// The bench's connection (the call counter's subscriptions).
    pub nats: &'a async_nats::Client,
    /// Discovery as the caller module.
    pub caller: &'a DiscoveryClient,
    /// The run's flags.
    pub args: &'a Args,
}

/// Records the CPU the target and the shared services spent since
/// `before`, and the target's usage, then stops the target.
///
/// # Cancel safety
///
/// Cancel safe: the column is filled before the only await; dropped during the stop, the target is
/// dropped and so killed (SIGKILL) instead of stopped with SIGTERM.
pub async fn finish(
    platform: &Platform,
    svc: Service,
    before: platform::SharedCpu,
    column: &mut Column,
) {
    let after = platform.cpu();
    let spent = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
    column.documents_cpu = spent(before.documents, after.documents);
    column.discovery_cpu = spent(before.discovery, after.discovery);
    column.nats_cpu = spent(before.nats, after.nats);
    match svc.usage() {
        Ok(usage) => column.usage = Some(usage),
        Err(error) => eprintln!("  {}: no CPU/RSS: {error:#}", column.name),
    }
    svc.stop().await;
}

/// The raw floor: request-reply round trips one at a time, then with the
/// concurrent callers.
///
/// # Cancel safety
///
/// Cancel safe: the floor only echoes; dropping it drops the requests in flight and what was
/// measured so far.
pub async fn raw(
    platform: &Platform,
    svc: &Service,
    nats: &async_nats::Client,
    args: &Args,
) -> Phase {
    let call = |_k: usize| async move {
        match tokio::time::timeout(CALL_TIMEOUT, nats.request(RAW_SUBJECT, TEXT.into())).await {
            Ok(Ok(reply)) if reply.payload.as_ref() == TEXT.as_bytes() => Ok(()),
            Ok(Ok(_)) => Err(crate::measure::WRONG_ANSWER.to_owned()),
            Ok(Err(error)) => Err(format!("{:?}", error.kind())),
            Err(_) => Err(crate::measure::CALL_TIMEOUT.to_owned()),
        }
    };
    let mut measured = Measured::default();
    let name = "raw request-reply";
    eprintln!("{name}: one at a time x{}", args.iters());
    workload::latency(name, args.iters(), &mut measured, call).await;
    eprintln!("{name}: {} callers", args.callers());
    let before = CpuSplit::now(platform, svc);
    for _ in 0..args.repeats() {
        workload::throughput(
            name,
            args.callers(),
            args.duration(),
            &mut measured,
            |_, k| call(k),
        )
        .await;
    }
    let cpu_per_call = split_per_call(&CpuSplit::now(platform, svc), &before, measured.succeeded);
    report_rate(name, &measured);
    Phase {
        measured,
        cpu_per_call,
        calls: None,
    }
}

impl Target<'_> {
    /// A host target: waits until it answers both kinds of call, then
    /// measures chats, then agent invokes, then stops it.
    ///
    /// # Errors
    ///
    /// When the target never answers, or the call counter cannot subscribe.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped mid-phase, the column is left half filled, the target is killed by
    /// `kill_on_drop` rather than stopped, and a counting pass's tasks may linger.
    pub async fn host(
        &self,
        svc: Service,
        module: &str,
        column: &mut Column,
    ) -> anyhow::Result<()> {
        let (platform, args) = (self.platform, self.args);
        let proxy = self.caller.module(module, 1);
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
        for _ in 0..args.repeats() {
            workload::throughput(
                "chat",
                args.callers(),
                args.duration(),
                &mut measured,
                |_, _| chat(&model),
            )
            .await;
        }
        let cpu_per_call =
            split_per_call(&CpuSplit::now(platform, &svc), &split, measured.succeeded);
        report_rate("chat", &measured);
        let counted = calls::per_call(self.nats, PROJECT, || chat(&model)).await?;
        column.chat = Some(Phase {
            measured,
            cpu_per_call,
            calls: Some(counted),
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
        for _ in 0..args.repeats() {
            workload::throughput(
                "agent",
                args.callers(),
                args.duration(),
                &mut measured,
                |c, _| invoke_once(&agents[c]),
            )
            .await;
        }
        let cpu_per_call =
            split_per_call(&CpuSplit::now(platform, &svc), &split, measured.succeeded);
        report_rate("agent", &measured);
        let counted = calls::per_call(self.nats, PROJECT, || invoke_once(&agent)).await?;
        column.agent = Some(Phase {
            measured,
            cpu_per_call,
            calls: Some(counted),
        });

        finish(platform, svc, before, column).await;
        Ok(())
    }
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
        Ok(_) => Err(crate::measure::WRONG_ANSWER.to_owned()),
        Err(error) => Err(call_code(&error)),
    }
}

/// One invoke of the echo agent (submit to result), with a fresh
/// invocation id: its result must be the prompt.
async fn invoke_once(agent: &AgentClient) -> Result<(), Code> {
    match agent.invoke(TEXT, Some(CALL_TIMEOUT)).await {
        Ok(result) if result == TEXT => Ok(()),
        Ok(_) => Err(crate::measure::WRONG_ANSWER.to_owned()),
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

/// CPU microseconds per call since `before`: host, abi-documents,
/// abi-discovery, nats-server, the bench's callers.
fn split_per_call(now: &CpuSplit, before: &CpuSplit, calls: u64) -> Option<[f64; 5]> {
    let [host, documents, nats, bench] = now.per_run_since(before, calls)?;
    let discovery = now.discovery_per_run_since(before, calls)?;
    Some([host, documents, discovery, nats, bench])
}
