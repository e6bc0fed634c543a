//! Latency samples, percentiles, sustained throughput, and a process's CPU
//! time and peak memory from `/proc`.

use std::future::Future;
use std::time::{Duration, Instant};

/// Failure labels the bench gives a call itself (beside the wire codes a
/// service answers with): a reply that is not the expected one.
pub const WRONG_ANSWER: &str = "WRONG_ANSWER";
/// No reply within the bench's deadline for one call.
pub const CALL_TIMEOUT: &str = "CALL_TIMEOUT";
/// A published value that never came back on its echo subject.
pub const NO_ECHO: &str = "NO_ECHO";

/// How long [`echo_ready`] waits for a new echo responder to answer.
const ECHO_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits until `client` gets an answer on `subject`, where an echo responder
/// on another connection just subscribed: a flush sends that connection's
/// `SUB` but does not wait for the server to process it, so a first request
/// could still meet "no responders" (CI saw one).
///
/// # Errors
///
/// When nobody answers within [`ECHO_READY_TIMEOUT`].
///
/// # Cancel safety
///
/// Cancel safe.
pub async fn echo_ready(client: &async_nats::Client, subject: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + ECHO_READY_TIMEOUT;
    loop {
        let probe = client.request(subject.to_owned(), bytes::Bytes::new());
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), probe).await {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the echo responder on {subject} never answered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// p50 and p99 of a set of latencies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median.
    pub p50: Duration,
    /// 99th percentile (nearest rank).
    pub p99: Duration,
}

/// Latencies of the calls that succeeded, and how many failed.
#[derive(Debug, Default)]
pub struct Samples {
    /// One per successful call.
    pub latencies: Vec<Duration>,
    /// Failed calls.
    pub errors: u64,
}

impl Samples {
    /// p50/p99, or `None` when no call succeeded.
    pub fn summary(&self) -> Option<Summary> {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        Some(Summary {
            p50: percentile(&sorted, 50)?,
            p99: percentile(&sorted, 99)?,
        })
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[Duration], pct: usize) -> Option<Duration> {
    let rank = (sorted.len() * pct).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// Runs `op(k)` for `k` in `0..iters`, one at a time, and collects the
/// latencies it reports. The first error is printed to stderr.
///
/// # Cancel safety
///
/// Cancel safe: it holds only its samples, lost when dropped; `op`'s call in flight is dropped
/// with whatever that leaves.
pub async fn sequential<F, Fut>(what: &str, iters: usize, mut op: F) -> Samples
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<Duration>>,
{
    let mut samples = Samples {
        latencies: Vec::with_capacity(iters),
        errors: 0,
    };
    for k in 0..iters {
        match op(k).await {
            Ok(latency) => samples.latencies.push(latency),
            Err(error) => {
                if samples.errors == 0 {
                    eprintln!("  {what}: first error: {error:#}");
                }
                samples.errors += 1;
            }
        }
    }
    samples
}

/// Successful operations per second and failures, with `callers` concurrent
/// loops calling `op(caller, k)` until `duration` has passed.
///
/// # Cancel safety
///
/// Cancel safe: it holds only its counts, lost when dropped; the callers' calls in flight are
/// dropped with whatever those leave.
pub async fn throughput<F, Fut>(what: &str, callers: usize, duration: Duration, op: F) -> (f64, u64)
where
    F: Fn(usize, usize) -> Fut,
    Fut: Future<Output = anyhow::Result<Duration>>,
{
    let start = Instant::now();
    let deadline = start + duration;
    let loops = (0..callers).map(|caller| {
        let op = &op;
        async move {
            let (mut ok, mut errors) = (0u64, 0u64);
            let mut k = 0;
            while Instant::now() < deadline {
                match op(caller, k).await {
                    Ok(_) => ok += 1,
                    Err(error) => {
                        if errors == 0 && caller == 0 {
                            eprintln!("  {what}: first error: {error:#}");
                        }
                        errors += 1;
                    }
                }
                k += 1;
            }
            (ok, errors)
        }
    });
    let results = futures::future::join_all(loops).await;
    // Calls in flight at the deadline finish after it: count the whole span.
    let elapsed = start.elapsed().as_secs_f64();
    let ok: u64 = results.iter().map(|r| r.0).sum();
    let errors = results.iter().map(|r| r.1).sum();
    (ok as f64 / elapsed, errors)
}

/// CPU time (user + system) a process has used so far, in seconds.
///
/// # Errors
///
/// When `/proc/<pid>/stat` cannot be read or parsed.
pub fn cpu_seconds(pid: u32, ticks_per_second: f64) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces; the fields after it do not.
    let after = stat
        .rfind(')')
        .map(|i| &stat[i + 1..])
        .ok_or_else(|| anyhow::anyhow!("unexpected /proc/{pid}/stat"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime), counted from 1 with `state` as field 3.
    let field = |n: usize| -> anyhow::Result<f64> {
        let value = fields
            .get(n - 3)
            .ok_or_else(|| anyhow::anyhow!("short /proc/{pid}/stat"))?;
        Ok(value.parse::<f64>()?)
    };
    Ok((field(14)? + field(15)?) / ticks_per_second)
}

/// Peak resident set size (`VmHWM`) of a process, in MiB.
///
/// # Errors
///
/// When `/proc/<pid>/status` cannot be read or has no `VmHWM`.
pub fn peak_rss_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| anyhow::anyhow!("no VmHWM in /proc/{pid}/status"))?
        .parse::<f64>()?;
    Ok(kib / 1024.0)
}

/// Clock ticks per second for `/proc` times (`getconf CLK_TCK`; 100, the
/// Linux value on every common architecture, if that fails).
pub fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let ms = |v: u64| Duration::from_millis(v);
        let samples = Samples {
            latencies: (1..=100).rev().map(ms).collect(),
            errors: 0,
        };
        let summary = samples.summary();
        assert_eq!(
            summary,
            Some(Summary {
                p50: ms(50),
                p99: ms(99)
            })
        );
        let one = Samples {
            latencies: vec![ms(7)],
            errors: 0,
        };
        assert_eq!(one.summary().map(|s| s.p99), Some(ms(7)));
        assert_eq!(Samples::default().summary(), None);
    }

    #[test]
    fn reads_own_proc_stats() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid, ticks_per_second()).is_ok());
        assert!(peak_rss_mib(pid).is_ok_and(|mib| mib > 0.0));
    }
}
