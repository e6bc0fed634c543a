//! One execution: the handler (or its stream), each event's fragments and
//! manifest stored create-only, then the record's `last_sequence` moved by
//! compare-and-swap, then a pushed `RunUpdate`; the result at sequence 0;
//! the terminal record; the claim released; the final push. Cancel, the
//! deadline and the idle timeout stop it the reference's way: the context's
//! token first, `CANCELLING` saved, then the handler's future dropped.

use abi_wire::ErrorCode;
use abi_wire::agents::{RunStatus, field};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_document_model::Data;
use abi_proto::agent::v1 as apb;
use abi_wire::agents::{self as wire, is_terminal};
use futures::StreamExt as _;
use prost::Message as _;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use tracing::{debug, error, warn};

use super::{Shared, writes};
use crate::handler::{AgentEvent, InvocationContext};
use crate::record::{self, Update};
use abi_sdk_core::CallError;
use abi_sdk_core::documents::BatchWrite;

/// The largest result an invoke stores in one batch with its outcome: the
/// text goes in twice (its message event and the result), and the batch
/// stays well under the broker's default payload limit (larger ones are
/// written one document per request, as before).
const BATCHED_RESULT_BYTES: usize = 32 * 1024;

/// The runs executing in this process.
#[derive(Default)]
pub(crate) struct Runs {
    runs: Mutex<HashMap<String, Arc<Run>>>,
    /// Submits between the capacity check and their run's start.
    reserved: Mutex<usize>,
}

impl Runs {
    pub(crate) fn len(&self) -> usize {
        self.runs.lock().map(|r| r.len()).unwrap_or(0)
    }

    pub(crate) fn get(&self, key: &str) -> Option<Arc<Run>> {
        self.runs.lock().ok()?.get(key).cloned()
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.runs.lock().is_ok_and(|r| r.contains_key(key))
    }

    pub(crate) fn all(&self) -> Vec<Arc<Run>> {
        self.runs
            .lock()
            .map(|r| r.values().cloned().collect())
            .unwrap_or_default()
    }

    /// A slot for one more run, or `None` at `max` (live and reserved).
    pub(crate) fn reserve(&self, max: usize) -> Option<Reservation<'_>> {
        let live = self.len();
        let mut reserved = self.reserved.lock().unwrap_or_else(|e| e.into_inner());
        if live + *reserved >= max {
            return None;
        }
        *reserved += 1;
        Some(Reservation { runs: self })
    }

    fn insert(&self, run: Arc<Run>) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(run.key.clone(), run);
        }
    }

    fn remove(&self, key: &str) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.remove(key);
        }
    }
}

/// A reserved slot; released on drop (the run, if started, holds its own).
pub(crate) struct Reservation<'a> {
    runs: &'a Runs,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut reserved = self.runs.reserved.lock().unwrap_or_else(|e| e.into_inner());
        *reserved = reserved.saturating_sub(1);
    }
}

/// The record as last written, and its version.
pub(crate) struct Stored {
    pub(crate) data: Data,
    pub(crate) version: i64,
}

/// One run executing here.
pub(crate) struct Run {
    pub(crate) key: String,
    pub(crate) name: String,
    pub(crate) context: InvocationContext,
    pub(crate) claim_key: String,
    pub(crate) claim_version: i64,
    pub(crate) record: tokio::sync::Mutex<Stored>,
    watchers: Mutex<Vec<String>>,
    progress: Mutex<Instant>,
    cancel_reason: Mutex<Option<RunStatus>>,
    /// Cancelled to drop the handler's future.
    abort: CancellationToken,
    /// Cancelled when the run ended: the timers stop.
    ended: CancellationToken,
    /// Set when the claim was released with the run's outcome (one batch).
    claim_released: std::sync::atomic::AtomicBool,
}

