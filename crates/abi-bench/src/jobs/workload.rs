//! The two phases every target goes through, measured identically: the
//! caller is the same `JobClient`, and the "started" messages and
//! completion notices are stamped by this process the moment they arrive.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use abi_sdk::JobClient;
use anyhow::Context as _;
use futures::StreamExt as _;
use serde_json::json;
use tokio::sync::mpsc;

use crate::measure::Samples;

/// Unmeasured triggers before the latency phase (first-run costs: imports,
/// prepared statements, connection warm-up).
pub const WARMUP: usize = 10;
/// How long one latency trigger may take to start and end.
const RUN_TIMEOUT: Duration = Duration::from_secs(30);
/// A throughput cell ends when no notice arrived for this long.
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A message's payload and the instant it arrived.
type Stamped = (String, Instant);

/// Subscribes to `subjects` and forwards every message, stamped on
/// arrival, to the receiver of its subject: one task stamps them all, so
/// two messages are stamped in the order they arrived.
async fn stamped<const N: usize>(
    client: &async_nats::Client,
    subjects: [String; N],
) -> anyhow::Result<(
    [mpsc::UnboundedReceiver<Stamped>; N],
    tokio::task::JoinHandle<()>,
)> {
    let mut subs = Vec::with_capacity(N);
    for (i, subject) in subjects.into_iter().enumerate() {
        let sub = client
            .subscribe(subject.clone())
            .await
            .with_context(|| format!("subscribe to {subject}"))?;
        subs.push(sub.map(move |msg| (i, msg)));
    }
    client.flush().await.context("flush the subscriptions")?;
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..N).map(|_| mpsc::unbounded_channel()).unzip();
    let mut all = futures::stream::select_all(subs);
    let forwarding = tokio::spawn(async move {
        while let Some((i, msg)) = all.next().await {
            let at = Instant::now();
            let text = String::from_utf8_lossy(&msg.payload).into_owned();
            if senders[i].send((text, at)).is_err() {
                break;
            }
        }
    });
    let receivers = receivers
        .try_into()
        .map_err(|_| anyhow::anyhow!("one receiver per subject"))?;
    Ok((receivers, forwarding))
}

/// A completion notice's run id and status.
fn notice(text: &str) -> Option<(String, String)> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    Some((
        value["run_id"].as_str()?.to_owned(),
        value["status"].as_str()?.to_owned(),
    ))
}

