//! `abi-bench documents`: the document service, side by side on one
//! nats-server the bench starts itself.
//!
//! Targets, in this order, each alone on the bus:
//!
//! 1. **raw req-reply**: an echo responder (another connection of this
//!    process) answering each measured operation's request bytes, with the
//!    token header: the NATS floor of any call;
//! 2. **abi-documents (SQLite)**: the release binary on a fresh file;
//! 3. **abi-documents (PostgreSQL)**: the same binary on a fresh PostgreSQL
//!    server ([`abi_test_support::PostgresServer`], fsync on);
//! 4. **reference (Python, SQLite)**: `tests/interop/document_peer.py serve`
//!    (naas_abi_core's NATS adapter over its SQLite adapter) on a fresh file.
//!
//! The document subjects carry no project, so two servers on one bus would
//! share the queue group: each server target is started only once no other
//! answers, and stopped (and checked gone) before the next starts. All of
//! them thus see the same broker, the same client and an idle bus.

mod report;
mod servers;
mod workload;

use std::path::PathBuf;
use std::sync::atomic::AtomicI64;
use std::time::{Duration, Instant};

use abi_sdk::DocumentClient;
use abi_test_support::postgres::PostgresServer;
use abi_test_support::{NatsServer, unique_name};
use anyhow::Context as _;
use async_nats::{Client, HeaderMap};
use bytes::Bytes;
use futures::StreamExt as _;

use crate::measure::{self, Samples};
use crate::service::{self, Service};
use report::{Column, Op, Shape};
use workload::{Calls, Failures, FloorRequests};

/// The project secret the bench signs with (32+ bytes, as HS256 wants).
const SECRET: &str = "abi-bench-documents-secret-0123456789abcdef";
/// Unmeasured calls of get and find before each is measured, so a target's
/// first-call costs (statement caches, imports) stay out of the samples.
const WARMUP_CALLS: usize = 10;

/// Flags of `abi-bench documents`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// A short run: 100 calls per latency cell, 3 s of throughput.
    #[arg(long, conflicts_with = "smoke")]
    pub quick: bool,
    /// A correctness run only (3 calls per cell, 40 documents): checks the tables are whole.
    #[arg(long)]
    pub smoke: bool,
    /// Calls per latency cell (default 500; --quick 100; --smoke 3).
    #[arg(long)]
    pub iters: Option<usize>,
    /// Runs of the throughput phase, reported as the median and the spread
    /// (default 3; --smoke 1).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Seconds of the throughput phase (default 10; --quick 3; --smoke 0.3).
    #[arg(long)]
    pub duration_secs: Option<f64>,
    /// Concurrent callers of the throughput phase.
    #[arg(long, default_value_t = 64)]
    pub callers: usize,
    /// Documents in the set that CAS, get and find work on (default 1000; --smoke 40).
    #[arg(long)]
    pub documents: Option<usize>,
    /// Items a find page asks for (a fifth of the documents match).
    #[arg(long, default_value_t = 20)]
    pub page: usize,
    /// Leave the PostgreSQL target out (its column reads "skipped").
    #[arg(long)]
    pub skip_postgres: bool,
    /// Leave the Python reference out (its column reads "skipped").
    #[arg(long)]
    pub skip_reference: bool,
    /// The `abi-documents` binary (default: next to this executable).
    #[arg(long, env = "ABI_DOCUMENTS_BIN")]
    pub documents_bin: Option<PathBuf>,
    /// Python with naas_abi_core installed (default: <workspace>/.venv/bin/python).
    #[arg(long, env = "ABI_PYTHON")]
    pub python: Option<PathBuf>,
    /// The reference server script (default: <workspace>/tests/interop/document_peer.py).
    #[arg(long)]
    pub reference_script: Option<PathBuf>,
}

impl Args {
    /// Calls per latency cell.
    pub fn iters(&self) -> usize {
        self.iters
            .unwrap_or(if self.smoke {
                3
            } else if self.quick {
                100
            } else {
                500
            })
            .max(1)
    }

