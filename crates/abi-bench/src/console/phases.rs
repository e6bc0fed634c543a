//! The phases: idle CPU, every instance renewing, the two pages, then the
//! updates with one event stream, with several, and with one while every
//! instance renews; each write also timed to a raw KV watcher.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use abi_proto::discovery::v1 as pb;
use abi_wire::discovery::{REGISTRY_KEY, registry_bucket};
use anyhow::Context as _;
use async_nats::jetstream;
use futures::StreamExt as _;
use prost::Message as _;
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

use super::fleet::{self, Instance};
use super::http::{self, EventStream, Seen};
use super::report::{Page, Renewals, Results, Updates};
use super::{Args, ConsoleProcess, PROJECT, SECRET};
use crate::measure::{self, Samples};
use crate::wire;

/// Unmeasured GETs of each page first.
pub const WARMUP: usize = 5;
/// How long an event, or the console's first view of the registry, may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Interval between looks while waiting.
const POLL: Duration = Duration::from_millis(20);

/// What every phase uses.
pub struct Bench<'a> {
    /// The bench's connection.
    pub nats: &'a async_nats::Client,
    /// The console under test.
    pub console: &'a ConsoleProcess,
    /// The registered instances.
    pub fleet: &'a [Instance],
    /// The run's flags.
    pub args: &'a Args,
}

/// What a write waits on: the stream's `modules` events and the KV
/// watcher's entries.
struct Watched {
    events: UnboundedReceiver<Seen>,
    entries: UnboundedReceiver<Seen>,
}

/// What each write measured besides the event's latency.
#[derive(Default)]
struct Beside {
    watcher: Samples,
    register: Samples,
    event_bytes: usize,
}

/// One write's news, each from sending the register request.
struct Written {
    /// The `modules` event naming the probe, read whole.
    event: Duration,
    /// The KV entry holding it.
    entry: Duration,
    /// The register's reply.
    reply: Duration,
    /// The event's data, bytes.
    event_bytes: usize,
}

