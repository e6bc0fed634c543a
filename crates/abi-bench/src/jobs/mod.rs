//! `abi-bench jobs`: job hosts side by side on one nats-server, one
//! `abi-discovery` (which creates the jobs stream, as the platform does) and
//! one `abi-documents` on SQLite (the run records of every target), all
//! started by the bench.
//!
//! Targets, one after another, each its own process serving the same four
//! jobs of its own module (`latency` at `max_concurrency` 1, and `c1`,
//! `c16`, `c64` for the throughput cells, so no cell sees another's
//! triggers):
//!
//! 1. **raw JetStream floor**: `abi-bench jobs --serve raw`, a pull loop per
//!    job on the same consumer config that fetches `max_concurrency`
//!    messages, and per message publishes the "started" message, acks, and
//!    publishes a completion notice; no run record;
//! 2. **ours**: `abi-bench jobs --serve ours`, `abi_sdk::jobs::JobHost` with
//!    the reference's default options;
//! 3. **reference**: `python/job_bench_peer.py serve`, naas_abi_sdk's
//!    `JobHost` with its default options.
//!
//! Every handler's first action publishes its run id on a core-NATS subject
//! the bench listens on; the bench stamps messages as they arrive, on its
//! own clock, so both ends of every measurement are read in one process.

mod records;
mod report;
mod serve;
mod workload;

use std::path::PathBuf;
use std::time::Instant;

use abi_sdk::{JobClient, TokenSource};
use anyhow::Context as _;

use crate::platform::{self, CpuSplit};
use crate::service::{self, Service};
use report::Column;

/// The project every target serves in (the nats-server is the bench's own).
const PROJECT: &str = "bench";
/// The secret tokens are signed with (32+ bytes, as HS256 wants).
const SECRET: &str = "abi-bench-jobs-secret-0123456789abcdef!";
/// The job the latency phase triggers.
const LATENCY_JOB: &str = "latency";
/// The `max_concurrency` of each throughput cell (its job is `c<n>`).
pub const LEVELS: [u32; 3] = [1, 16, 64];

/// Flags of `abi-bench jobs`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// A short run: 100 latency triggers, 1,000 triggers per throughput cell.
    #[arg(long, conflicts_with = "smoke")]
    pub quick: bool,
    /// A correctness run only (20 latency triggers, 50 per cell): checks the table is whole.
    #[arg(long)]
    pub smoke: bool,
    /// Triggers of the latency phase, one at a time (default 500; --quick 100; --smoke 20).
    #[arg(long)]
    pub iters: Option<usize>,
    /// Triggers per throughput cell (default 5000; --quick 1000; --smoke 50).
    #[arg(long)]
    pub triggers: Option<usize>,
    /// Triggers in flight while a throughput cell publishes.
    #[arg(long, default_value_t = 64)]
    pub publishers: usize,
    /// Runs of each throughput cell, reported as the median and the spread
    /// (default 3; --smoke 1).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Add three columns between the raw floor and ours: the raw floor plus
    /// the four run-record calls our host makes per run, plus two, and plus
    /// two with one continuous pull instead of a fetch per free slot.
    #[arg(long)]
    pub record_call_floors: bool,
    /// Serve every job of ours and the reference's as a workflow of this many
    /// journaled no-op steps (`FlowContext::step` / the reference's
    /// `FlowContext.step`); 0 (the default) serves plain jobs. The raw floor
    /// stays a plain job: it journals nothing.
    #[arg(long, default_value_t = 0)]
    pub workflow_steps: u32,
    /// Leave the Python reference out (its column reads "skipped").
    #[arg(long)]
    pub skip_reference: bool,
    /// The platform's binaries and the reference's Python.
    #[command(flatten)]
    pub bins: platform::Binaries,
    /// The reference host script (default: crates/abi-bench/python/job_bench_peer.py).
    #[arg(long)]
    pub reference_script: Option<PathBuf>,
    /// Start our host through this program, given this binary and the host's
    /// flags as its arguments (`scripts/instructions-per-op.sh job-host`
    /// passes a valgrind wrapper).
    #[arg(long)]
    pub ours_wrapper: Option<PathBuf>,
    /// Internal: serve one target's jobs on this NATS URL instead of measuring
    /// (as workflows of `--workflow-steps` steps).
    #[arg(long, hide = true, value_names = ["KIND", "NATS_URL"], num_args = 2)]
    pub serve: Option<Vec<String>>,
}

