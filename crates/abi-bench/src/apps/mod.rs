//! `abi-bench apps`: web app hosts side by side on one nats-server and one
//! `abi-discovery` (leases, `authorize_app`), with one `abi-documents` on
//! SQLite beside them ([`crate::platform`], shared with `abi-bench agents`
//! and `abi-bench jobs`; no app touches it).
//!
//! Targets, one after another, each its own process:
//!
//! 1. **raw request-reply floor**: `abi-bench apps --serve raw`, one core
//!    NATS subscription answering every request with 1 KiB (kept running:
//!    each host's GET one at a time follows one of its request-replies);
//! 2. **ours**: `abi-bench apps --serve ours`, a module under
//!    `abi_sdk::Runner` whose `AppHost` serves one app, an axum router:
//!    `/kib` (1 KiB), `/download?bytes=N` (a body streamed as it is
//!    produced) and `/upload` (counts the bytes of the body stream);
//! 3. **reference**: `python/app_bench_peer.py serve`, a module under
//!    naas_abi_sdk's `run_module` whose `AppHost` serves the same three
//!    routes with an ASGI app (the upload read from `receive()`).
//!
//! The caller is the same for every target: our `AppClient` as module
//! `bench.caller` (`call` for GETs and uploads, `call_streaming` for
//! downloads, read chunk by chunk and discarded).
//!
//! Then an overflowed document put ([`overflow`]): ours (`abi-documents` and
//! our `DocumentClient`) and the reference's (its document service with the
//! overflow host its engine runs, and its Python client), each on a
//! nats-server of its own: the document subjects carry no project.

mod calls;
mod overflow;
mod phases;
mod report;
mod serve;
mod targets;

use std::path::Path;
use std::time::Instant;

use abi_sdk::{DiscoveryClient, TokenSource};
use anyhow::Context as _;

use crate::platform::{self, Platform};
use crate::service;
use report::{Column, Kind};

/// The project every target serves in (the nats-server is the bench's own).
const PROJECT: &str = "bench";
/// The secret tokens and module keys are signed with (32+ bytes, as HS256 wants).
const SECRET: &str = "abi-bench-apps-secret-0123456789abcdef!";
/// The app every module serves.
const APP: &str = "bench";
/// The module the bench calls as.
const CALLER: &str = "bench.caller";
/// The raw floor's subject.
const RAW_SUBJECT: &str = "bench.apps.raw.kib";
/// The size of a GET's response, the raw floor's reply too.
const KIB: usize = 1024;
/// The size of the chunks a download's app produces (a streamed body's
/// largest chunk on a broker of 1 MiB max payload).
const FRAME_BYTES: usize = 256 * 1024;
/// Bytes in a MiB.
const MIB: u64 = 1024 * 1024;

/// Flags of `abi-bench apps`: those of `abi-bench agents` (the same run
/// shapes: `--quick`, `--smoke`, `--iters`, `--repeats`, ...), and the
/// sizes of the streams and the puts.
#[derive(Debug, Clone, clap::Args)]
// The agents' flags already form the group `Args`.
#[group(skip)]
#[command(
    mut_arg("reference_script", |arg| arg.help(
        "The reference module script (default: crates/abi-bench/python/app_bench_peer.py)"
    )),
    mut_arg("repeats", |arg| arg.help(
        "Runs of each throughput cell and of each kind of stream, reported as the median \
         and the spread (default 3; --smoke 1)"
    )),
)]
pub struct Args {
    /// GETs are the agents' calls: per latency cell, per throughput cell.
    #[command(flatten)]
    pub run: crate::agents::Args,
    /// MiB of each download and upload (default 256; --quick 64; --smoke 4).
    #[arg(long, value_name = "MIB")]
    pub stream_mib: Option<u64>,
    /// MiB of each overflowed document put (default 8; --smoke 2).
    #[arg(long, value_name = "MIB")]
    pub put_mib: Option<u64>,
    /// Measured puts per document target, after one unmeasured (default 5; --smoke 2).
    #[arg(long, value_name = "N")]
    pub puts: Option<usize>,
}

impl Args {
    /// `explicit`, else the value for a smoke, a quick or a full run.
    fn by_run<T: Copy>(&self, explicit: Option<T>, [smoke, quick, full]: [T; 3]) -> T {
        explicit.unwrap_or(match (self.run.smoke, self.run.quick) {
            (true, _) => smoke,
            (_, true) => quick,
            _ => full,
        })
    }

