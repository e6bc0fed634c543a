//! The targets' processes: this binary re-run with `jobs --serve <kind>
//! <url>` (our `JobHost`, the raw JetStream floor, or a record-call floor
//! of `super::records`), and the reference's
//! `JobHost` from `python/job_bench_peer.py`. Each prints `ready` once it
//! serves and stops on SIGTERM.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use abi_sdk::jobs::host::{JobHostLinks, consumer_config};
use abi_sdk::jobs::{BoundJobHost, JobContext, JobHost, JobHostOptions, JobResult, JobSpec};
use abi_sdk::workflows::{FlowContext, workflow_fn};
use abi_sdk::{DocumentClient, TokenSource};
use abi_wire::jobs::{self as wire, JobSubjects};
use anyhow::{Context as _, bail};
use async_nats::jetstream;
use futures::StreamExt as _;
use tokio::process::Command;

use super::{PROJECT, jobs, started_subject, token};
use crate::service::{self, Service};

/// The module of the raw floor's jobs.
pub const RAW_MODULE: &str = "bench.raw";
/// The module our host serves.
pub const OURS_MODULE: &str = "bench.ours";
/// The module the reference's host serves.
pub const REFERENCE_MODULE: &str = "bench.reference";
/// How long one floor pull waits for messages (the hosts' default).
const FETCH_EXPIRES: Duration = Duration::from_secs(1);