impl Bench<'_> {
    /// Every phase, one after another.
    ///
    /// # Errors
    ///
    /// When the console never shows the whole registry, or a stream or the
    /// watcher cannot be opened.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a probe instance may stay registered.
    pub async fn all(&self) -> anyhow::Result<Results> {
        self.shows_every_instance().await?;
        let mut results = Results {
            idle_cpu_us_per_sec: self.idle().await,
            renewals: Some(self.renewals().await?),
            ..Results::default()
        };
        reset_peak(self.console.pid);
        results.shell = self.page("/").await;
        results.modules = self.page("/api/modules").await;
        results.pages_peak_mib = measure::peak_rss_mib(self.console.pid).ok();
        let writes = self.args.writes();
        for (phase, streams) in [1, self.args.streams()].into_iter().enumerate() {
            results
                .updates
                .push(self.updates(streams, phase * writes).await?);
        }
        // The same writes while every instance renews: the console then
        // rebuilds its view for each renewal too.
        let renewed = Cell::new([0u64; 2]);
        let mut busy = tokio::select! {
            updates = self.updates(1, 2 * writes) => updates?,
            () = self.renew_paced(None, &renewed) => anyhow::bail!("the renewals ended first"),
        };
        busy.renewing = Some(self.args.renew_every_secs());
        busy.failures += renewed.get()[1];
        results.updates.push(busy);
        Ok(results)
    }

    /// Waits until `/api/modules` counts every instance of the fleet.
    async fn shows_every_instance(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + EVENT_TIMEOUT;
        loop {
            let counted = http::body(self.console.addr, "/api/modules")
                .await
                .ok()
                .and_then(|body| serde_json::from_slice::<serde_json::Value>(&body).ok())
                .and_then(|view| view["instance_count"].as_u64());
            if counted == Some(fleet::INSTANCES as u64) {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the console shows {counted:?} instances, not {}",
                fleet::INSTANCES
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// The console's CPU while nothing happens, µs per second.
    async fn idle(&self) -> Option<f64> {
        let secs = self.args.idle().as_secs_f64();
        eprintln!("console idle for {secs:.1} s");
        let before = self.console.svc.cpu_now().ok()?;
        tokio::time::sleep(self.args.idle()).await;
        let after = self.console.svc.cpu_now().ok()?;
        Some((after - before) * 1e6 / secs)
    }

    /// Every instance renewing once per `--renew-every-secs`, the renewals
    /// spread evenly, for the idle phase's length, with one event stream
    /// open and the KV watcher: what the console pushes and spends in a
    /// registry's steady state. Ends once the stream has caught up.
    async fn renewals(&self) -> anyhow::Result<Renewals> {
        let duration = self.args.idle();
        let stream = EventStream::open(self.console.addr, None).await?;
        let (entries_tx, mut entries) = mpsc::unbounded_channel();
        let watcher = watch_registry(self.nats, entries_tx).await?;
        let deadline = Instant::now() + EVENT_TIMEOUT;
        while stream.modules_seen() == 0 && Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }
        eprintln!(
            "every instance renewing each {} s for {:.1} s",
            self.args.renew_every_secs(),
            duration.as_secs_f64()
        );
        while entries.try_recv().is_ok() {}
        let (events, bytes) = (stream.modules_seen(), stream.bytes_seen());
        let cpu = self.console.svc.cpu_now().ok();
        let start = Instant::now();
        let renewed = Cell::new([0u64; 2]);
        self.renew_paced(Some(duration), &renewed).await;
        let [renewed, failures] = renewed.get();
        let secs = start.elapsed().as_secs_f64();
        let cpu = self.console.svc.cpu_now().ok().zip(cpu);
        // The news of the last renewal may still be on its way.
        tokio::time::sleep(POLL).await;
        watcher.abort();
        let mut read = 0u64;
        while entries.try_recv().is_ok() {
            read += 1;
        }
        let per_sec = |n: u64| n as f64 / secs;
        let pushed = stream.modules_seen() - events;
        // Whatever the console still owes the stream is done before the
        // next phase starts.
        let deadline = Instant::now() + EVENT_TIMEOUT;
        while stream.modules_seen() - events < read && Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }
        Ok(Renewals {
            every_secs: self.args.renew_every_secs(),
            renewals_per_sec: per_sec(renewed),
            events_per_sec: per_sec(pushed),
            entries_per_sec: per_sec(read),
            stream_bytes_per_sec: per_sec(stream.bytes_seen() - bytes),
            cpu_us_per_sec: cpu.map(|(after, before)| (after - before) * 1e6 / secs),
            failures: failures + stream.lagged_seen(),
        })
    }

    /// Renews the instances in turn, each once per `--renew-every-secs`, for
    /// `duration` (`None`: until dropped), counting the renewals answered
    /// and failed in `counts`.
    async fn renew_paced(&self, duration: Option<Duration>, counts: &Cell<[u64; 2]>) {
        let renew = fleet::subject(PROJECT, "renew");
        let every = Duration::from_secs(self.args.renew_every_secs());
        let mut tick = tokio::time::interval(every / self.fleet.len() as u32);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let start = Instant::now();
        for m in self.fleet.iter().map(|i| &i.member).cycle() {
            if duration.is_some_and(|d| start.elapsed() >= d) {
                break;
            }
            tick.tick().await;
            let [renewed, failed] = counts.get();
            match wire::call::<pb::RenewResponse>(self.nats, &renew, &m.headers, &m.renew).await {
                Ok(_) => counts.set([renewed + 1, failed]),
                Err(error) => {
                    if failed == 0 {
                        eprintln!("  renewals: first error: {error:#}");
                    }
                    counts.set([renewed, failed + 1]);
                }
            }
        }
    }

    /// GETs of `path` one at a time, each on a fresh connection.
    async fn page(&self, path: &str) -> Page {
        let (addr, iters) = (self.console.addr, self.args.iters());
        eprintln!("GET {path} x{iters}");
        let warmup = measure::sequential(path, WARMUP, |_| async {
            Ok(http::get(addr, path).await?.total)
        })
        .await;
        let first_bytes = RefCell::new(Vec::with_capacity(iters));
        let body = Cell::new(None);
        let totals = measure::sequential(path, iters, |_| async {
            let fetched = http::get(addr, path).await?;
            first_bytes.borrow_mut().push(fetched.first_byte);
            body.set(Some(fetched.body));
            Ok(fetched.total)
        })
        .await;
        let first_bytes = Samples {
            latencies: first_bytes.into_inner(),
            errors: 0,
        };
        Page {
            first_byte: first_bytes.summary(),
            total: totals.summary(),
            body: body.get(),
            failures: warmup.errors + totals.errors,
        }
    }

    /// Writes with `streams` event streams open, the probes numbered from
    /// `first_probe`.
    async fn updates(&self, streams: usize, first_probe: usize) -> anyhow::Result<Updates> {
        let addr = self.console.addr;
        let name = format!("updates with {streams} stream(s)");
        let (events_tx, events) = mpsc::unbounded_channel();
        let main = EventStream::open(addr, Some(events_tx)).await?;
        let mut others = Vec::with_capacity(streams - 1);
        for _ in 1..streams {
            others.push(EventStream::open(addr, None).await?);
        }
        let (entries_tx, entries) = mpsc::unbounded_channel();
        let watcher = watch_registry(self.nats, entries_tx).await?;
        let mut watched = Watched { events, entries };
        // Every stream has its first event (the whole view): all subscribed.
        seen(&mut watched.events, "the first event", |_| true).await?;
        let deadline = Instant::now() + EVENT_TIMEOUT;
        while others.iter().any(|s| s.modules_seen() == 0) && Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }

        let writes = self.args.writes();
        eprintln!("{name}: {writes} writes");
        reset_peak(self.console.pid);
        let (cpu_before, events_before) = (self.console.svc.cpu_now().ok(), main.modules_seen());
        let lock = tokio::sync::Mutex::new(watched);
        let beside = RefCell::new(Beside::default());
        let (lock, beside_ref) = (&lock, &beside);
        let samples = measure::sequential(&name, writes, |k| async move {
            let probe = Instance::probe(SECRET, first_probe + k);
            let mut watched = lock.lock().await;
            let written = self.write(&probe, &mut watched).await?;
            let mut beside = beside_ref.borrow_mut();
            beside.watcher.latencies.push(written.entry);
            beside.register.latencies.push(written.reply);
            beside.event_bytes = written.event_bytes;
            Ok(written.event)
        })
        .await;
        let cpu = self.console.svc.cpu_now().ok().zip(cpu_before);
        let updates = main.modules_seen() - events_before;
        let peak_mib = measure::peak_rss_mib(self.console.pid).ok();
        watcher.abort();
        // The other streams read every event the first one did.
        let wanted = main.modules_seen();
        let deadline = Instant::now() + EVENT_TIMEOUT;
        while others.iter().any(|s| s.modules_seen() < wanted) && Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }
        let missed: u64 = others
            .iter()
            .chain([&main])
            .map(|s| wanted.saturating_sub(s.modules_seen()) + s.lagged_seen())
            .sum();
        let beside = beside.into_inner();
        Ok(Updates {
            streams,
            renewing: None,
            event: samples.summary(),
            watcher: beside.watcher.summary(),
            register: beside.register.summary(),
            event_bytes: (beside.event_bytes > 0).then_some(beside.event_bytes),
            cpu_us_per_update: cpu
                .map(|(after, before)| (after - before) * 1e6 / updates.max(1) as f64),
            peak_mib,
            failures: samples.errors + missed,
        })
    }

    /// Registers `probe` and times its news: the `modules` event naming it,
    /// the KV entry holding it, and the register's reply; then unregisters
    /// it and waits for both to say it is gone.
    async fn write(&self, probe: &Instance, watched: &mut Watched) -> anyhow::Result<Written> {
        let needle = format!("\"{}\"", probe.id);
        let m = &probe.member;
        let start = Instant::now();
        let register = fleet::subject(PROJECT, "register");
        wire::call::<pb::RegisterResponse>(self.nats, &register, &m.headers, &m.register).await?;
        let replied = start.elapsed();
        let event = seen(&mut watched.events, "its event", |d| d.contains(&needle)).await?;
        let entry = seen(&mut watched.entries, "its KV entry", |d| {
            d.contains(&needle)
        })
        .await?;
        let unregister = fleet::subject(PROJECT, "unregister");
        wire::call::<pb::UnregisterResponse>(self.nats, &unregister, &m.headers, &probe.unregister)
            .await?;
        seen(&mut watched.events, "its removal", |d| !d.contains(&needle)).await?;
        seen(&mut watched.entries, "its KV removal", |d| {
            !d.contains(&needle)
        })
        .await?;
        Ok(Written {
            event: event.at - start,
            entry: entry.at - start,
            reply: replied,
            event_bytes: event.data.len(),
        })
    }
}