    /// Concurrent callers of the throughput cells.
    pub fn callers(&self) -> usize {
        self.run.callers.max(1)
    }

    /// Bytes of each download and upload.
    pub fn stream_bytes(&self) -> u64 {
        self.by_run(self.stream_mib, [4, 64, 256]).max(1) * MIB
    }

    /// Bytes of the text of each overflowed put.
    pub fn put_bytes(&self) -> u64 {
        self.by_run(self.put_mib, [2, 8, 8]).max(2) * MIB
    }

    /// Measured puts per document target.
    pub fn puts(&self) -> usize {
        self.by_run(self.puts, [2, 5, 5]).max(1)
    }
}

/// The module key of `identity` under the bench's secret.
fn module_key(identity: &str) -> anyhow::Result<String> {
    abi_auth::module_key(SECRET, identity).context("module key")
}

/// The whole run: each target in turn on one platform, then the document
/// puts, returned as markdown (the notes, the table, the verdicts). With
/// `--serve`, this process is one target instead: it serves until SIGTERM
/// and exits.
///
/// # Errors
///
/// A process or the platform that cannot start, or a bus that cannot be
/// reached; a failed call is counted in the table instead.
///
/// # Cancel safety
///
/// Not cancel safe: the processes started are killed (`kill_on_drop`, the
/// nats-servers' `Drop`) rather than stopped, and nothing is reported.
pub async fn run(args: &Args) -> anyhow::Result<String> {
    if let Some([kind, url]) = args.run.serve.as_deref() {
        serve::run(kind, url).await?;
        // The parent reads nothing from us: exit before main prints an
        // (empty) table.
        std::process::exit(0);
    }
    eprintln!(
        "abi-bench apps: {} GETs one at a time, {:.1} s per throughput cell with {} callers, \
         {} MiB streams, {} MiB puts",
        args.run.iters(),
        args.run.duration().as_secs_f64(),
        args.callers(),
        args.stream_bytes() / MIB,
        args.put_bytes() / MIB,
    );
    let started = Instant::now();
    let mut loads = vec![platform::load_average()];
    let script = args.run.reference_script.clone().unwrap_or_else(|| {
        service::workspace_root().join("crates/abi-bench/python/app_bench_peer.py")
    });
    let python = args.run.bins.python();
    let [raw, mut ours, mut reference] = hosts(args, &python, &script).await?;
    loads.push(platform::load_average());

    let documents = overflow::Documents {
        bins: &args.run.bins,
        python: &python,
        script: &script,
        args,
    };
    ours.put = Some(documents.ours().await?);
    if reference.skipped.is_none() {
        reference.put = Some(documents.reference().await?);
    }
    loads.push(platform::load_average());

    let notes = report::notes(args, started.elapsed(), &loads);
    let verdicts = report::verdicts(&ours, &reference, args.callers());
    let table = report::table(&[raw, ours, reference], args);
    Ok(format!("{notes}\n\n{table}\n{verdicts}"))
}

/// The three app targets, one after another on one platform: the raw
/// floor, our host, the reference's.
async fn hosts(args: &Args, python: &Path, script: &Path) -> anyhow::Result<[Column; 3]> {
    let key = module_key(CALLER)?;
    let platform = Platform::start(args.run.bins.clone(), PROJECT, SECRET).await?;
    let url = platform.url();
    let nats = async_nats::connect(&url).await.context("connect to nats")?;
    let caller = DiscoveryClient::new(nats.clone(), PROJECT, TokenSource::module_key(CALLER, key));
    let bench = phases::Bench {
        platform: &platform,
        nats: &nats,
        caller: &caller,
        args,
    };
    let mut raw = Column::new("raw request-reply floor", Kind::Floor);
    let floor = bench.floor(targets::rust("raw", &url)?, &mut raw).await?;
    let mut ours = Column::new("ours (Rust AppHost)", Kind::Ours);
    let command = targets::rust("ours", &url)?;
    bench.host(command, serve::OURS_MODULE, &mut ours).await?;
    let mut reference = Column::new("reference (Python AppHost)", Kind::Reference);
    if args.run.skip_reference {
        reference.skipped = Some("--skip-reference".to_owned());
    } else {
        let command = targets::reference(python, script, &url)?;
        bench
            .host(command, serve::REFERENCE_MODULE, &mut reference)
            .await?;
    }
    floor.svc.stop().await;
    platform.stop().await;
    Ok([raw, ours, reference])
}