/// Starts this binary serving `kind` (`ours`, `raw`, `records4`,
/// `records2` or `records2c`; ours as workflows of `steps` steps when not
/// 0), through `wrapper` when given (run with this binary and its flags as
/// arguments), and waits for `ready`.
///
/// # Errors
///
/// When it does not start or is not ready within a minute.
///
/// # Cancel safety
///
/// Cancel safe: the child is spawned with `kill_on_drop`, so dropping the future before `ready`
/// kills it.
pub async fn spawn_rust(
    kind: &str,
    url: &str,
    steps: u32,
    wrapper: Option<&Path>,
) -> anyhow::Result<Service> {
    let exe = std::env::current_exe().context("this executable")?;
    eprintln!("starting {} jobs --serve {kind}", exe.display());
    let mut command = match wrapper {
        Some(wrapper) => {
            let mut command = Command::new(wrapper);
            command.arg(&exe);
            command
        }
        None => Command::new(&exe),
    };
    let child = command
        .args(["jobs", "--serve", kind, url])
        .args(["--workflow-steps", &steps.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {}", exe.display()))?;
    service::wait_ready_line(child, kind).await
}

/// Starts the reference's host (`python script serve ...`) on the bench's
/// jobs (workflows of `steps` steps when not 0) and waits for `ready`.
///
/// # Errors
///
/// When it does not start or is not ready within a minute.
///
/// # Cancel safety
///
/// Cancel safe: the Python host is spawned with `kill_on_drop`, so dropping the future before
/// `ready` kills it.
pub async fn spawn_reference(
    python: &Path,
    script: &Path,
    url: &str,
    steps: u32,
) -> anyhow::Result<Service> {
    eprintln!("starting {} {}", python.display(), script.display());
    let child = Command::new(python)
        .arg(script)
        .args([
            "serve",
            url,
            &token(REFERENCE_MODULE),
            PROJECT,
            REFERENCE_MODULE,
            &started_subject(REFERENCE_MODULE),
        ])
        .args(jobs().iter().map(|(name, n)| format!("{name}={n}:{steps}")))
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {} {}", python.display(), script.display()))?;
    service::wait_ready_line(child, "reference job host").await
}

/// The `--serve` side: serves `kind`'s jobs on `url` until SIGTERM (ours
/// as workflows of `steps` journaled steps when not 0).
///
/// # Errors
///
/// When `kind` is unknown or the target cannot start.
///
/// # Cancel safety
///
/// Not cancel safe: dropped while serving, the host is not closed and the pull loops are not
/// aborted; they run on, detached, until the runtime stops.
pub async fn run(kind: &str, url: &str, steps: u32) -> anyhow::Result<()> {
    let nats = async_nats::connect(url).await.context("connect to nats")?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    match kind {
        "ours" => {
            let host = our_host(&nats, steps).await?;
            println!("ready");
            term.recv().await;
            host.close_now().await;
        }
        "raw" | "records4" | "records2" | "records2c" => {
            use super::records::{CONTINUOUS_MODULE, FOUR_MODULE, TWO_MODULE, start};
            let loops = match kind {
                "records4" => start(&nats, FOUR_MODULE, true, false).await?,
                "records2" => start(&nats, TWO_MODULE, false, false).await?,
                "records2c" => start(&nats, CONTINUOUS_MODULE, false, true).await?,
                _ => raw_floor(&nats).await?,
            };
            println!("ready");
            term.recv().await;
            for pulling in loops {
                pulling.abort();
            }
        }
        other => bail!("unknown target {other:?} (ours, raw, records4, records2, records2c)"),
    }
    crate::service::flush_before_exit(&nats).await;
    Ok(())
}

/// Our `JobHost` with the reference's default options, started; its jobs
/// are workflows of `steps` no-op steps when `steps` is not 0.
async fn our_host(nats: &async_nats::Client, steps: u32) -> anyhow::Result<BoundJobHost> {
    let started = started_subject(OURS_MODULE);
    let mut host = JobHost::new().options(JobHostOptions::default());
    for (name, n) in jobs() {
        let spec = JobSpec::new(name)?.max_concurrency(n)?;
        let (nats, subject) = (nats.clone(), started.clone());
        host = if steps == 0 {
            host.job(spec, move |cx: JobContext| {
                trivial(nats.clone(), subject.clone(), cx)
            })
        } else {
            host.job(spec.as_workflow(), no_op_steps(nats, subject, steps))
        };
    }
    let host = host.bind(JobHostLinks {
        nats: nats.clone(),
        documents: DocumentClient::new(
            nats.clone(),
            TokenSource::issued(token(OURS_MODULE)),
            OURS_MODULE,
        ),
        project: PROJECT.to_owned(),
        module_id: OURS_MODULE.to_owned(),
        instance_id: format!("{OURS_MODULE}-rs-1"),
    });
    host.prepare_consumers().await?;
    host.start_serving().await?;
    Ok(host)
}

/// The bench's handler: its first action announces the run, then it ends.
async fn trivial(nats: async_nats::Client, subject: String, cx: JobContext) -> JobResult {
    // A lost announcement shows up as a missing start in the bench.
    let _ = nats.publish(subject, cx.run_id().to_owned().into()).await;
    Ok(serde_json::Value::Null)
}

/// The bench's workflow: its first action announces the run, then it runs
/// `steps` journaled steps that each return their index.
fn no_op_steps(
    nats: async_nats::Client,
    subject: String,
    steps: u32,
) -> impl abi_sdk::jobs::JobHandler {
    workflow_fn(move |cx: FlowContext, _input: serde_json::Value| {
        let (nats, subject) = (nats.clone(), subject.clone());
        async move {
            let _ = nats.publish(subject, cx.run_id().to_owned().into()).await;
            for i in 0..steps {
                let _: u32 = cx.step(&format!("s{i}"), || async move { Ok(i) }).await?;
            }
            Ok(serde_json::Value::Null)
        }
    })
}

/// The floor: per job, the hosts' consumer config and a loop that fetches
/// `max_concurrency` triggers, then for each announces its start, acks it
/// and publishes its completion notice. No run record, no handler task.
async fn raw_floor(nats: &async_nats::Client) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let js = jetstream::new(nats.clone());
    let stream = js
        .get_stream(wire::stream(PROJECT))
        .await
        .context("the jobs stream")?;
    let started = started_subject(RAW_MODULE);
    let mut loops = Vec::new();
    for (name, n) in jobs() {
        let subjects = JobSubjects::new(PROJECT, RAW_MODULE, &name);
        let config = consumer_config(&subjects, n, JobHostOptions::default().ack_wait);
        let consumer = stream
            .create_consumer(config)
            .await
            .with_context(|| format!("the floor's consumer of {name}"))?;
        let (nats, started) = (nats.clone(), started.clone());
        loops.push(tokio::spawn(async move {
            loop {
                let batch = consumer
                    .fetch()
                    .max_messages(n as usize)
                    .expires(FETCH_EXPIRES)
                    .messages()
                    .await;
                let Ok(mut batch) = batch else {
                    continue;
                };
                while let Some(Ok(msg)) = batch.next().await {
                    let Ok(info) = msg.info() else { continue };
                    let run_id = wire::run_id(&name, info.stream_sequence);
                    // Lost publishes show up as missing runs in the bench.
                    let _ = nats.publish(started.clone(), run_id.clone().into()).await;
                    let _ = msg.ack().await;
                    let notice = wire::completion_notice(&run_id, wire::SUCCEEDED);
                    let _ = nats.publish(subjects.done(), notice.into()).await;
                }
            }
        }));
    }
    nats.flush().await?;
    Ok(loops)
}