impl Run {
    pub(crate) fn new(
        key: String,
        name: String,
        context: InvocationContext,
        (claim_key, claim_version): (String, i64),
        stored: Stored,
        watcher: Option<String>,
    ) -> Self {
        Self {
            key,
            name,
            context,
            claim_key,
            claim_version,
            record: tokio::sync::Mutex::new(stored),
            watchers: Mutex::new(watcher.into_iter().collect()),
            progress: Mutex::new(Instant::now()),
            cancel_reason: Mutex::new(None),
            abort: CancellationToken::new(),
            ended: CancellationToken::new(),
            claim_released: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Adds a watcher inbox (a resubmission).
    pub(crate) fn watch(&self, inbox: &str) {
        if inbox.is_empty() {
            return;
        }
        if let Ok(mut w) = self.watchers.lock()
            && !w.iter().any(|i| i == inbox)
        {
            w.push(inbox.to_owned());
        }
    }

    fn touch(&self) {
        if let Ok(mut p) = self.progress.lock() {
            *p = Instant::now();
        }
    }

    fn idle_for(&self) -> Duration {
        self.progress
            .lock()
            .map(|p| p.elapsed())
            .unwrap_or_default()
    }

    fn reason(&self) -> Option<RunStatus> {
        self.cancel_reason.lock().ok().and_then(|r| *r)
    }
}

/// How a run's body stopped early.
#[derive(Debug)]
enum Stop {
    Cancelled,
    Failed(String),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Cancelled => f.write_str("cancelled"),
            Stop::Failed(code) => write!(f, "failed: {code}"),
        }
    }
}

impl From<CallError> for Stop {
    fn from(e: CallError) -> Self {
        // A store refusal carries its code; anything else the reference
        // reports as AGENT_FAILED (an exception that is no RPCError).
        Stop::Failed(
            e.code()
                .unwrap_or(ErrorCode::AgentFailed.as_str())
                .to_owned(),
        )
    }
}

/// What a submit starts.
pub(crate) struct Start {
    pub(crate) mode: String,
    pub(crate) prompt: String,
    pub(crate) deadline_secs: u32,
}

/// The handler's work for one run.
enum Body {
    Invoke(crate::handler::InvokeFuture),
    Stream(crate::handler::EventStream),
}

/// Registers `run` and spawns its execution and its timers.
pub(crate) fn spawn(shared: &Arc<Shared>, run: Arc<Run>, start: Start) {
    let Some(handler) = shared.handlers.get(&run.name).cloned() else {
        // Submits are only accepted for served agents; nothing to run.
        return;
    };
    let stream = if start.mode == "stream" {
        handler.stream(start.prompt.clone(), run.context.clone())
    } else {
        None
    };
    let streamed = stream.is_some();
    let body = match stream {
        Some(stream) => Body::Stream(stream),
        None => Body::Invoke(handler.invoke(start.prompt, run.context.clone())),
    };
    run.touch();
    shared.runs.insert(run.clone());
    // An unstreamed run reports no progress until it returns: the caller's
    // deadline bounds it; without one, inactivity does.
    if streamed || start.deadline_secs == 0 {
        let (s, r) = (shared.clone(), run.clone());
        shared
            .stopping
            .work()
            .spawn(async move { watch_progress(&s, &r).await });
    }
    if start.deadline_secs > 0 {
        let (s, r) = (shared.clone(), run.clone());
        let after = Duration::from_secs(u64::from(start.deadline_secs));
        shared.stopping.work().spawn(async move {
            tokio::select! {
                () = r.ended.cancelled() => {}
                () = tokio::time::sleep(after) => cancel(&s, &r, RunStatus::TimedOut).await,
            }
        });
    }
    // The run continues the submit's trace (the reference's "agent <name>
    // run" span, under the submit's SERVER span).
    let span = abi_sdk_core::traces::internal_span(&format!("agent {} run", run.name));
    let (s, r) = (shared.clone(), run);
    shared
        .stopping
        .work()
        .spawn(async move { execute(&s, &r, body).await }.instrument(span));
}

async fn watch_progress(shared: &Shared, run: &Run) {
    loop {
        let remaining = shared.options.idle_timeout.saturating_sub(run.idle_for());
        if remaining.is_zero() {
            cancel(shared, run, RunStatus::TimedOut).await;
            return;
        }
        tokio::select! {
            () = run.ended.cancelled() => return,
            () = tokio::time::sleep(remaining) => {}
        }
    }
}

/// Stops `run` for `reason` (`CANCELLED`, `TIMED_OUT`): the context's token,
/// then `CANCELLING` saved, then the handler's future dropped. A run already
/// ending, or stopped before, is left alone.
pub(crate) async fn cancel(shared: &Shared, run: &Run, reason: RunStatus) {
    if run.ended.is_cancelled() || run.context.cancelled.is_cancelled() {
        return;
    }
    if is_terminal(&record::status(&run.record.lock().await.data)) {
        return;
    }
    if let Ok(mut r) = run.cancel_reason.lock() {
        *r = Some(reason);
    }
    run.context.cancelled.cancel();
    if let Err(err) = save(shared, run, Update::Status(RunStatus::Cancelling)).await {
        debug!(error = %err, "CANCELLING not saved");
    }
    if !is_terminal(&record::status(&run.record.lock().await.data)) {
        run.abort.cancel();
    }
}

