//! The apps run's results: one column per target (the raw floor, our
//! host, the reference's), the markdown table, and the verdicts on the
//! issue's two targets.

use std::fmt::Write as _;
use std::time::Duration;

use super::Args;
use crate::measure::Summary;
use crate::report::{judged, median, median_and_spread};

/// The latency target: a GET's p50 at most this many times a raw
/// request-reply's.
pub const GET_P50_TARGET_RATIO: f64 = 2.0;
/// The throughput target: GETs per second with the concurrent
/// callers, at least this many times the reference's.
pub const GET_THROUGHPUT_TARGET_RATIO: f64 = 10.0;

/// The streams of one kind through one host.
#[derive(Debug, Default, Clone)]
pub struct Transfer {
    /// MB/s of each run that succeeded.
    pub rates: Vec<f64>,
    /// The host's peak RSS over the runs (MiB).
    pub host_peak_mib: Option<f64>,
    /// This process's (the caller's) peak RSS over the runs (MiB).
    pub caller_peak_mib: Option<f64>,
}

/// Overflowed document puts against one implementation.
#[derive(Debug, Default, Clone)]
pub struct Put {
    /// p50 / p99 of the measured puts.
    pub time: Option<Summary>,
    /// The document service's peak RSS over the puts (MiB).
    pub service_peak_mib: Option<f64>,
    /// Puts that failed.
    pub failures: u64,
}

/// Which target a column is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The raw request-reply floor.
    #[default]
    Floor,
    /// Our host.
    Ours,
    /// The reference's host.
    Reference,
}

/// What one target measured. Cells it does not measure stay empty ("—").
#[derive(Debug, Default)]
pub struct Column {
    /// Column heading.
    pub name: &'static str,
    /// Which target it is.
    pub kind: Kind,
    /// GET (or raw request-reply) of 1 KiB, one at a time.
    pub get: Option<Summary>,
    /// A host's: the raw request-reply sent before each of its GETs.
    pub paired_floor: Option<Summary>,
    /// GETs per second with the concurrent callers, one per run.
    pub rates: Vec<f64>,
    /// CPU microseconds per GET with the concurrent callers: target,
    /// abi-discovery, nats-server, the bench's callers.
    pub cpu_per_get: Option<[f64; 4]>,
    /// Streamed downloads.
    pub download: Option<Transfer>,
    /// Streamed uploads.
    pub upload: Option<Transfer>,
    /// Overflowed document puts.
    pub put: Option<Put>,
    /// Failed GETs and streams.
    pub failures: u64,
    /// Why the target was not run; its cells then say "skipped".
    pub skipped: Option<String>,
}

impl Column {
    /// An empty column.
    pub fn new(name: &'static str, kind: Kind) -> Self {
        Self {
            name,
            kind,
            ..Self::default()
        }
    }

    fn p50_ms(&self) -> Option<f64> {
        Some(ms(self.get?.p50))
    }

    /// The p50 of the raw request-replies interleaved with the GETs.
    fn floor_p50_ms(&self) -> Option<f64> {
        Some(ms(self.paired_floor?.p50)).filter(|floor| *floor > 0.0)
    }

    fn rate(&self) -> Option<f64> {
        median(&self.rates)
    }
}

