//! The console run's results, the markdown table (the console beside the
//! raw KV watcher's floor), and the verdicts on the two targets.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::Args;
use super::fleet::{INSTANCES, MODULES};
use crate::measure::Summary;
use crate::report::judged;

/// The first-paint target, ms.
pub const FIRST_PAINT_TARGET_MS: f64 = 1000.0;
/// The update target: news on the page this soon after the write, ms.
pub const UPDATE_TARGET_MS: f64 = 500.0;
/// Runs the browser test's first paint is measured with.
const FIRST_PAINT_RUNS: u64 = 10_000;

/// GETs of one page.
#[derive(Debug, Default)]
pub struct Page {
    /// From before the connect to the first byte.
    pub first_byte: Option<Summary>,
    /// From before the connect to the end of the body.
    pub total: Option<Summary>,
    /// Body bytes.
    pub body: Option<usize>,
    /// GETs that failed.
    pub failures: u64,
}

/// The writes of one update phase.
#[derive(Debug, Default)]
pub struct Updates {
    /// Event streams open.
    pub streams: usize,
    /// Whether every instance renewed meanwhile, and how often (s).
    pub renewing: Option<u64>,
    /// Register sent to the `modules` event naming the instance read whole.
    pub event: Option<Summary>,
    /// Register sent to the raw KV watcher's entry holding it.
    pub watcher: Option<Summary>,
    /// Register sent to its reply.
    pub register: Option<Summary>,
    /// Bytes of a `modules` event's data.
    pub event_bytes: Option<usize>,
    /// The console's CPU per `modules` event pushed (register and
    /// unregister each push one), µs.
    pub cpu_us_per_update: Option<f64>,
    /// The console's peak RSS over the phase, MiB.
    pub peak_mib: Option<f64>,
    /// Writes that failed, events a stream missed or was told it lagged.
    pub failures: u64,
}

/// The registry's steady state: every instance renewing at the SDK's pace.
#[derive(Debug, Default)]
pub struct Renewals {
    /// How often each instance renewed, s.
    pub every_secs: u64,
    /// Renewals answered per second.
    pub renewals_per_sec: f64,
    /// `modules` events the stream read per second.
    pub events_per_sec: f64,
    /// Entries the raw KV watcher read per second.
    pub entries_per_sec: f64,
    /// Bytes of event data the stream read per second.
    pub stream_bytes_per_sec: f64,
    /// The console's CPU, µs per second.
    pub cpu_us_per_sec: Option<f64>,
    /// Renewals that failed, and `lagged` events.
    pub failures: u64,
}

/// Everything the run measured.
#[derive(Debug, Default)]
pub struct Results {
    /// The console's CPU with nothing happening, µs per second.
    pub idle_cpu_us_per_sec: Option<f64>,
    /// Every instance renewing.
    pub renewals: Option<Renewals>,
    /// `GET /`.
    pub shell: Page,
    /// `GET /api/modules`.
    pub modules: Page,
    /// The console's peak RSS over the GETs, MiB.
    pub pages_peak_mib: Option<f64>,
    /// With one stream, then with several.
    pub updates: Vec<Updates>,
}

/// The browser test's figures (`first-paint.json`).
#[derive(Debug)]
pub struct FirstPaint {
    modules_ms: f64,
    job_runs_ms: f64,
    instances: u64,
    runs: u64,
    age: Option<Duration>,
}