async fn execute(shared: &Shared, run: &Run, body: Body) {
    let outcome = tokio::select! {
        biased;
        () = run.abort.cancelled() => Err(Stop::Cancelled),
        outcome = perform(shared, run, body) => outcome,
    };
    let finish = match outcome {
        Ok(()) => Ok(()),
        Err(Stop::Cancelled) => {
            let reason = run.reason().unwrap_or(RunStatus::Cancelled);
            let ended = Update::Ended {
                status: reason,
                code: reason.as_str(),
                message: wire::STOPPED_MESSAGE,
            };
            save(shared, run, ended).await.map_err(|e| e.to_string())
        }
        Err(Stop::Failed(code)) => {
            let ended = Update::Ended {
                status: RunStatus::Failed,
                code: &code,
                message: wire::FAILED_MESSAGE,
            };
            save(shared, run, ended).await.map_err(|e| e.to_string())
        }
    };
    run.ended.cancel();
    let completed = match finish {
        Ok(()) => true,
        Err(err) => {
            error!(invocation = %run.context.invocation_id, error = %err,
                "agent run stopped without durable completion; reconcile its claim");
            false
        }
    };
    let released = run
        .claim_released
        .load(std::sync::atomic::Ordering::Acquire);
    if completed
        && !released
        && let Err(err) = shared
            .documents()
            .delete(
                &shared.collections.claims,
                &run.claim_key,
                Some(run.claim_version),
            )
            .await
    {
        error!(invocation = %run.context.invocation_id, error = %err,
            "conversation claim release failed; reconcile before another run");
    }
    shared.runs.remove(&run.key);
    if completed {
        // After leaving the runs: a Status read now reports the end.
        let (status, last) = {
            let stored = run.record.lock().await;
            (
                record::status(&stored.data),
                record::int(&stored.data, field::LAST_SEQUENCE),
            )
        };
        push(
            shared,
            run,
            &apb::RunUpdate {
                status,
                last_sequence: u64::try_from(last).unwrap_or(0),
                ..Default::default()
            },
        )
        .await;
    }
}

async fn perform(shared: &Shared, run: &Run, body: Body) -> Result<(), Stop> {
    let result = match body {
        Body::Stream(mut stream) => {
            let (mut messages, mut done) = (Vec::new(), false);
            while let Some(item) = stream.next().await {
                let event = item.map_err(handler_failure)?;
                if done {
                    return Err(Stop::Failed(ErrorCode::InvalidStream.as_str().into()));
                }
                event_committed(shared, run, &event).await?;
                if event.event == wire::MESSAGE_EVENT {
                    messages.push(event.data.clone());
                }
                done = event.event == wire::DONE_EVENT;
            }
            if !done {
                event_committed(
                    shared,
                    run,
                    &AgentEvent::new(wire::DONE_EVENT, wire::DONE_DATA),
                )
                .await?;
            }
            messages.join("\n")
        }
        Body::Invoke(future) => {
            let result = future.await.map_err(handler_failure)?;
            return invoke_committed(shared, run, result).await;
        }
    };
    let parts = store_output(shared, run, 0, &result).await?;
    let succeeded = Update::Succeeded {
        result_parts: parts,
        last_sequence: None,
    };
    save(shared, run, succeeded).await
}

fn handler_failure(e: crate::handler::HandlerError) -> Stop {
    warn!(error = %e.message, "agent handler failed");
    Stop::Failed(
        e.code
            .unwrap_or_else(|| ErrorCode::AgentFailed.as_str().into()),
    )
}

/// Merges `updates` into the record, compare-and-swap on the version this
/// run last wrote (the run is the record's only writer while it executes).
async fn save(shared: &Shared, run: &Run, update: Update<'_>) -> Result<(), Stop> {
    let mut stored = run.record.lock().await;
    let status = update.status();
    if status == Some(RunStatus::Cancelling) && is_terminal(&record::status(&stored.data)) {
        return Ok(());
    }
    if status == Some(RunStatus::Succeeded) && run.context.cancelled.is_cancelled() {
        return Err(Stop::Cancelled);
    }
    let mut candidate = stored.data.clone();
    update.apply(&mut candidate, record::now);
    if record::json_size(&candidate) > wire::MAX_RECORD_BYTES {
        return Err(Stop::Failed(ErrorCode::OutputLimit.as_str().into()));
    }
    let doc = writes::owner_write(shared, &run.key, candidate.clone(), stored.version).await?;
    stored.data = candidate;
    stored.version = doc.version;
    Ok(())
}