    /// Runs of the throughput phase.
    pub fn repeats(&self) -> usize {
        self.repeats
            .unwrap_or(if self.smoke { 1 } else { 3 })
            .max(1)
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

    /// Documents in the searched set.
    pub fn documents(&self) -> usize {
        self.documents
            .unwrap_or(if self.smoke { 40 } else { 1000 })
            .max(1)
    }

    fn shape(&self) -> Shape {
        Shape {
            page: self.page.max(1),
            records: self.documents(),
            callers: self.callers.max(1),
        }
    }
}

/// Runs every target and returns the notes, the table and the verdicts
/// (markdown).
///
/// # Errors
///
/// When a server cannot be started, stopped or set up, or the bus cannot be
/// reached; failed calls are counted in the table instead.
///
/// # Cancel safety
///
/// Not cancel safe: dropped, the nats-server, the echo and the server under test are killed by
/// their `Drop`s and no table comes out; a PostgreSQL still starting is killed when its task ends.
pub async fn run(args: &Args) -> anyhow::Result<String> {
    let shape = args.shape();
    eprintln!(
        "abi-bench documents: {} calls per latency cell, {} documents, pages of {}, \
         {:?} of throughput with {} callers",
        args.iters(),
        shape.records,
        shape.page,
        args.duration(),
        shape.callers
    );
    let load_before = crate::platform::load_average();
    let disk_before = crate::disk::describe().await;
    let started = Instant::now();
    let bin = service::sibling_binary(
        "abi-documents",
        args.documents_bin.clone(),
        "--documents-bin",
    )?;
    let root = service::workspace_root();
    let python = args
        .python
        .clone()
        .unwrap_or_else(|| root.join(".venv/bin/python"));
    let script = args
        .reference_script
        .clone()
        .unwrap_or_else(|| root.join("tests/interop/document_peer.py"));
    let scratch = tempfile::Builder::new()
        .prefix("abi-bench-documents-")
        .tempdir()
        .context("create a temporary directory")?;

    eprintln!("starting nats-server (temporary store)");
    let nats = NatsServer::start().await;
    let url = nats.url();
    let client = async_nats::connect(&url).await.context("connect to nats")?;
    let floor = workload::floor_requests(SECRET, shape.page)?;

    let echo = Echo::start(&url, &client, &floor.headers).await?;
    let mut raw = Column::new("raw req-reply");
    raw_request_reply(&echo, &floor, args, &mut raw).await?;

    let mut sqlite = Column::new("abi-documents (SQLite)");
    servers::wait_bus_free(&client).await?;
    let path = scratch.path().join("ours.sqlite");
    eprintln!(
        "{}: starting {} on {}",
        sqlite.name,
        bin.display(),
        path.display()
    );
    let svc = servers::start_ours(
        &bin,
        &url,
        SECRET,
        &path.to_string_lossy(),
        &client,
        &floor.headers,
    )
    .await?;
    measure_server(&client, &echo, &floor, args, svc, &mut sqlite).await?;

    let mut postgres = Column::new("abi-documents (PostgreSQL)");
    if args.skip_postgres {
        postgres.skipped = Some("--skip-postgres".to_owned());
    } else {
        servers::wait_bus_free(&client).await?;
        eprintln!("{}: starting PostgreSQL", postgres.name);
        // PostgresServer::start panics when it cannot start: its own task
        // turns that into an error here.
        let database = tokio::spawn(PostgresServer::start())
            .await
            .map_err(|e| anyhow::anyhow!("PostgreSQL did not start: {e}"))?;
        eprintln!("{}: starting {}", postgres.name, bin.display());
        let svc = servers::start_ours(&bin, &url, SECRET, &database.url(), &client, &floor.headers)
            .await?;
        let measured = measure_server(&client, &echo, &floor, args, svc, &mut postgres).await;
        // Its drop waits (blocking) for the server to stop.
        let _ = tokio::task::spawn_blocking(move || drop(database)).await;
        measured?;
    }

    let mut reference = Column::new("reference (Python, SQLite)");
    if args.skip_reference {
        reference.skipped = Some("--skip-reference".to_owned());
    } else {
        servers::wait_bus_free(&client).await?;
        let path = scratch.path().join("reference.sqlite");
        eprintln!("{}: starting {}", reference.name, script.display());
        let svc = servers::start_reference(
            &python,
            &script,
            &url,
            SECRET,
            &path,
            &client,
            &floor.headers,
        )
        .await?;
        measure_server(&client, &echo, &floor, args, svc, &mut reference).await?;
    }

    let load_after = crate::platform::load_average();
    let elapsed = started.elapsed();
    drop(nats);
    let disk_after = crate::disk::describe().await;
    let ours = [
        (&sqlite, report::SQLITE_TARGETS),
        (&postgres, report::POSTGRES_TARGETS),
    ];
    let verdicts = report::verdicts(&raw, &ours, &reference);
    let columns = [raw, sqlite, postgres, reference];
    let notes = format!(
        "Targets ran one after another on one nats-server, each server alone on the bus \
         (checked: no responder on the document subjects before it started) with a fresh \
         database; the raw floor first. {} calls per latency cell, {} documents, pages of {}, \
         {:.1} s of put throughput, then as long of get throughput, with {} callers; {:.0} s in all. Load average (1 min) \
         before / after: {} / {}. A one-page write synced (fdatasync, median of 50; a put on SQLite \
         waits for one) before: {disk_before}; after: {disk_after}.",
        args.iters(),
        shape.records,
        shape.page,
        args.duration().as_secs_f64(),
        shape.callers,
        elapsed.as_secs_f64(),
        load_before,
        load_after
    );
    Ok(format!(
        "{notes}\n\n{}\n{verdicts}",
        report::table(&columns, shape)
    ))
}

/// Measures one running server target, then stops it and waits until it has
/// left the bus.
async fn measure_server(
    client: &Client,
    echo: &Echo,
    floor: &FloorRequests,
    args: &Args,
    svc: Service,
    column: &mut Column,
) -> anyhow::Result<()> {
    let phases = workload_phases(client, echo, floor, args, Some(&svc), column).await;
    match svc.usage() {
        Ok(usage) => column.usage = Some(usage),
        Err(error) => eprintln!("  {}: no CPU/RSS: {error:#}", column.name),
    }
    svc.stop().await;
    servers::wait_bus_free(client).await?;
    phases
}

/// Setup, the four latency phases and the throughput phase on one server.
async fn workload_phases(
    client: &Client,
    echo: &Echo,
    floor: &FloorRequests,
    args: &Args,
    svc: Option<&Service>,
    column: &mut Column,
) -> anyhow::Result<()> {
    let name = column.name;
    let shape = args.shape();
    let iters = args.iters();
    let docs = DocumentClient::new(
        client.clone(),
        workload::token_source(SECRET)?,
        workload::NAMESPACE,
    );
    for collection in [workload::CREATED, workload::RECORDS, workload::LOAD] {
        docs.ensure_collection(workload::spec(collection))
            .await
            .with_context(|| format!("{name}: ensure_collection {collection}"))?;
    }
    let failures = Failures::default();
    let calls = Calls {
        docs: &docs,
        failures: &failures,
        versions: (0..shape.records).map(|_| AtomicI64::new(1)).collect(),
        page: shape.page,
        records: shape.records,
    };
    let calls = &calls;

    eprintln!("{name}: put (create) x{iters}");
    let samples = measure::sequential(name, iters, |k| {
        calls.create("create", workload::CREATED, format!("c{k:06}"), k)
    })
    .await;
    record(column, Op::Create, &samples);

    eprintln!(
        "{name}: filling {} documents (one caller, not measured)",
        shape.records
    );
    let fill = measure::sequential(name, shape.records, |i| {
        calls.create("fill", workload::RECORDS, workload::record_id(i), i)
    })
    .await;
    drop(fill);

    eprintln!("{name}: put (CAS) x{iters}");
    let samples = measure::sequential(name, iters, |k| calls.cas(k)).await;
    record(column, Op::Cas, &samples);

    eprintln!("{name}: get x{iters}, each after an echo of a get request");
    let _ = measure::sequential(name, WARMUP_CALLS, |k| calls.get("warmup", k)).await;
    // The floor of the get target is measured in step with the gets, so a
    // change of the machine's load between targets moves both alike.
    let paired = std::sync::Mutex::new(Samples::default());
    let samples = measure::sequential(name, iters, |k| {
        let (paired, floor_failures) = (&paired, &failures);
        async move {
            let echoed = echo.tallied(floor_failures, "get floor", &floor.get).await;
            {
                // A poisoned lock only means a panic elsewhere; the samples
                // still hold.
                let mut paired = paired.lock().unwrap_or_else(|e| e.into_inner());
                match echoed {
                    Ok(latency) => paired.latencies.push(latency),
                    Err(_) => paired.errors += 1,
                }
            }
            calls.get("get", k).await
        }
    })
    .await;
    record(column, Op::Get, &samples);
    column.paired_get_floor = paired.lock().unwrap_or_else(|e| e.into_inner()).summary();

    eprintln!("{name}: find x{iters}");
    let _ = measure::sequential(name, WARMUP_CALLS, |k| calls.find("warmup", k)).await;
    let samples = measure::sequential(name, iters, |k| calls.find("find", k)).await;
    record(column, Op::Find, &samples);

    let (rates, cpu) = throughput_runs(name, "put", args, svc, |repeat, caller, k| {
        calls.create(
            "throughput",
            workload::LOAD,
            format!("w{repeat}-{caller:03}-{k:07}"),
            k,
        )
    })
    .await;
    column.throughput = crate::report::median(&rates);
    (column.rates, column.cpu_per_put_us) = (rates, cpu);
    let (rates, cpu) = throughput_runs(name, "get", args, svc, |_, caller, k| {
        calls.get("get throughput", caller * 7919 + k)
    })
    .await;
    (column.get_rates, column.cpu_per_get_us) = (rates, cpu);
    column.failures = failures.counts();
    Ok(())
}

/// `args.repeats()` runs of `op(repeat, caller, k)` with the shape's
/// callers for `args.duration()` each: every run's rate of successful calls,
/// and the service process's CPU per successful call over them all (µs).
async fn throughput_runs<F, Fut>(
    name: &str,
    what: &str,
    args: &Args,
    svc: Option<&Service>,
    op: F,
) -> (Vec<f64>, Option<f64>)
where
    F: Fn(usize, usize, usize) -> Fut,
    Fut: Future<Output = anyhow::Result<Duration>>,
{
    let callers = args.shape().callers;
    let cpu_before = svc.and_then(|s| s.cpu_now().ok());
    let (mut rates, mut calls) = (Vec::new(), 0.0);
    for repeat in 1..=args.repeats() {
        eprintln!(
            "{name}: {what} throughput, {callers} callers for {:?} (run {repeat} of {})",
            args.duration(),
            args.repeats()
        );
        let started = std::time::Instant::now();
        let (rate, _) = measure::throughput(name, callers, args.duration(), |caller, k| {
            op(repeat, caller, k)
        })
        .await;
        calls += rate * started.elapsed().as_secs_f64();
        rates.push(rate);
    }
    let cpu_after = svc.and_then(|s| s.cpu_now().ok());
    let cpu = match (cpu_before, cpu_after) {
        (Some(before), Some(after)) if calls >= 1.0 => Some((after - before) * 1e6 / calls),
        _ => None,
    };
    (rates, cpu)
}

fn record(column: &mut Column, op: Op, samples: &Samples) {
    if let Some(summary) = samples.summary() {
        column.latency.insert(op, summary);
    }
}

/// An echo responder on its own connection of this process, on a subject of
/// its own (no document service listens there, so it may answer beside one).
#[derive(Debug)]
struct Echo {
    client: Client,
    subject: String,
    headers: HeaderMap,
    responding: tokio::task::JoinHandle<()>,
}

impl Echo {
    /// Subscribes the responder; `client` calls it with `headers`.
    async fn start(url: &str, client: &Client, headers: &HeaderMap) -> anyhow::Result<Self> {
        let responder = async_nats::connect(url).await?;
        let subject = format!("bench.echo.{}", unique_name("documents"));
        let mut sub = responder.subscribe(subject.clone()).await?;
        client.flush().await?;
        responder.flush().await?;
        let responding = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                if let Some(reply) = msg.reply {
                    // A failed echo shows up as the caller's timeout, counted there.
                    let _ = responder.publish(reply, msg.payload).await;
                }
            }
        });
        crate::measure::echo_ready(client, &subject).await?;
        Ok(Self {
            client: client.clone(),
            subject,
            headers: headers.clone(),
            responding,
        })
    }

    /// One echo of `payload`, timed from send to reply.
    async fn call(&self, payload: &Bytes) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let reply = self
            .client
            .request_with_headers(self.subject.clone(), self.headers.clone(), payload.clone())
            .await?;
        let elapsed = start.elapsed();
        anyhow::ensure!(reply.payload == *payload, "echo changed the payload");
        Ok(elapsed)
    }

    /// One echo, tallied under `phase` as `NO_ECHO` when it fails.
    async fn tallied(
        &self,
        failures: &Failures,
        phase: &'static str,
        payload: &Bytes,
    ) -> anyhow::Result<Duration> {
        let timed = self.call(payload).await;
        if timed.is_err() {
            failures.add(phase, crate::measure::NO_ECHO);
        }
        timed
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.responding.abort();
    }
}