/// The notes above the table: how the run went, its sizes, the load.
pub fn notes(args: &Args, elapsed: Duration, loads: &[String]) -> String {
    let run = &args.run;
    format!(
        "Targets ran one after another on one nats-server with one abi-discovery (leases, \
         authorize_app) and one abi-documents (idle here), each target a process of its own; \
         the caller, in the bench's process, is our AppClient for every host (as module \
         {caller}). GET: {iters} calls one at a time, {warmup} unmeasured first, a host's each \
         after one raw request-reply of the floor (kept running; the ratio and the verdict use \
         that interleaved floor); throughput: \
         {callers} concurrent callers for {secs:.1} s, {repeats} run(s). Streams: {stream} MiB \
         each way, {repeats} run(s) each, the apps producing {frame} KiB frames; a download \
         read chunk by chunk and dropped (`call_streaming`), an upload's body made a frame at \
         a time as the host pulls it (`call` with `RequestBody::stream`) and counted by the \
         app as it reads it. Peak RSS is VmHWM, reset \
         (/proc/<pid>/clear_refs) before each kind of stream. Overflowed puts: a document of \
         one {put} MiB string, {puts} timed after one unmeasured, each implementation's \
         service and client on a nats-server of its own (1 MiB max payload). MB = 10^6 \
         bytes. {total:.0} s in all. Load average (1 min) before / after the hosts / at the \
         end: {loads}.",
        caller = super::CALLER,
        iters = run.iters(),
        warmup = super::phases::WARMUP,
        callers = args.callers(),
        secs = run.duration().as_secs_f64(),
        repeats = run.repeats(),
        stream = args.stream_bytes() / super::MIB,
        frame = super::FRAME_BYTES / 1024,
        put = args.put_bytes() / super::MIB,
        puts = args.puts(),
        total = elapsed.as_secs_f64(),
        loads = loads.join(" / "),
    )
}

/// How one row reads each column.
type Cell<'a> = Box<dyn Fn(&Column) -> Option<String> + 'a>;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn latency(summary: Option<Summary>) -> Option<String> {
    summary.map(|s| format!("{:.3} / {:.3}", ms(s.p50), ms(s.p99)))
}

fn mib(value: Option<f64>) -> Option<String> {
    value.map(|v| format!("{v:.1}"))
}

/// The rows of a stream kind: MB/s, and the peaks.
fn stream_rows<'a>(
    kind: &'a str,
    size: u64,
    runs: usize,
    pick: fn(&Column) -> Option<&Transfer>,
) -> Vec<(String, Cell<'a>)> {
    vec![
        (
            format!("streamed {kind} of {size} MiB (MB/s; median, and min-max of {runs} runs)"),
            Box::new(move |c| median_and_spread(&pick(c)?.rates)),
        ),
        (
            format!("host peak RSS during the {kind}s (MiB)"),
            Box::new(move |c| mib(pick(c)?.host_peak_mib)),
        ),
        (
            format!("caller (our AppClient) peak RSS during the {kind}s (MiB)"),
            Box::new(move |c| mib(pick(c)?.caller_peak_mib)),
        ),
    ]
}

/// The markdown table, one row per metric, one column per target.
pub fn table(columns: &[Column], args: &Args) -> String {
    let callers = args.callers();
    let (stream, put) = (
        args.stream_bytes() / super::MIB,
        args.put_bytes() / super::MIB,
    );
    let runs = args.run.repeats();
    let of = |kind| columns.iter().find(|c| c.kind == kind);
    let reference = of(Kind::Reference).and_then(Column::rate);
    let mut rows: Vec<(String, Cell<'_>)> = vec![
        (
            "GET of 1 KiB, one at a time: p50 / p99 (ms); the floor's: a raw request-reply of 1 KiB"
                .to_owned(),
            Box::new(|c| latency(c.get)),
        ),
        (
            "raw request-reply of 1 KiB, each before one of the host's GETs: p50 / p99 (ms)"
                .to_owned(),
            Box::new(|c| latency(c.paired_floor)),
        ),
        (
            "GET p50 / interleaved raw request-reply p50".to_owned(),
            Box::new(|c| Some(format!("{:.2}x", c.p50_ms()? / c.floor_p50_ms()?))),
        ),
        (
            format!(
                "GET of 1 KiB with {callers} callers (requests/s; median, and min-max of {runs} runs)"
            ),
            Box::new(|c| median_and_spread(&c.rates)),
        ),
        (
            "GET requests/s, ours / reference".to_owned(),
            Box::new(move |c| {
                let ratio = c.rate()? / reference.filter(|r| *r > 0.0)?;
                (c.kind == Kind::Ours).then(|| format!("{ratio:.1}x"))
            }),
        ),
        (
            format!(
                "CPU per GET at {callers} callers: host / abi-discovery / nats-server / bench callers (µs)"
            ),
            Box::new(|c| {
                c.cpu_per_get
                    .map(|[h, d, n, b]| format!("{h:.0} / {d:.0} / {n:.0} / {b:.0}"))
            }),
        ),
    ];
    rows.extend(stream_rows("download", stream, runs, |c| {
        c.download.as_ref()
    }));
    rows.extend(stream_rows("upload", stream, runs, |c| c.upload.as_ref()));
    rows.push((
        format!(
            "overflowed document put of {put} MiB: p50 / p99 of {} (ms)",
            args.puts()
        ),
        Box::new(|c| latency(c.put.as_ref()?.time)),
    ));
    rows.push((
        "document service peak RSS during the puts (MiB)".to_owned(),
        Box::new(|c| mib(c.put.as_ref()?.service_peak_mib)),
    ));
    rows.push((
        "failed calls".to_owned(),
        Box::new(|c| {
            let puts = c.put.as_ref().map_or(0, |p| p.failures);
            Some((c.failures + puts).to_string())
        }),
    ));
    render(columns, &rows)
}