/// The 8192-byte fragments of `text` at `sequence`: ids and documents.
fn fragments(run: &Run, sequence: u64, text: &str) -> Vec<(String, Data)> {
    let bytes = text.as_bytes();
    let chunks: Vec<&[u8]> = if bytes.is_empty() {
        vec![&[][..]]
    } else {
        bytes.chunks(wire::PART_BYTES).collect()
    };
    chunks
        .iter()
        .enumerate()
        .map(|(part, chunk)| {
            (
                wire::part_id(&run.key, sequence, part as u64),
                record::fragment(chunk),
            )
        })
        .collect()
}

/// Stores `text` in 8192-byte fragments at `sequence`, create-only; returns
/// how many.
async fn store_output(shared: &Shared, run: &Run, sequence: u64, text: &str) -> Result<i64, Stop> {
    let fragments = fragments(run, sequence, text);
    let count = fragments.len() as i64;
    for (id, data) in fragments {
        shared
            .documents()
            .put(&shared.collections.events, &id, data, Some(0))
            .await?;
        run.touch();
    }
    Ok(count)
}

/// The event documents of `event` at `sequence` (fragments, then manifest)
/// as create-only batch writes, added to `writes`; returns its parts.
fn event_writes(
    shared: &Shared,
    run: &Run,
    sequence: u64,
    event: &AgentEvent,
    writes: &mut Vec<BatchWrite>,
) -> Result<i64, Stop> {
    if event.event.chars().count() > wire::MAX_EVENT_NAME_CHARS {
        return Err(Stop::Failed(ErrorCode::InvalidStream.as_str().into()));
    }
    let parts = output_writes(shared, run, sequence, &event.data, writes);
    writes.push(create(
        shared,
        wire::manifest_id(&run.key, sequence),
        record::manifest(&event.event, parts, event.chat_source),
    ));
    Ok(parts)
}

/// The fragments of `text` at `sequence` as create-only batch writes, added
/// to `writes`; returns how many.
fn output_writes(
    shared: &Shared,
    run: &Run,
    sequence: u64,
    text: &str,
    writes: &mut Vec<BatchWrite>,
) -> i64 {
    let fragments = fragments(run, sequence, text);
    let count = fragments.len() as i64;
    writes.extend(
        fragments
            .into_iter()
            .map(|(id, data)| create(shared, id, data)),
    );
    count
}

fn create(shared: &Shared, id: String, data: Data) -> BatchWrite {
    BatchWrite::Put {
        collection: shared.collections.events.clone(),
        id,
        data,
        if_version: Some(0),
    }
}

/// An invoke's end in one batch, where our document service serves them:
/// both events, the result, the record `SUCCEEDED` past both events and the
/// claim's release, all or nothing. False when batches are not served
/// here (nothing was written).
async fn invoke_batched(shared: &Shared, run: &Run, result: &str) -> Result<bool, Stop> {
    let message = AgentEvent::message(result.to_owned());
    let done = AgentEvent::new(wire::DONE_EVENT, wire::DONE_DATA);
    let mut stored = run.record.lock().await;
    let last = u64::try_from(record::int(&stored.data, field::LAST_SEQUENCE)).unwrap_or(0);
    let mut immutable = Vec::new();
    let message_parts = event_writes(shared, run, last + 1, &message, &mut immutable)?;
    let done_parts = event_writes(shared, run, last + 2, &done, &mut immutable)?;
    let result_parts = output_writes(shared, run, 0, &message.data, &mut immutable);
    let succeeded = Update::Succeeded {
        result_parts,
        last_sequence: Some((last + 2) as i64),
    };
    // The checks `save` makes before its write.
    if run.context.cancelled.is_cancelled() {
        return Err(Stop::Cancelled);
    }
    let mut candidate = stored.data.clone();
    succeeded.apply(&mut candidate, record::now);
    if record::json_size(&candidate) > wire::MAX_RECORD_BYTES {
        return Err(Stop::Failed(ErrorCode::OutputLimit.as_str().into()));
    }
    let ended = writes::end_with(
        shared,
        immutable,
        (&run.key, candidate.clone(), stored.version),
        (&run.claim_key, run.claim_version),
    )
    .await;
    match ended {
        Ok(doc) => {
            stored.data = candidate;
            stored.version = doc.version;
        }
        Err(e) if e.unsupported() => return Ok(false),
        Err(e) => return Err(e.error.into()),
    }
    drop(stored);
    run.claim_released
        .store(true, std::sync::atomic::Ordering::Release);
    run.touch();
    push_event(shared, run, last + 1, &message, message_parts).await;
    push_event(shared, run, last + 2, &done, done_parts).await;
    Ok(true)
}