/// The floor column: the echo called with each measured operation's request
/// bytes and token header, then by the throughput phase's callers with a
/// create's.
async fn raw_request_reply(
    echo: &Echo,
    floor: &FloorRequests,
    args: &Args,
    column: &mut Column,
) -> anyhow::Result<()> {
    let name = column.name;
    let failures = Failures::default();
    let failures = &failures;
    let iters = args.iters();
    for (op, phase, payload) in [
        (Op::Create, "create", &floor.put),
        (Op::Cas, "cas", &floor.cas),
        (Op::Get, "get", &floor.get),
        (Op::Find, "find", &floor.find),
    ] {
        eprintln!("{name}: echo of a {phase} request x{iters}");
        let _ = measure::sequential(name, WARMUP_CALLS, |_| {
            echo.tallied(failures, "warmup", payload)
        })
        .await;
        let samples =
            measure::sequential(name, iters, |_| echo.tallied(failures, phase, payload)).await;
        record(column, op, &samples);
    }
    let callers = args.callers.max(1);
    for repeat in 1..=args.repeats() {
        eprintln!(
            "{name}: throughput, {callers} callers for {:?} (run {repeat} of {})",
            args.duration(),
            args.repeats()
        );
        let (rate, _) = measure::throughput(name, callers, args.duration(), |_, _| {
            echo.tallied(failures, "throughput", &floor.put)
        })
        .await;
        column.rates.push(rate);
    }
    column.throughput = crate::report::median(&column.rates);
    column.failures = failures.counts();
    Ok(())
}