impl Args {
    /// Triggers of the latency phase.
    pub fn iters(&self) -> usize {
        self.iters
            .unwrap_or(if self.smoke {
                20
            } else if self.quick {
                100
            } else {
                500
            })
            .max(1)
    }

    /// Runs of each throughput cell.
    pub fn repeats(&self) -> usize {
        self.repeats
            .unwrap_or(if self.smoke { 1 } else { 3 })
            .max(1)
    }

    /// Triggers per throughput cell.
    pub fn triggers(&self) -> usize {
        self.triggers
            .unwrap_or(if self.smoke {
                50
            } else if self.quick {
                1000
            } else {
                5000
            })
            .max(1)
    }
}

/// The jobs every target serves: name and `max_concurrency`.
fn jobs() -> Vec<(String, u32)> {
    let mut jobs = vec![(LATENCY_JOB.to_owned(), 1)];
    jobs.extend(LEVELS.iter().map(|&n| (cell_job(n), n)));
    jobs
}

/// The job of the throughput cell at `max_concurrency` `n`.
fn cell_job(n: u32) -> String {
    format!("c{n}")
}

/// Where a target's handlers announce that they started (core NATS).
fn started_subject(module: &str) -> String {
    format!("bench.jobs.started.{module}")
}

/// A token of `identity` signed with the bench's secret.
fn token(identity: &str) -> String {
    abi_test_support::requests::service_token(SECRET, identity)
}