/// Waits for the message whose key (by `key_of`) is `want`, up to
/// `RUN_TIMEOUT`; earlier ones (of warm-up or timed-out runs) are skipped.
async fn arrival(
    rx: &mut mpsc::UnboundedReceiver<Stamped>,
    want: &str,
    key_of: impl Fn(&str) -> Option<(String, String)>,
) -> Option<(Instant, String)> {
    tokio::time::timeout(RUN_TIMEOUT, async {
        while let Some((text, at)) = rx.recv().await {
            if let Some((key, extra)) = key_of(&text)
                && key == want
            {
                return Some((at, extra));
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
}

/// What the latency phase measured.
#[derive(Debug, Default)]
pub struct Latency {
    /// Trigger call to the handler's "started" message.
    pub start: Samples,
    /// Trigger call to the completion notice.
    pub done: Samples,
    /// Runs that did not start, did not end, or did not succeed.
    pub failed: u64,
}

/// `iters` triggers of `job` one at a time, each sent once the previous
/// run's completion notice arrived (the host is idle): the time from the
/// trigger call to the handler's announcement on `started`, and to the
/// completion notice.
///
/// # Errors
///
/// When the subscriptions cannot be made.
///
/// # Cancel safety
///
/// Not cancel safe: dropped mid-phase, a trigger already sent still runs on the host, and the
/// stamping task keeps its subscriptions until a message finds its receiver gone.
pub async fn latency(
    client: &async_nats::Client,
    job: &JobClient,
    started: &str,
    iters: usize,
) -> anyhow::Result<Latency> {
    let ([mut starts, mut dones], stamping) =
        stamped(client, [started.to_owned(), job.subjects().done()]).await?;
    let mut out = Latency::default();
    for k in 0..WARMUP + iters {
        let measured = k >= WARMUP;
        let sent = Instant::now();
        let run = match job.trigger(json!({"n": k}), None).await {
            Ok(run) => run,
            Err(error) => {
                if measured {
                    report_first(&mut out, &error);
                }
                continue;
            }
        };
        let run_id = run.run_id();
        let start = arrival(&mut starts, run_id, |t| Some((t.to_owned(), String::new()))).await;
        let done = arrival(&mut dones, run_id, notice).await;
        if !measured {
            continue;
        }
        match (start, done) {
            (Some((started_at, _)), Some((done_at, status)))
                if status == abi_wire::jobs::SUCCEEDED =>
            {
                out.start.latencies.push(started_at - sent);
                out.done.latencies.push(done_at - sent);
            }
            (start, done) => {
                let why = format!(
                    "run {run_id}: started {}, ended {:?}",
                    start.is_some(),
                    done.map(|d| d.1)
                );
                report_first(&mut out, &why);
            }
        }
    }
    stamping.abort();
    Ok(out)
}

fn report_first(out: &mut Latency, why: &dyn std::fmt::Display) {
    if out.failed == 0 {
        eprintln!("  latency: first failure: {why}");
    }
    out.failed += 1;
}

/// What one throughput cell measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cell {
    /// Successful runs per second, first publish to last notice.
    pub rate: f64,
    /// Triggers stored per second while publishing.
    pub publish_rate: f64,
    /// Runs that ended SUCCEEDED.
    pub succeeded: u64,
    /// Triggers not stored, runs that ended otherwise or never ended.
    pub failed: u64,
}

/// `triggers` triggers of `job` published by `publishers` concurrent
/// calls, while the completion notices are counted: successful runs per
/// second from the first publish to the last notice.
///
/// # Errors
///
/// When the notice subscription cannot be made.
///
/// # Cancel safety
///
/// Not cancel safe: dropped mid-cell, the triggers already stored still run on the host, and the
/// stamping task keeps its subscription until a notice finds its receiver gone.
pub async fn throughput(
    client: &async_nats::Client,
    job: &JobClient,
    triggers: usize,
    publishers: usize,
) -> anyhow::Result<Cell> {
    let ([mut dones], stamping) = stamped(client, [job.subjects().done()]).await?;
    let start = Instant::now();
    let publishing = async {
        let refused = futures::stream::iter(0..triggers)
            .map(|k| job.trigger(json!({"n": k}), None))
            .buffer_unordered(publishers)
            .filter(|sent| futures::future::ready(sent.is_err()))
            .count()
            .await;
        (refused, start.elapsed())
    };
    let counting = async {
        let mut statuses: HashMap<String, u64> = HashMap::new();
        let (mut ended, mut last) = (0usize, start);
        while ended < triggers {
            match tokio::time::timeout(STALL_TIMEOUT, dones.recv()).await {
                Ok(Some((text, at))) => {
                    if let Some((_, status)) = notice(&text) {
                        *statuses.entry(status).or_default() += 1;
                        ended += 1;
                        last = at;
                    }
                }
                _ => break,
            }
        }
        (statuses, last)
    };
    let ((refused, published_in), (statuses, last)) = tokio::join!(publishing, counting);
    stamping.abort();
    let succeeded = statuses
        .get(abi_wire::jobs::SUCCEEDED)
        .copied()
        .unwrap_or(0);
    let others: Vec<String> = statuses
        .iter()
        .filter(|(s, _)| s.as_str() != abi_wire::jobs::SUCCEEDED)
        .map(|(s, n)| format!("{s} x{n}"))
        .collect();
    if refused > 0 || !others.is_empty() {
        eprintln!("  {refused} triggers refused; other ends: {others:?}");
    }
    let elapsed = (last - start).as_secs_f64().max(1e-9);
    Ok(Cell {
        rate: succeeded as f64 / elapsed,
        publish_rate: (triggers - refused) as f64 / published_in.as_secs_f64().max(1e-9),
        succeeded,
        failed: triggers as u64 - succeeded,
    })
}
