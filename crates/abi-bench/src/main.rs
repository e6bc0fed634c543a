//! `abi-bench`: one table comparing raw NATS request-reply, raw KV
//! compare-and-swap, our `abi-discovery` and the Python reference, measured in
//! one run on one nats-server it starts itself.
//!
//! The table goes to stdout (markdown), progress to stderr. See
//! `docs/benchmarks.md` for what each row means and the targets.

mod measure;
mod report;
mod runs;
mod service;
mod wire;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// Live-instance counts the latency rows are measured at.
pub const LEVELS: [usize; 3] = [1, 64, 256];

/// Command-line flags.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "abi-bench",
    about = "Discovery latency/throughput: raw NATS, raw KV CAS, abi-discovery, Python reference"
)]
pub struct Args {
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
    let table = runs::run_all(&args).await?;
    println!("{table}");
    Ok(())
}