impl FirstPaint {
    /// The figures at `path`, if it holds them.
    pub fn read(path: &Path) -> Option<Self> {
        let text = std::fs::read(path).ok()?;
        let json: serde_json::Value = serde_json::from_slice(&text).ok()?;
        let age = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| SystemTime::now().duration_since(at).ok());
        Some(Self {
            modules_ms: json["first_paint_ms"]["modules"].as_f64()?,
            job_runs_ms: json["first_paint_ms"]["job_runs"].as_f64()?,
            instances: json["instances"].as_u64()?,
            runs: json["runs"].as_u64()?,
            age,
        })
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn latency(summary: Option<Summary>) -> Option<String> {
    summary.map(|s| format!("{:.3} / {:.3}", ms(s.p50), ms(s.p99)))
}

/// One row: its label, the console's cell, the floor's.
type Row = (String, Option<String>, Option<String>);

fn page_rows(path: &str, page: &Page) -> [Row; 3] {
    [
        (
            format!("GET {path}: time to first byte, p50 / p99 (ms)"),
            latency(page.first_byte),
            None,
        ),
        (
            format!("GET {path}: whole answer, p50 / p99 (ms)"),
            latency(page.total),
            None,
        ),
        (
            format!("GET {path}: body (bytes)"),
            page.body.map(|b| b.to_string()),
            None,
        ),
    ]
}

impl Updates {
    /// What the rows of this phase start with.
    fn label(&self) -> String {
        let streams = format!("{} event stream(s)", self.streams);
        match self.renewing {
            Some(every) => format!("{streams}, every instance renewing each {every} s"),
            None => streams,
        }
    }
}

fn update_rows(u: &Updates) -> [Row; 4] {
    let n = u.label();
    [
        (
            format!(
                "{n}: register sent to the news read (the console: its `modules` event; the \
                 floor: its KV entry), p50 / p99 (ms)"
            ),
            latency(u.event),
            latency(u.watcher),
        ),
        (
            format!("{n}: register request to its reply, p50 / p99 (ms)"),
            None,
            latency(u.register),
        ),
        (
            format!("{n}: console CPU per update (µs)"),
            u.cpu_us_per_update.map(|c| format!("{c:.0}")),
            None,
        ),
        (
            format!("{n}: console peak RSS (MiB)"),
            u.peak_mib.map(|m| format!("{m:.1}")),
            None,
        ),
    ]
}

fn renewal_rows(r: &Renewals) -> [Row; 4] {
    let every = format!("every instance renewing each {} s", r.every_secs);
    [
        (
            format!("{every}: renewals answered (per s)"),
            None,
            Some(format!("{:.1}", r.renewals_per_sec)),
        ),
        (
            format!(
                "{every}: news read (the console: `modules` events on one stream; the floor: \
                 KV entries) (per s)"
            ),
            Some(format!("{:.1}", r.events_per_sec)),
            Some(format!("{:.1}", r.entries_per_sec)),
        ),
        (
            format!("{every}: event data pushed to each open stream (MB/s)"),
            Some(format!("{:.2}", r.stream_bytes_per_sec / 1e6)),
            None,
        ),
        (
            format!("{every}: console CPU (µs per s)"),
            r.cpu_us_per_sec.map(|c| format!("{c:.0}")),
            None,
        ),
    ]
}

/// The markdown table, one row per metric.
pub fn table(results: &Results) -> String {
    let mut rows: Vec<Row> = vec![(
        "console CPU with nothing happening (µs per s)".to_owned(),
        results.idle_cpu_us_per_sec.map(|c| format!("{c:.0}")),
        None,
    )];
    if let Some(r) = &results.renewals {
        rows.extend(renewal_rows(r));
    }
    rows.extend(page_rows("/", &results.shell));
    rows.extend(page_rows("/api/modules", &results.modules));
    rows.push((
        "console peak RSS while serving the GETs (MiB)".to_owned(),
        results.pages_peak_mib.map(|m| format!("{m:.1}")),
        None,
    ));
    for updates in &results.updates {
        rows.extend(update_rows(updates));
    }
    let (one, many) = (results.updates.first(), results.updates.get(1));
    rows.push((
        "`modules` event data (bytes)".to_owned(),
        one.and_then(|u| u.event_bytes).map(|b| b.to_string()),
        None,
    ));
    let per_stream = one.zip(many).and_then(|(one, many)| {
        let extra = many.streams.checked_sub(one.streams).filter(|n| *n > 0)?;
        Some((many.peak_mib? - one.peak_mib?) / extra as f64)
    });
    rows.push((
        "console memory per extra stream: peak RSS difference / extra streams (MiB)".to_owned(),
        per_stream.map(|m| format!("{m:.2}")),
        None,
    ));
    let pages = results.shell.failures + results.modules.failures;
    let updates: u64 = results.updates.iter().map(|u| u.failures).sum::<u64>()
        + results.renewals.as_ref().map_or(0, |r| r.failures);
    rows.push((
        "failed GETs and writes, missed or lagged events".to_owned(),
        Some((pages + updates).to_string()),
        Some(updates.to_string()),
    ));
    let mut out = String::from("| metric | console (abictl console) | raw KV watch (floor) |\n");
    out.push_str("|---|---|---|\n");
    for (label, console, floor) in rows {
        let cell = |c: Option<String>| c.unwrap_or_else(|| "—".to_owned());
        let _ = writeln!(out, "| {label} | {} | {} |", cell(console), cell(floor));
    }
    out
}

/// The verdicts on the two targets.
pub fn verdicts(results: &Results, first_paint: Option<&FirstPaint>) -> String {
    let paint = match first_paint {
        Some(f) => {
            let age = f
                .age
                .map(|a| {
                    format!(
                        ", written {:.0} min before this run",
                        a.as_secs_f64() / 60.0
                    )
                })
                .unwrap_or_default();
            (
                format!(
                    "browser test (first-paint.json{age}): modules page {:.0} ms with {} \
                     instances, a job's runs page {:.0} ms with {} runs",
                    f.modules_ms, f.instances, f.job_runs_ms, f.runs
                ),
                judged(
                    f.modules_ms.max(f.job_runs_ms) <= FIRST_PAINT_TARGET_MS
                        && f.instances >= INSTANCES as u64
                        && f.runs >= FIRST_PAINT_RUNS,
                ),
            )
        }
        None => (
            "no first-paint.json: run the browser test (console_browser.rs)".to_owned(),
            "not judged (not measured here)",
        ),
    };
    let worst = results
        .updates
        .iter()
        .map(|u| u.event.map(|s| ms(s.p99)))
        .collect::<Option<Vec<f64>>>()
        .filter(|p99s| !p99s.is_empty());
    let update = match worst {
        Some(p99s) => {
            let each: Vec<String> = results
                .updates
                .iter()
                .zip(&p99s)
                .map(|(u, p99)| format!("{p99:.1} ms with {}", u.label()))
                .collect();
            let max = p99s.iter().copied().fold(0.0, f64::max);
            (
                format!("p99 {}", each.join(", ")),
                judged(max <= UPDATE_TARGET_MS),
            )
        }
        None => ("not measured".to_owned(), judged(false)),
    };
    let mut out = String::from("| target | measured | verdict |\n|---|---|---|\n");
    for (target, (measured, verdict)) in [
        (
            format!(
                "first paint <= {FIRST_PAINT_TARGET_MS:.0} ms with {INSTANCES} instances and \
                 {FIRST_PAINT_RUNS} job runs"
            ),
            paint,
        ),
        (
            format!("updates within {UPDATE_TARGET_MS:.0} ms of the registry write"),
            update,
        ),
    ] {
        let _ = writeln!(out, "| {target} | {measured} | {verdict} |");
    }
    out
}

/// The notes, the table and the verdicts.
pub fn markdown(
    results: &Results,
    first_paint: Option<&FirstPaint>,
    args: &Args,
    elapsed: Duration,
    loads: &[String],
) -> String {
    let notes = format!(
        "The phases ran one after another on one nats-server with one abi-discovery (lease \
         3600 s) holding {INSTANCES} instances of {MODULES} modules (each module but the first \
         depending on the one before; all READY), and one `abictl console` process. Idle: \
         {idle:.1} s with no write and no stream. Renewals: as long again, every instance \
         renewing once per {every} s (5 s is the SDK's healthy pace at the default 20 s lease: \
         min(5 s, lease / 4)), spread evenly, with one stream open. GETs: {iters} per page one \
         at a time, {warmup} unmeasured first, each on a fresh connection (HTTP/1.0), timed \
         from before the connect. Updates: {writes} writes with 1 and with {streams} \
         `/api/events` streams open (read raw, HTTP/1.0), then {writes} with 1 while every \
         instance renews as above; a write registers a probe instance and is timed from sending \
         the request to reading the whole `modules` event that names it (on the first stream) \
         and to a raw KV watcher's entry holding it (the floor, same write); the probe is then \
         unregistered and both removals awaited, so every write is a change. CPU per update: \
         the console's CPU over the phase / the `modules` events it pushed (two per write, and \
         one per renewal). Peak RSS is VmHWM, reset (/proc/<pid>/clear_refs) before each phase. \
         {total:.0} s in all. Load average (1 min) at the start / at the end: {loads}.",
        idle = args.idle().as_secs_f64(),
        every = args.renew_every_secs(),
        iters = args.iters(),
        warmup = super::phases::WARMUP,
        writes = args.writes(),
        streams = args.streams(),
        total = elapsed.as_secs_f64(),
        loads = loads.join(" / "),
    );
    format!(
        "{notes}\n\n{}\n{}",
        table(results),
        verdicts(results, first_paint)
    )
}