/// `rows` as a markdown table under a `metric` header naming the columns.
fn render(columns: &[Column], rows: &[(String, Cell<'_>)]) -> String {
    let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
    let mut out = format!("| metric | {} |\n|---|", names.join(" | "));
    out.push_str(&"---|".repeat(columns.len()));
    for (label, cell) in rows {
        let cells: Vec<String> = columns
            .iter()
            .map(|c| match &c.skipped {
                Some(_) => "skipped".to_owned(),
                None => cell(c).unwrap_or_else(|| "—".to_owned()),
            })
            .collect();
        let _ = write!(out, "\n| {label} | {} |", cells.join(" | "));
    }
    out.push('\n');
    out
}

/// The verdict table on the two targets for our host.
pub fn verdicts(ours: &Column, reference: &Column, callers: usize) -> String {
    let latency = ours.p50_ms().zip(ours.floor_p50_ms()).map(|(get, floor)| {
        let theirs = reference
            .p50_ms()
            .zip(reference.floor_p50_ms())
            .map(|(r, f)| format!(" (reference: {r:.3} ms vs {f:.3} ms, {:.1}x)", r / f))
            .unwrap_or_default();
        let ratio = get / floor;
        (
            format!("p50 {get:.3} ms vs raw {floor:.3} ms (interleaved): **{ratio:.2}x**{theirs}"),
            judged(ratio <= GET_P50_TARGET_RATIO),
        )
    });
    let throughput = if reference.skipped.is_some() {
        Some((
            "reference skipped".to_owned(),
            "not judged (reference skipped)",
        ))
    } else {
        ours.rate()
            .zip(reference.rate().filter(|r| *r > 0.0))
            .map(|(a, b)| {
                (
                    format!("{a:.0} vs {b:.0} requests/s: **{:.1}x**", a / b),
                    judged(a / b >= GET_THROUGHPUT_TARGET_RATIO),
                )
            })
    };
    let targets = [
        (
            format!("GET 1 KiB p50 <= {GET_P50_TARGET_RATIO:.0}x a raw request-reply of 1 KiB"),
            latency,
        ),
        (
            format!(
                "GET 1 KiB requests/s with {callers} callers >= \
                 {GET_THROUGHPUT_TARGET_RATIO:.0}x the reference's"
            ),
            throughput,
        ),
    ];
    let mut out = String::from("| target | measured | verdict |\n|---|---|---|\n");
    for (target, measured) in targets {
        let (line, verdict) =
            measured.unwrap_or_else(|| ("not measured".to_owned(), judged(false)));
        let _ = writeln!(out, "| {target} | {line} | {verdict} |");
    }
    out
}