/// Runs every target and returns the notes, the table and the verdicts
/// (markdown); with `--serve`, serves one target until SIGTERM and exits.
///
/// # Errors
///
/// When a process cannot be started or set up, or the bus cannot be
/// reached; failed or missing runs are counted in the table instead.
///
/// # Cancel safety
///
/// Not cancel safe: dropped, the platform and the target are killed (their `Drop` and
/// `kill_on_drop`) rather than stopped, and no table comes out; with `--serve`, as `serve::run`.
pub async fn run(args: &Args) -> anyhow::Result<String> {
    if let Some(serve) = &args.serve {
        let (kind, url) = (&serve[0], &serve[1]);
        serve::run(kind, url, args.workflow_steps).await?;
        // The parent stopped reading stdout after "ready": exit before
        // main prints an (empty) table into the closed pipe.
        std::process::exit(0);
    }
    let (iters, triggers) = (args.iters(), args.triggers());
    eprintln!(
        "abi-bench jobs: {iters} latency triggers, {triggers} triggers per throughput cell \
         at max_concurrency {LEVELS:?}, {} publishers",
        args.publishers
    );
    let load_before = platform::load_average();
    let disk_before = crate::disk::describe().await;
    let started = Instant::now();
    let root = service::workspace_root();
    let python = args.bins.python();
    let script = args
        .reference_script
        .clone()
        .unwrap_or_else(|| root.join("crates/abi-bench/python/job_bench_peer.py"));
    let bins = args.bins.clone();
    let platform = platform::Platform::start(bins, PROJECT, SECRET).await?;
    let client = async_nats::connect(platform.url())
        .await
        .context("connect to nats")?;

    let raw_svc = serve::spawn_rust("raw", &platform.url(), 0, None).await?;
    let [raw] = measure_targets(
        &platform,
        &client,
        args,
        [Target::new(
            "raw JetStream floor",
            serve::RAW_MODULE,
            raw_svc,
        )],
    )
    .await?;

    let mut floors = Vec::new();
    if args.record_call_floors {
        for (kind, module, name) in [
            ("records4", records::FOUR_MODULE, "floor + 4 record calls"),
            ("records2", records::TWO_MODULE, "floor + 2 record calls"),
            (
                "records2c",
                records::CONTINUOUS_MODULE,
                "floor + 2 record calls, continuous pull",
            ),
        ] {
            let svc = serve::spawn_rust(kind, &platform.url(), 0, None).await?;
            let [column] =
                measure_targets(&platform, &client, args, [Target::new(name, module, svc)]).await?;
            floors.push(column);
        }
    }

    let steps = args.workflow_steps;
    let (ours_name, reference_name) = if steps == 0 {
        ("JobHost (Rust)", "reference JobHost (Python)")
    } else {
        ("workflow_fn (Rust)", "reference workflow_handler (Python)")
    };
    let ours_svc =
        serve::spawn_rust("ours", &platform.url(), steps, args.ours_wrapper.as_deref()).await?;
    let ours_target = Target::new(ours_name, serve::OURS_MODULE, ours_svc);
    // Ours and the reference serve side by side and their throughput cells
    // alternate, so a change in the machine's speed during the run moves
    // both columns alike instead of the ratio.
    let (ours, reference) = if args.skip_reference {
        let [ours] = measure_targets(&platform, &client, args, [ours_target]).await?;
        let mut reference = Column::new(reference_name);
        reference.skipped = Some("--skip-reference".to_owned());
        (ours, reference)
    } else {
        let reference_svc =
            serve::spawn_reference(&python, &script, &platform.url(), steps).await?;
        let reference_target = Target::new(reference_name, serve::REFERENCE_MODULE, reference_svc);
        let [ours, reference] =
            measure_targets(&platform, &client, args, [ours_target, reference_target]).await?;
        (ours, reference)
    };

    let load_after = platform::load_average();
    let elapsed = started.elapsed();
    platform.stop().await;
    let disk_after = crate::disk::describe().await;
    let verdicts = report::verdicts(&ours, &reference);
    let shape = if steps == 0 {
        "plain jobs".to_owned()
    } else {
        format!(
            "ours and the reference's jobs are workflows of {steps} journaled no-op steps \
             (the raw floor stays a plain job)"
        )
    };
    let notes = format!(
        "Jobs: {shape}. The floors ran one after another on one nats-server with one \
         abi-discovery (it created the jobs stream) and one abi-documents on SQLite (the run \
         records), each target a process of its own serving its own module's jobs; then ours \
         and the reference's served side by side, their latency phases one after the other and \
         their throughput cells alternating (ours, then the reference's, for each run of each \
         cell). Latency: {iters} triggers one at a \
         time (each after the previous run's completion notice), {warmup} unmeasured first; \
         throughput: {triggers} triggers per cell published by {publishers} concurrent callers, \
         timed from the first publish to the last completion notice. {secs:.0} s in all. Load \
         average (1 min) before / after: {load_before} / {load_after}. A one-page write synced \
         (fdatasync, median of 50; a run record's commit waits for one) before: {disk_before}; \
         after: {disk_after}.",
        warmup = workload::WARMUP,
        publishers = args.publishers.max(1),
        secs = elapsed.as_secs_f64(),
    );
    let mut columns = vec![raw];
    columns.extend(floors);
    columns.extend([ours, reference]);
    Ok(format!(
        "{notes}\n\n{}\n{verdicts}",
        report::table(&columns, triggers)
    ))
}

/// A running host being measured and what its column gathers.
struct Target {
    module: &'static str,
    svc: Service,
    column: Column,
    /// Seconds of CPU spent while this target was measured: host,
    /// abi-documents, nats-server, the caller.
    spent: [f64; 4],
    /// The same, over the cells of the judged level only.
    judged_spent: [f64; 4],
    /// Runs that succeeded in the cells of the judged level.
    judged_runs: u64,
    /// Whether every CPU reading was available.
    cpu_known: bool,
}

impl Target {
    fn new(name: &'static str, module: &'static str, svc: Service) -> Self {
        Self {
            module,
            svc,
            column: Column::new(name),
            spent: [0.0; 4],
            judged_spent: [0.0; 4],
            judged_runs: 0,
            cpu_known: true,
        }
    }

