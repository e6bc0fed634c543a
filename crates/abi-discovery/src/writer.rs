//! The group-commit writer: the one task per process that writes the
//! snapshot.
//!
//! Callers send a [`WriteCmd`] on a bounded channel and wait on its oneshot.
//! The writer takes one command, then everything already waiting (up to
//! `max_batch`, optionally lingering `max_delay` for more), and commits the
//! whole batch with a single compare-and-swap:
//!
//! 1. start from the cached snapshot when there is one (a stale cache only
//!    costs a conflict; when nothing is to be written, a cheap revision check
//!    confirms the refusals), else read the store;
//! 2. drop expired records, then apply each mutation in order; one that fails
//!    is left out and answered with its error, the others see the state as if
//!    it had never been sent (the rules leave the state untouched on error).
//!    The batch shares one [`Draft`], which copies the registry only for the
//!    mutations that may change statuses;
//! 3. if any mutation succeeded, compare-and-swap once on the revision
//!    started from; on a conflict pause (random, doubling, at most
//!    [`MAX_CONFLICT_PAUSE`]), re-read and re-apply the whole batch: at least
//!    [`MIN_ATTEMPTS`] attempts, then more while [`CONFLICT_BUDGET`] lasts,
//!    then answer `REGISTRY_BUSY` ([`after_conflict`] decides);
//! 4. answer every caller.
//!
//! A store failure or timeout answers the whole batch `UNAVAILABLE` and drops
//! the cache. This matches the reference's `_mutate`/`_write`, with the
//! writer as a task instead of a lock.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use abi_registry::{Draft, Error, ErrorCode, Mutation, Outcome, Rules};
use bytes::Bytes;
use prost::Message;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::clock::Clock;
use crate::error::DiscoveryError;
use crate::store::cache::{Decoded, SnapshotCache};
use crate::store::decode::{decode, error_chain};
use crate::store::{CasError, SnapshotStore};
use crate::telemetry::Counters;

/// Compare-and-swap attempts every batch gets before it may be answered
/// `REGISTRY_BUSY` (the reference's five, which are all it makes).
pub const MIN_ATTEMPTS: usize = 5;

/// How long a batch keeps retrying conflicts past its first
/// [`MIN_ATTEMPTS`]. Every conflict means another owner's write landed, so
/// retrying is progress, not a livelock; on a loaded machine two owners can
/// lose five races in a row with no fault at all, and the reference's fixed
/// five then answer `REGISTRY_BUSY` to ordinary traffic. Well under the
/// callers' request deadline (10 s in the SDK), so a busy answer still
/// reaches them.
pub const CONFLICT_BUDGET: Duration = Duration::from_secs(2);

/// Upper bound of the random pause after the first conflict of a batch; it
/// doubles with each further conflict, up to [`MAX_CONFLICT_PAUSE`].
///
/// On a replicated bucket the write that beat ours may still be in flight
/// when we learn of it (nats-server's 10164): re-reading at once returns the
/// old snapshot, and two owners retrying in lockstep can conflict again and
/// again, especially while a restarted node catches up and replication
/// slows. A short random pause lets the winner's write land and the two
/// owners fall out of step.
pub const CONFLICT_PAUSE: Duration = Duration::from_millis(10);

/// The longest pause between two attempts of a batch.
pub const MAX_CONFLICT_PAUSE: Duration = Duration::from_millis(200);

/// After conflict number `attempt` (from 1) of a batch, `elapsed` after its
/// first attempt: the pause before the next attempt, or `None` to answer
/// `REGISTRY_BUSY`. `jitter` in `[0, 1)` scales the pause.
pub(crate) fn after_conflict(attempt: usize, elapsed: Duration, jitter: f64) -> Option<Duration> {
    let doubled = CONFLICT_PAUSE.saturating_mul(1 << attempt.saturating_sub(1).min(8));
    let pause = doubled
        .min(MAX_CONFLICT_PAUSE)
        .mul_f64(jitter.clamp(0.0, 1.0));
    (attempt < MIN_ATTEMPTS || elapsed + pause < CONFLICT_BUDGET).then_some(pause)
}

/// The message of `REGISTRY_BUSY`, as the reference words it.
pub const BUSY_MESSAGE: &str = "Concurrent registry updates; retry control operation";

/// What a caller gets back for one mutation.
pub type WriteResult = Result<Outcome, DiscoveryError>;

/// One mutation for the writer, with where to send its answer.
#[derive(Debug)]
pub struct WriteCmd {
    /// The change to apply.
    pub mutation: Mutation,
    /// The caller's identity (the verified token's subject).
    pub owner: String,
    /// Where the answer goes; a dropped receiver is fine (the write happens
    /// anyway, like in the reference).
    pub reply: oneshot::Sender<WriteResult>,
}

/// The writer's batching settings.
#[derive(Debug, Clone)]
pub(crate) struct WriterConfig {
    pub(crate) max_batch: usize,
    pub(crate) max_delay: Duration,
}

