//! The two phases every call kind goes through, measured identically: a
//! latency phase (one call at a time, after unmeasured warm-up calls) and a
//! throughput phase (concurrent callers, each looping until the end of the
//! phase), with every failure counted by its wire code.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::measure::{Samples, Summary};

/// Unmeasured calls before the latency phase (first-call costs: lookups,
/// authorizations, collections, connection warm-up).
pub const WARMUP: usize = 10;

/// Why a call failed: its wire code, or the kind of failure without one.
pub type Code = String;

/// What one call kind measured against one target.
#[derive(Debug, Default, Clone)]
pub struct Measured {
    /// p50/p99 one call at a time.
    pub latency: Option<Summary>,
    /// Successful calls per second with the phase's callers: the median of
    /// its runs.
    pub rate: Option<f64>,
    /// Every throughput run's rate, in the order they ran.
    pub rates: Vec<f64>,
    /// Successful calls of the throughput phase, over all its runs.
    pub succeeded: u64,
    /// Failures of both phases by code.
    pub failures: BTreeMap<Code, u64>,
}

impl Measured {
    fn fail(&mut self, what: &str, code: Code) {
        if self.failures.is_empty() {
            eprintln!("  {what}: first failure: {code}");
        }
        *self.failures.entry(code).or_default() += 1;
    }
}

/// `WARMUP` then `iters` calls of `op(k)`, one at a time: the latency of
/// each measured call that succeeded.
///
/// # Cancel safety
///
/// Cancel safe: it holds only its samples; dropped, it drops `op`'s call in flight, and `out`
/// keeps the failures counted so far but gets no latency.
pub async fn latency<F, Fut>(what: &str, iters: usize, out: &mut Measured, mut op: F)
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<(), Code>>,
{
    let mut samples = Samples::default();
    for k in 0..WARMUP + iters {
        let sent = Instant::now();
        let result = op(k).await;
        if k < WARMUP {
            continue;
        }
        match result {
            Ok(()) => samples.latencies.push(sent.elapsed()),
            Err(code) => out.fail(what, code),
        }
    }
    out.latency = samples.summary();
}

/// `callers` concurrent loops, caller `c` calling `op(c, k)` until
/// `duration` has passed: successful calls per second over the whole span
/// (calls in flight at the deadline finish after it and count).
///
/// # Cancel safety
///
/// Cancel safe: `out` is written only at the end, so a dropped call leaves it as it was; the
/// callers' calls in flight are dropped.
pub async fn throughput<F, Fut>(
    what: &str,
    callers: usize,
    duration: Duration,
    out: &mut Measured,
    op: F,
) where
    F: Fn(usize, usize) -> Fut,
    Fut: Future<Output = Result<(), Code>>,
{
    let start = Instant::now();
    let deadline = start + duration;
    let loops = (0..callers).map(|caller| {
        let op = &op;
        async move {
            let mut ok = 0u64;
            let mut failed: BTreeMap<Code, u64> = BTreeMap::new();
            let mut k = 0;
            while Instant::now() < deadline {
                match op(caller, k).await {
                    Ok(()) => ok += 1,
                    Err(code) => *failed.entry(code).or_default() += 1,
                }
                k += 1;
            }
            (ok, failed)
        }
    });
    let results = futures::future::join_all(loops).await;
    let elapsed = start.elapsed().as_secs_f64().max(1e-9);
    let mut ok = 0;
    for (n, failed) in results {
        ok += n;
        for (code, count) in failed {
            if out.failures.is_empty() {
                eprintln!("  {what}: failures: {code}");
            }
            *out.failures.entry(code).or_default() += count;
        }
    }
    out.succeeded += ok;
    out.rates.push(ok as f64 / elapsed);
    out.rate = crate::report::median(&out.rates);
}