    /// Adds the CPU spent between `before` and now to this target; to the
    /// judged level's too when `judged`.
    fn account(&mut self, platform: &platform::Platform, before: &CpuSplit, judged: bool) {
        match CpuSplit::now(platform, &self.svc).spent_since(before) {
            Some(spent) => {
                for (total, secs) in self.spent.iter_mut().zip(spent) {
                    *total += secs;
                }
                if judged {
                    for (total, secs) in self.judged_spent.iter_mut().zip(spent) {
                        *total += secs;
                    }
                }
            }
            None => self.cpu_known = false,
        }
    }

    /// The finished column; stops the host.
    async fn finish(mut self) -> Column {
        if self.cpu_known {
            self.column.documents_cpu = Some(self.spent[1]);
            self.column.nats_cpu = Some(self.spent[2]);
            let runs = self.judged_runs.max(1) as f64;
            self.column.cpu_per_run = Some(self.judged_spent.map(|secs| secs * 1e6 / runs));
        }
        match self.svc.usage() {
            Ok(usage) => self.column.usage = Some(usage),
            Err(error) => eprintln!("  {}: no CPU/RSS: {error:#}", self.column.name),
        }
        self.svc.stop().await;
        self.column
    }
}

/// Measures running targets: each one's latency phase in turn, then every
/// throughput cell with the targets taking turns at each run of it; the
/// CPU the shared services spend is counted to the target being measured.
/// Stops them all, also when a phase fails.
async fn measure_targets<const N: usize>(
    platform: &platform::Platform,
    client: &async_nats::Client,
    args: &Args,
    mut targets: [Target; N],
) -> anyhow::Result<[Column; N]> {
    let phases = target_phases(platform, client, args, &mut targets).await;
    let mut columns = Vec::with_capacity(N);
    for target in targets {
        columns.push(target.finish().await);
    }
    phases?;
    columns
        .try_into()
        .map_err(|_| anyhow::anyhow!("one column per target"))
}

async fn target_phases(
    platform: &platform::Platform,
    client: &async_nats::Client,
    args: &Args,
    targets: &mut [Target],
) -> anyhow::Result<()> {
    let job = |module: &str, job: &str| {
        JobClient::new(
            client.clone(),
            TokenSource::issued(token("api")),
            PROJECT,
            module,
            job,
        )
    };
    for target in targets.iter_mut() {
        let name = target.column.name;
        eprintln!("{name}: trigger-to-start x{}", args.iters());
        let before = CpuSplit::now(platform, &target.svc);
        let latency = workload::latency(
            client,
            &job(target.module, LATENCY_JOB),
            &started_subject(target.module),
            args.iters(),
        )
        .await?;
        target.account(platform, &before, false);
        target.column.start = latency.start.summary();
        target.column.done = latency.done.summary();
        target.column.failed += latency.failed;
    }
    for n in LEVELS {
        let judged = n == report::JUDGED_LEVEL;
        let mut cells: Vec<Vec<workload::Cell>> = targets.iter().map(|_| Vec::new()).collect();
        for repeat in 1..=args.repeats() {
            for (target, cells) in targets.iter_mut().zip(cells.iter_mut()) {
                let name = target.column.name;
                eprintln!(
                    "{name}: throughput at max_concurrency {n}, {} triggers (run {repeat} of {})",
                    args.triggers(),
                    args.repeats()
                );
                let before = CpuSplit::now(platform, &target.svc);
                let cell = workload::throughput(
                    client,
                    &job(target.module, &cell_job(n)),
                    args.triggers(),
                    args.publishers.max(1),
                )
                .await?;
                target.account(platform, &before, judged);
                eprintln!(
                    "  {:.0} runs/s ({} succeeded, {} failed or missing, triggers stored at {:.0}/s)",
                    cell.rate, cell.succeeded, cell.failed, cell.publish_rate
                );
                target.column.failed += cell.failed;
                if judged {
                    target.judged_runs += cell.succeeded;
                }
                cells.push(cell);
            }
        }
        for (target, mut cells) in targets.iter_mut().zip(cells) {
            target
                .column
                .rates
                .insert(n, cells.iter().map(|c| c.rate).collect());
            cells.sort_by(|a, b| a.rate.total_cmp(&b.rate));
            if let Some(median) = cells.into_iter().nth((args.repeats() - 1) / 2) {
                target.column.throughput.insert(n, median);
            }
        }
    }
    Ok(())
}