/// The first of `news` whose data `wanted` accepts, within the timeout.
async fn seen(
    news: &mut UnboundedReceiver<Seen>,
    what: &str,
    wanted: impl Fn(&str) -> bool,
) -> anyhow::Result<Seen> {
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    loop {
        let next = tokio::time::timeout_at(deadline, news.recv())
            .await
            .with_context(|| format!("{what}: nothing within {EVENT_TIMEOUT:?}"))?
            .with_context(|| format!("{what}: the stream ended"))?;
        if wanted(&next.data) {
            return Ok(next);
        }
    }
}

/// A raw JetStream KV watcher of the registry key: each entry stamped as
/// it arrives, its data the live instance ids, quoted, as JSON quotes them.
async fn watch_registry(
    nats: &async_nats::Client,
    entries: UnboundedSender<Seen>,
) -> anyhow::Result<JoinHandle<()>> {
    let store = jetstream::new(nats.clone())
        .get_key_value(registry_bucket(PROJECT))
        .await
        .context("the registry bucket")?;
    let mut watch = store
        .watch(REGISTRY_KEY)
        .await
        .context("watch the registry")?;
    Ok(tokio::spawn(async move {
        while let Some(Ok(entry)) = watch.next().await {
            let at = Instant::now();
            let Ok(state) = pb::RegistryState::decode(entry.value) else {
                continue;
            };
            let ids: Vec<String> = state
                .records
                .iter()
                .filter_map(|r| r.instance.as_ref())
                .map(|i| format!("\"{}\"", i.instance_id))
                .collect();
            if entries
                .send(Seen {
                    at,
                    data: ids.join(","),
                })
                .is_err()
            {
                break;
            }
        }
    }))
}

/// Resets the peak RSS (`VmHWM`) of `pid` to its current size
/// (`/proc/<pid>/clear_refs`), so the next reading is the peak of what
/// follows; a failure is said and leaves the peak since the start.
fn reset_peak(pid: u32) {
    if let Err(error) = std::fs::write(format!("/proc/{pid}/clear_refs"), "5") {
        eprintln!("  console: peak RSS not reset: {error}");
    }
}
