//! What one call costs the platform's services: the requests a host sends
//! to the document service and to discovery per chat or per agent invoke,
//! counted by operation from copies of them (the bench subscribes to the
//! services' subjects too, so it sees every request sent there).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_wire::documents::{self, Operation};
use anyhow::Context as _;
use futures::StreamExt as _;

/// Calls of the counting pass, one at a time.
pub const COUNTED_CALLS: usize = 20;
/// The pass ends when no request was seen for this long after its last call
/// (a host may write after it answered).
const QUIET: Duration = Duration::from_millis(300);

/// Requests per call, by service and operation (`documents insert`, ...).
pub type PerCall = BTreeMap<String, f64>;

/// Runs `op` [`COUNTED_CALLS`] times, one at a time, while counting the
/// requests sent to the document service and to discovery of `project`:
/// the requests per call, by service and operation.
///
/// # Errors
///
/// When the subscriptions cannot be made.
///
/// # Cancel safety
///
/// Not cancel safe: dropped before the end, the counting tasks are not aborted and keep their
/// subscriptions open, detached, until the connection closes.
pub async fn per_call<F, Fut, T>(
    nats: &async_nats::Client,
    project: &str,
    mut op: F,
) -> anyhow::Result<PerCall>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let mut subjects: Vec<(String, &'static str)> = Operation::SERVED
        .iter()
        .map(|op| (documents::operation(*op), "documents"))
        .collect();
    subjects.push((
        abi_wire::discovery::operation_named(project, ">"),
        "discovery",
    ));
    let seen: Arc<Mutex<(BTreeMap<String, u64>, Instant)>> =
        Arc::new(Mutex::new((BTreeMap::new(), Instant::now())));
    let mut counting = Vec::new();
    for (subject, service) in subjects {
        let mut sub = nats
            .subscribe(subject.clone())
            .await
            .with_context(|| format!("subscribe to {subject}"))?;
        let seen = seen.clone();
        counting.push(tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let operation = msg.subject.rsplit('.').next().unwrap_or("?").to_owned();
                if let Ok(mut seen) = seen.lock() {
                    *seen.0.entry(format!("{service} {operation}")).or_default() += 1;
                    seen.1 = Instant::now();
                }
            }
        }));
    }
    nats.flush().await.context("flush the subscriptions")?;
    for _ in 0..COUNTED_CALLS {
        op().await;
    }
    loop {
        let last = seen.lock().map(|s| s.1).unwrap_or_else(|_| Instant::now());
        let idle = last.elapsed();
        if idle >= QUIET {
            break;
        }
        tokio::time::sleep(QUIET - idle).await;
    }
    for task in counting {
        task.abort();
    }
    let counts = seen.lock().map(|s| s.0.clone()).unwrap_or_default();
    Ok(counts
        .into_iter()
        .map(|(k, n)| (k, n as f64 / COUNTED_CALLS as f64))
        .collect())
}

/// `documents 7.0 (get 1.0, insert 2.0, ...); discovery 0.1 (...)`.
pub fn describe(per_call: &PerCall) -> String {
    let mut parts = Vec::new();
    for service in ["documents", "discovery"] {
        let ops: Vec<(&str, f64)> = per_call
            .iter()
            .filter_map(|(k, n)| Some((k.strip_prefix(service)?.trim(), *n)))
            .collect();
        let total: f64 = ops.iter().map(|(_, n)| n).sum();
        let detail: Vec<String> = ops.iter().map(|(op, n)| format!("{op} {n:.2}")).collect();
        if detail.is_empty() {
            parts.push(format!("{service} 0"));
        } else {
            parts.push(format!("{service} {total:.2} ({})", detail.join(", ")));
        }
    }
    parts.join("; ")
}