/// An invoke's end: its message and done events and its result, then one
/// save. The reference writes the two events one after the other, each
/// followed by a cursor save, then saves the outcome; every one of those
/// documents but the record is create-only and independent of the others,
/// so here they are written at once, and the record moves once, to the
/// cursor past both events, `SUCCEEDED` and the result's parts. The stored
/// documents are the reference's (only the record's intermediate versions
/// are skipped); the updates still go out one per event, after the save.
async fn invoke_committed(shared: &Shared, run: &Run, result: String) -> Result<(), Stop> {
    if run.context.cancelled.is_cancelled() {
        return Err(Stop::Cancelled);
    }
    if result.len() <= BATCHED_RESULT_BYTES && invoke_batched(shared, run, &result).await? {
        return Ok(());
    }
    let last = {
        let stored = run.record.lock().await;
        u64::try_from(record::int(&stored.data, field::LAST_SEQUENCE)).unwrap_or(0)
    };
    let message = AgentEvent::message(result);
    let done = AgentEvent::new(wire::DONE_EVENT, wire::DONE_DATA);
    let (message_parts, done_parts, result_parts) = tokio::try_join!(
        event_documents(shared, run, last + 1, &message),
        event_documents(shared, run, last + 2, &done),
        store_output(shared, run, 0, &message.data),
    )?;
    let succeeded = Update::Succeeded {
        result_parts,
        last_sequence: Some((last + 2) as i64),
    };
    save(shared, run, succeeded).await?;
    run.touch();
    push_event(shared, run, last + 1, &message, message_parts).await;
    push_event(shared, run, last + 2, &done, done_parts).await;
    Ok(())
}

/// One event: fragments, manifest, cursor, push.
async fn event_committed(shared: &Shared, run: &Run, event: &AgentEvent) -> Result<(), Stop> {
    if run.context.cancelled.is_cancelled() {
        return Err(Stop::Cancelled);
    }
    let sequence = {
        let stored = run.record.lock().await;
        u64::try_from(record::int(&stored.data, field::LAST_SEQUENCE)).unwrap_or(0) + 1
    };
    let parts = event_documents(shared, run, sequence, event).await?;
    // The cursor moves only after every immutable fragment committed.
    let cursor = Update::Cursor {
        last_sequence: sequence as i64,
    };
    save(shared, run, cursor).await?;
    run.touch();
    push_event(shared, run, sequence, event, parts).await;
    Ok(())
}

/// The immutable documents of event `sequence`: its fragments, then its
/// manifest (create-only); returns its parts.
async fn event_documents(
    shared: &Shared,
    run: &Run,
    sequence: u64,
    event: &AgentEvent,
) -> Result<i64, Stop> {
    let mut writes = Vec::new();
    let parts = event_writes(shared, run, sequence, event, &mut writes)?;
    for write in writes {
        if let BatchWrite::Put {
            collection,
            id,
            data,
            if_version,
        } = write
        {
            shared
                .documents()
                .put(&collection, &id, data, if_version)
                .await?;
            run.touch();
        }
    }
    Ok(parts)
}

/// Pushes committed event `sequence` to the watchers, its data inline when
/// small enough, else its parts to read.
async fn push_event(shared: &Shared, run: &Run, sequence: u64, event: &AgentEvent, parts: i64) {
    let max_payload = shared.links.nats.max_payload();
    let inline = event.data.len() <= wire::INLINE_UPDATE_BYTES.min(max_payload / 4);
    let update = apb::RunUpdate {
        event: Some(apb::AgentEvent {
            sequence,
            event: event.event.clone(),
            data: if inline {
                event.data.clone()
            } else {
                String::new()
            },
            parts: if inline {
                0
            } else {
                u32::try_from(parts).unwrap_or(0)
            },
            chat_source: (event.chat_source == Some(false)).then_some(false),
        }),
        ..Default::default()
    };
    push(shared, run, &update).await;
}

/// Tells the run's watchers what just committed. Hints only (core NATS, at
/// most once): Status stays authoritative, so a failed push fails nothing.
async fn push(shared: &Shared, run: &Run, update: &apb::RunUpdate) {
    let watchers = run.watchers.lock().map(|w| w.clone()).unwrap_or_default();
    if watchers.is_empty() {
        return;
    }
    let payload = bytes::Bytes::from(update.encode_to_vec());
    for inbox in watchers {
        if let Err(err) = shared.links.nats.publish(inbox, payload.clone()).await {
            debug!(error = %err, "run update not delivered; watchers read the status");
        }
    }
}
