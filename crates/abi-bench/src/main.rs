//! `abi-bench`: one table comparing raw NATS request-reply, raw KV
//! compare-and-swap, our `abi-discovery` and the Python reference, measured in
//! one run on one nats-server it starts itself.
//!
//! `abi-bench documents` does the same for the document service: raw
//! request-reply, `abi-documents` on SQLite and on PostgreSQL, and the Python
//! reference on its SQLite adapter (see [`documents`]).
//!
//! The tables go to stdout (markdown), progress to stderr. See
//! `docs/benchmarks.md` for what each row means and the targets.

mod agents;
mod apps;
mod console;
mod disk;
mod documents;
mod jobs;
mod measure;
mod platform;
mod report;
mod runs;
mod service;
mod wire;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// mimalloc rather than glibc's malloc: per-thread free lists instead of
/// arenas behind locks (see the workspace `Cargo.toml`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Live-instance counts the latency rows are measured at.
pub const LEVELS: [usize; 3] = [1, 64, 256];

/// Command-line flags.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "abi-bench",
    about = "Discovery latency/throughput: raw NATS, raw KV CAS, abi-discovery, Python reference",
    args_conflicts_with_subcommands = true
)]
pub struct Args {
    /// Another benchmark than discovery's (the default run, with no subcommand).
    #[command(subcommand)]
    pub command: Option<Bench>,
    /// A short run (under a minute): 100 calls per latency cell, 3 s of throughput.
    #[arg(long, conflicts_with = "smoke")]
    pub quick: bool,
    /// A correctness run only (a few calls per cell): checks the table is whole.
    #[arg(long)]
    pub smoke: bool,
    /// Calls per latency cell (default 500; --quick 100; --smoke 3).
    #[arg(long)]
    pub iters: Option<usize>,
    /// Seconds of the throughput phase (default 10; --quick 3; --smoke 0.3).
    #[arg(long)]
    pub duration_secs: Option<f64>,
    /// Concurrent callers of the throughput phase.
    #[arg(long, default_value_t = 64)]
    pub callers: usize,
    /// Concurrent registrations while filling the registry (not measured).
    #[arg(long, default_value_t = 16)]
    pub fill_concurrency: usize,
    /// Leave the Python reference out (its column reads "skipped").
    #[arg(long)]
    pub skip_reference: bool,
    /// The `abi-discovery` binary (default: next to this executable).
    #[arg(long, env = "ABI_DISCOVERY_BIN")]
    pub discovery_bin: Option<PathBuf>,
    /// Python with naas_abi_core installed (default: <workspace>/.venv/bin/python).
    #[arg(long, env = "ABI_PYTHON")]
    pub python: Option<PathBuf>,
    /// The reference owner script (default: <workspace>/tests/interop/reference_owner.py).
    #[arg(long)]
    pub reference_script: Option<PathBuf>,
}

/// The benchmarks besides the default (discovery) run.
#[derive(Debug, Clone, Subcommand)]
pub enum Bench {
    /// Document service: raw NATS request-reply, abi-documents on SQLite and on
    /// PostgreSQL, the Python reference on SQLite.
    Documents(documents::Args),
    /// Agent and chat model hosts: invoke round trips and throughput of a
    /// raw request-reply floor, our ModelHost and AgentHost, the Python
    /// reference's.
    Agents(agents::Args),
    /// Job hosts: trigger-to-start latency and throughput of a raw
    /// JetStream floor, our JobHost and the Python reference's.
    Jobs(jobs::Args),
    /// Web app hosts: GETs of 1 KiB (round trips and throughput) against a
    /// raw request-reply floor, streamed downloads and uploads, and an
    /// overflowed document put, ours and the Python reference's.
    Apps(apps::Args),
    /// The web console (`abictl console`) under 250 instances: its pages'
    /// GETs, its event stream's update latency beside a raw KV watcher's,
    /// its CPU per update and memory per stream.
    Console(console::Args),
}

impl Args {
    /// Calls per latency cell.
    pub fn iters(&self) -> usize {
        self.iters.unwrap_or(if self.smoke {
            3
        } else if self.quick {
            100
        } else {
            500
        })
    }

    /// Length of the throughput phase.
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let table = match &args.command {
        Some(Bench::Documents(documents)) => documents::run(documents).await?,
        Some(Bench::Jobs(jobs)) => jobs::run(jobs).await?,
        Some(Bench::Agents(agents)) => agents::run(agents).await?,
        Some(Bench::Apps(apps)) => apps::run(apps).await?,
        Some(Bench::Console(console)) => console::run(console).await?,
        None => runs::run_all(&args).await?,
    };
    println!("{table}");
    Ok(())
}