/// The writer task's state.
#[derive(Debug)]
pub(crate) struct Writer {
    pub(crate) store: Arc<dyn SnapshotStore>,
    pub(crate) rules: Rules,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) cache: Arc<SnapshotCache>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) cfg: WriterConfig,
}

/// Why an attempt did not commit.
enum AttemptError {
    Conflict,
    /// Every mutation was refused on a cached snapshot that turned out to be
    /// out of date: the refusals may be wrong, try again on a fresh read.
    Stale,
    Store(String),
}

impl Writer {
    /// Runs until `shutdown` fires or every sender is gone, then closes the
    /// channel and commits what was already queued.
    pub(crate) async fn run(
        self,
        mut cmd_rx: mpsc::Receiver<WriteCmd>,
        shutdown: CancellationToken,
    ) {
        loop {
            let first = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                cmd = cmd_rx.recv() => match cmd {
                    Some(cmd) => cmd,
                    None => return,
                },
            };
            let batch = self.collect(first, &mut cmd_rx).await;
            self.commit_batch(batch).await;
        }
        // Refuse new commands, then flush the ones already accepted.
        cmd_rx.close();
        let mut flushed = 0usize;
        while let Some(first) = cmd_rx.recv().await {
            let batch = self.collect_ready(first, &mut cmd_rx);
            flushed += batch.len();
            self.commit_batch(batch).await;
        }
        tracing::info!(flushed, "discovery writer stopped");
    }

    /// `first` plus whatever is waiting, lingering up to `max_delay` for more
    /// when the batch is not full.
    async fn collect(
        &self,
        first: WriteCmd,
        cmd_rx: &mut mpsc::Receiver<WriteCmd>,
    ) -> Vec<WriteCmd> {
        let mut batch = self.collect_ready(first, cmd_rx);
        if self.cfg.max_delay.is_zero() {
            return batch;
        }
        let linger_until = tokio::time::Instant::now() + self.cfg.max_delay;
        while batch.len() < self.cfg.max_batch {
            // recv is cancel safe: a timeout loses no command.
            match tokio::time::timeout_at(linger_until, cmd_rx.recv()).await {
                Ok(Some(cmd)) => batch.push(cmd),
                Ok(None) | Err(_) => break,
            }
        }
        batch
    }

    /// `first` plus whatever is already waiting, up to `max_batch`.
    fn collect_ready(
        &self,
        first: WriteCmd,
        cmd_rx: &mut mpsc::Receiver<WriteCmd>,
    ) -> Vec<WriteCmd> {
        let mut batch = vec![first];
        while batch.len() < self.cfg.max_batch {
            match cmd_rx.try_recv() {
                Ok(cmd) => batch.push(cmd),
                Err(_) => break,
            }
        }
        batch
    }

    /// Commits one batch and answers every command in it.
    async fn commit_batch(&self, batch: Vec<WriteCmd>) {
        let span = tracing::debug_span!(
            "writer_batch",
            batch_len = batch.len(),
            attempts = tracing::field::Empty,
            commit_ms = tracing::field::Empty,
        );
        async {
            Counters::bump(&self.counters.batches);
            self.counters.batch_sizes.0.observe(batch.len() as u64);
            self.counters
                .mutations
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let started = Instant::now();
            let (mutations, replies): (Vec<_>, Vec<_>) = batch
                .into_iter()
                .map(|cmd| ((cmd.mutation, cmd.owner), cmd.reply))
                .unzip();
            let answers = self.commit(&mutations).await;
            tracing::Span::current().record("commit_ms", started.elapsed().as_secs_f64() * 1000.0);
            for (reply, answer) in replies.into_iter().zip(answers) {
                // The caller may have gone away (cancelled); the write stands.
                let _ = reply.send(answer);
            }
        }
        .instrument(span)
        .await;
    }

    /// The answers for `mutations`, in order, after committing them.
    async fn commit(&self, mutations: &[(Mutation, String)]) -> Vec<WriteResult> {
        // A snapshot of an earlier epoch belongs to a bucket that is gone: its
        // revision says nothing about the current one.
        let mut cached = self
            .cache
            .get()
            .filter(|cached| cached.epoch == self.store.epoch());
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            if attempt > 1 {
                Counters::bump(&self.counters.retries);
            }
            tracing::Span::current().record("attempts", attempt);
            match self.attempt(cached.take(), mutations).await {
                Ok(answers) => return answers,
                Err(AttemptError::Conflict) => {
                    Counters::bump(&self.counters.conflicts);
                    match after_conflict(attempt, started.elapsed(), rand::random::<f64>()) {
                        Some(pause) => tokio::time::sleep(pause).await,
                        None => break,
                    }
                }
                Err(AttemptError::Stale) => {}
                Err(AttemptError::Store(error)) => {
                    Counters::bump(&self.counters.store_errors);
                    self.cache.clear();
                    tracing::warn!(%error, batch_len = mutations.len(), "registry write failed");
                    return vec![Err(DiscoveryError::Unavailable); mutations.len()];
                }
            }
        }
        Counters::bump(&self.counters.busy);
        tracing::warn!(
            batch_len = mutations.len(),
            attempts = attempt,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "registry busy: every compare-and-swap conflicted"
        );
        let busy = DiscoveryError::Refused(Error::new(ErrorCode::RegistryBusy, BUSY_MESSAGE));
        vec![Err(busy); mutations.len()]
    }

    /// One read-apply-CAS round, starting from `start` when given.
    async fn attempt(
        &self,
        start: Option<Decoded>,
        mutations: &[(Mutation, String)],
    ) -> Result<Vec<WriteResult>, AttemptError> {
        let from_cache = start.is_some();
        let start = match start {
            Some(decoded) => decoded,
            None => self.read().await?,
        };
        let now = self.clock.now();
        let mut state = (**start.state()).clone();
        abi_registry::prune_expired(&mut state, now);
        // One draft for the whole batch: it copies the registry only for
        // mutations that may change statuses, not for plain renewals.
        let mut draft = Draft::new(state);
        let answers: Vec<WriteResult> = mutations
            .iter()
            .map(|(mutation, owner)| {
                draft
                    .apply(&self.rules, mutation, owner, now)
                    .map_err(DiscoveryError::Refused)
            })
            .collect();
        if answers.iter().all(Result::is_err) {
            // Nothing to write, so no compare-and-swap will tell a stale
            // start apart: refusals computed on the cache (say LEASE_EXPIRED
            // for an instance another owner just registered) only stand if
            // the store has not moved on since.
            if from_cache && !self.still_current(&start).await? {
                return Err(AttemptError::Stale);
            }
            return Ok(answers);
        }
        let state = draft.into_state();
        let bytes = Bytes::from(state.encode_to_vec());
        let written = bytes.len() as u64;
        let epoch = start.epoch;
        let cas = self.store.compare_and_swap(bytes, start.revision);
        // The store bounds every call (the port's contract), so no deadline
        // of our own here.
        let new_revision = match cas.await {
            Ok(revision) => revision,
            Err(CasError::Conflict) => return Err(AttemptError::Conflict),
            Err(CasError::Store(e)) => return Err(AttemptError::Store(error_chain(&e))),
        };
        Counters::bump(&self.counters.commits);
        self.counters
            .snapshot_bytes
            .store(written, Ordering::Relaxed);
        // Cache before answering, so a lookup made after the answer sees it.
        self.cache
            .offer(Decoded::new(state, new_revision, new_revision, epoch));
        Ok(answers)
    }

    /// Whether the store's change token still vouches for `decoded`.
    async fn still_current(&self, decoded: &Decoded) -> Result<bool, AttemptError> {
        match self.store.revision().await {
            Ok(token) => Ok(token == decoded.token && self.store.epoch() == decoded.epoch),
            Err(e) => Err(AttemptError::Store(error_chain(&e))),
        }
    }

    /// Reads and decodes the snapshot, caching it.
    async fn read(&self) -> Result<Decoded, AttemptError> {
        let epoch = self.store.epoch();
        let snapshot = match self.store.read().await {
            Ok(snapshot) => snapshot,
            Err(e) => return Err(AttemptError::Store(error_chain(&e))),
        };
        self.counters
            .snapshot_bytes
            .store(snapshot.bytes.len() as u64, Ordering::Relaxed);
        // Only this snapshot's own revision vouches for it (the token of a
        // bucket holding nothing else).
        let decoded = decode(snapshot.bytes, snapshot.revision, snapshot.revision, epoch)
            .map_err(|e| AttemptError::Store(e.to_string()))?;
        self.cache.offer(decoded.clone());
        Ok(decoded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_are_retried_for_five_attempts_then_within_the_budget() {
        let ms = Duration::from_millis;
        let rows = [
            // (attempt, elapsed, jitter) -> pause, or busy
            ((1, ms(0), 0.5), Some(ms(5))),
            ((2, ms(10), 0.5), Some(ms(10))),
            ((3, ms(30), 0.25), Some(ms(10))),
            ((6, ms(300), 1.0), Some(MAX_CONFLICT_PAUSE)),
            ((20, ms(1_500), 0.0), Some(Duration::ZERO)),
            // The first five are made whatever the time.
            ((4, ms(5_000), 0.5), Some(ms(40))),
            // Past five, only while the budget lasts.
            ((5, ms(1_900), 1.0), None),
            ((5, ms(1_900), 0.25), Some(ms(40))),
            ((9, CONFLICT_BUDGET, 0.0), None),
        ];
        for ((attempt, elapsed, jitter), expected) in rows {
            assert_eq!(
                after_conflict(attempt, elapsed, jitter),
                expected,
                "attempt {attempt} after {elapsed:?}"
            );
        }
    }
}
