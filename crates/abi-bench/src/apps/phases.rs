//! What each target goes through: GETs one at a time, then with the
//! concurrent callers (with the CPU each process spends); for the hosts,
//! then downloads and uploads with the peak memory of the host and of the
//! caller.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use abi_sdk::DiscoveryClient;
use abi_sdk::apps::AppsExt as _;
use tokio::process::Command;

use super::report::{Column, Kind, Transfer};
use super::targets::{self, Target};
use super::{APP, Args, calls};
use crate::measure::{self, Samples};
use crate::platform::{CpuSplit, Platform};

/// Unmeasured GETs before the measured ones (first-call costs: the
/// instance lookup, `authorize_app`, connection warm-up).
pub const WARMUP: usize = 10;
/// The deadline of one GET.
const GET_TIMEOUT: Duration = Duration::from_secs(30);
/// The deadline of a probe GET while a host starts.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The deadline of one download (to its first chunk) or upload (whole).
const STREAM_TIMEOUT: Duration = Duration::from_secs(600);

/// What every target's phases use.
pub struct Bench<'a> {
    /// The shared services.
    pub platform: &'a Platform,
    /// The bench's connection (the raw floor's caller).
    pub nats: &'a async_nats::Client,
    /// Discovery as the caller module.
    pub caller: &'a DiscoveryClient,
    /// The run's flags.
    pub args: &'a Args,
}

impl Bench<'_> {
    /// The raw floor: starts it and measures request-reply of 1 KiB. It
    /// is returned running: the hosts' GETs one at a time are each paired
    /// with one of its request-replies.
    ///
    /// # Errors
    ///
    /// When it does not start.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the floor is killed on drop and keeps nothing.
    pub async fn floor(&self, command: Command, column: &mut Column) -> anyhow::Result<Target> {
        let nats = self.nats;
        let target = targets::spawn(command, column.name, || async {
            calls::raw_get(nats).await.is_ok()
        })
        .await?;
        self.gets(&target, column, || calls::raw_get(nats)).await;
        Ok(target)
    }

    /// A host: starts it (`command`, serving as `module`), measures GETs,
    /// downloads and uploads through it, stops it.
    ///
    /// # Errors
    ///
    /// When it does not start or never answers a GET.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped mid-phase, the column is half filled and
    /// the host is killed rather than drained.
    pub async fn host(
        &self,
        command: Command,
        module: &str,
        column: &mut Column,
    ) -> anyhow::Result<()> {
        let app = self.caller.module(module, 1).web_app(APP);
        let probe = app.clone().timeout(PROBE_TIMEOUT);
        let target = targets::spawn(command, column.name, || async {
            calls::get(&probe).await.is_ok()
        })
        .await?;
        let gets = &app.clone().timeout(GET_TIMEOUT);
        self.gets(&target, column, || calls::get(gets)).await;
        let streams = &app.timeout(STREAM_TIMEOUT);
        let bytes = self.args.stream_bytes();
        column.download = Some(
            self.streamed(&target, column, "download", || {
                calls::download(streams, bytes)
            })
            .await,
        );
        column.upload = Some(
            self.streamed(&target, column, "upload", || calls::upload(streams, bytes))
                .await,
        );
        target.svc.stop().await;
        Ok(())
    }

    /// GETs of 1 KiB (`get`): one at a time after a warm-up (a host's
    /// each after one raw request-reply, the floor measured in step with
    /// it, so a change of the machine's load moves both alike), then with
    /// the concurrent callers for each repeat, with the CPU per GET of each
    /// process over the repeats.
    async fn gets<F, Fut>(&self, target: &Target, column: &mut Column, get: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = anyhow::Result<Duration>>,
    {
        let (name, args) = (column.name, self.args);
        eprintln!("{name}: GET one at a time x{}", args.run.iters());
        let warmup = measure::sequential(name, WARMUP, |_| get()).await;
        let paired = Mutex::new(Samples::default());
        let interleaved = column.kind != Kind::Floor;
        let samples = measure::sequential(name, args.run.iters(), |_| async {
            if interleaved {
                let floor = calls::raw_get(self.nats).await;
                // A poisoned lock only means a panic elsewhere; the samples still hold.
                let mut paired = paired.lock().unwrap_or_else(|e| e.into_inner());
                match floor {
                    Ok(latency) => paired.latencies.push(latency),
                    Err(_) => paired.errors += 1,
                }
            }
            get().await
        })
        .await;
        column.get = samples.summary();
        let paired = paired.into_inner().unwrap_or_else(|e| e.into_inner());
        column.paired_floor = paired.summary();
        column.failures += warmup.errors + samples.errors + paired.errors;
        let before = CpuSplit::now(self.platform, &target.svc);
        let succeeded = AtomicU64::new(0);
        for repeat in 1..=args.run.repeats() {
            eprintln!(
                "{name}: GET with {} callers for {:.1} s (run {repeat} of {})",
                args.callers(),
                args.run.duration().as_secs_f64(),
                args.run.repeats()
            );
            let (rate, errors) =
                measure::throughput(name, args.callers(), args.run.duration(), |_, _| {
                    counted(&succeeded, get())
                })
                .await;
            eprintln!("  {rate:.0} GETs/s");
            column.rates.push(rate);
            column.failures += errors;
        }
        let after = CpuSplit::now(self.platform, &target.svc);
        let gets = succeeded.load(Ordering::Relaxed);
        column.cpu_per_get = after
            .per_run_since(&before, gets)
            .zip(after.discovery_per_run_since(&before, gets))
            .map(|([host, _documents, nats, bench], discovery)| [host, discovery, nats, bench]);
    }

    /// `repeats` transfers of the stream size by `transfer`, one at a time:
    /// their MB/s, and the peak memory of the host and of this process
    /// over all of them.
    async fn streamed<F, Fut>(
        &self,
        target: &Target,
        column: &mut Column,
        what: &str,
        transfer: F,
    ) -> Transfer
    where
        F: Fn() -> Fut,
        Fut: Future<Output = anyhow::Result<Duration>>,
    {
        let (name, args) = (column.name, self.args);
        let me = std::process::id();
        let reset = targets::reset_peak(target.pid).and_then(|()| targets::reset_peak(me));
        if let Err(error) = &reset {
            eprintln!("  {name}: no peak RSS: {error:#}");
        }
        eprintln!(
            "{name}: {what} of {} MiB x{}",
            args.stream_bytes() / super::MIB,
            args.run.repeats()
        );
        let samples: Samples = measure::sequential(name, args.run.repeats(), |_| transfer()).await;
        column.failures += samples.errors;
        let megabytes = args.stream_bytes() as f64 / 1e6;
        let rates: Vec<f64> = samples
            .latencies
            .iter()
            .map(|t| megabytes / t.as_secs_f64().max(1e-9))
            .collect();
        if let Some(rate) = crate::report::median(&rates) {
            eprintln!("  {rate:.0} MB/s");
        }
        let peak = |pid| {
            reset
                .is_ok()
                .then(|| measure::peak_rss_mib(pid).ok())
                .flatten()
        };
        Transfer {
            rates,
            host_peak_mib: peak(target.pid),
            caller_peak_mib: peak(me),
        }
    }
}

/// `call`, counted in `succeeded` when it succeeds.
async fn counted(
    succeeded: &AtomicU64,
    call: impl Future<Output = anyhow::Result<Duration>>,
) -> anyhow::Result<Duration> {
    let result = call.await;
    if result.is_ok() {
        succeeded.fetch_add(1, Ordering::Relaxed);
    }
    result
}
