//! JetStream KV adapter: the snapshot is key `registry` of bucket
//! `ABI_DISCOVERY_<project>`, the same bucket and key the reference uses, so
//! Rust and Python owners share one registry.
//!
//! **Reads never come from a stale replica.** `async-nats` creates KV buckets
//! with `allow_direct = true`, and its `Store::get`/`entry` then use the
//! direct-get API, which any replica (or a mirror created with
//! `mirror_direct`) may answer, possibly before it has applied the latest
//! write. A compare-and-swap that starts from such a stale read only
//! conflicts and retries, but a lookup served from it would miss an
//! acknowledged write. So [`SnapshotStore::read`] downloads the snapshot with
//! the non-direct `$JS.API.STREAM.MSG.GET` (last message by subject), which
//! only the stream leader answers.
//!
//! **The change check ([`SnapshotStore::revision`]) asks for the key's next
//! message.** The store remembers the highest revision of the key it has
//! seen (read, written, or found by a check) and asks for the first message
//! on the key's subject at or after the following sequence (`seq` plus
//! `next_by_subj`). "None" proves that nothing newer was written to the key,
//! so the revision it already knows is current; a message found *is* the
//! newer snapshot, kept so that the [`read`](SnapshotStore::read) that
//! follows only has to prove it is still the newest (one more "none")
//! instead of downloading it again. How the question is asked depends on
//! the bucket:
//!
//! - **One replica, direct gets allowed** (the default: `ABI_KV_REPLICAS=1`,
//!   bucket created by us): a direct get (`$JS.API.DIRECT.GET.<stream>`).
//!   The only server holding the stream is its leader, which acknowledged
//!   every write after storing it, so its answer is current; and a direct
//!   get skips the JetStream API queue, which makes it cheaper than a plain
//!   request-reply between two clients, and much cheaper than stream info. This assumes no
//!   mirror of the bucket's stream was created with `mirror_direct` (a
//!   mirror answers the same direct gets, possibly stale).
//! - **More replicas, or no direct gets** (a bucket the reference created):
//!   the same question through `$JS.API.STREAM.MSG.GET`, answered by the
//!   leader only.
//!
//! The choice is re-read from the stream's configuration at most every
//! [`MODE_REFRESH`], so scaling a running bucket up from one replica moves
//! the checks to the leader within that time (restart the owners after
//! scaling for a strict guarantee during the change).
//!
//! Revisions only grow within one stream. When the bucket is deleted and
//! created again under running owners, its sequences start again from 1:
//! the same periodic look at the stream notices (a new creation time) and
//! the store forgets the revisions it saw and bumps its
//! [`epoch`](SnapshotStore::epoch), so the service's cache lets go of the old
//! bucket's snapshot too. For up to [`MODE_REFRESH`] after such a
//! re-creation lookups may still be answered from the old bucket's snapshot.
//!
//! The revision is the stream sequence of the key's last message, which is
//! what the KV "expected last subject sequence" check of an update compares;
//! the change token is that same revision, so writes to other keys of the
//! bucket (there are none today) would not make lookups re-read.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::datetime::DateTime;
use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::kv::{self, UpdateErrorKind};
use async_nats::jetstream::stream::{
    DirectGetErrorKind, Info as StreamInfo, LastRawMessageErrorKind, RawMessageErrorKind, Stream,
};
use async_nats::jetstream::{self as js};
use bytes::Bytes;
use futures::future::BoxFuture;

use super::attempts::{Deadline, retry};
use super::jetstream_codes::{self, Refusal};
use super::{CasError, Snapshot, SnapshotStore, StoreError};

/// The key holding the snapshot.
pub use abi_wire::discovery::REGISTRY_KEY as KEY;
/// Largest value the bucket accepts (the reference's 512 KiB), as the KV
/// configuration takes it.
// 512 KiB fits an i32 many times over.
#[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
pub const MAX_VALUE_BYTES: i32 = abi_wire::discovery::MAX_SNAPSHOT_BYTES as i32;

/// How often the store re-reads the stream's configuration to decide how to
/// check for changes (see the module docs).
pub const MODE_REFRESH: Duration = Duration::from_secs(1);

/// Most "is there anything newer" hops one read makes from a snapshot found by
/// a change check before it downloads the latest value instead.
const MAX_HOPS: usize = 4;

/// The bucket of a project: `ABI_DISCOVERY_<project>`.
pub use abi_wire::discovery::registry_bucket as bucket_name;

/// How to open the bucket.
#[derive(Debug, Clone)]
pub struct JetStreamStoreConfig {
    /// The discovery project (the bucket is `ABI_DISCOVERY_<project>`).
    pub project: String,
    /// Replicas when this process creates the bucket (an existing bucket is
    /// used as it is).
    pub replicas: usize,
    /// Deadline of every store call.
    pub timeout: Duration,
}

/// A [`SnapshotStore`] on a JetStream KV bucket.
#[derive(Debug, Clone)]
pub struct JetStreamStore {
    kv: kv::Store,
    stream: Stream,
    subject: String,
    timeout: Duration,
    /// What this store (and its clones) learned; see the module docs.
    seen: Arc<Seen>,
}

/// The highest revision of the key seen, the newest snapshot a change check
/// found, and how checks are made.
#[derive(Debug)]
struct Seen {
    revision: AtomicU64,
    /// Bumped each time the revisions are forgotten ([`SnapshotStore::epoch`]).
    epoch: AtomicU64,
    found: Mutex<Option<Snapshot>>,
    mode: Mutex<Mode>,
}

/// How change checks are made, and when that was decided; with the
/// stream's creation time then, to notice a re-created bucket.
#[derive(Debug, Clone, Copy)]
struct Mode {
    direct: bool,
    decided: Instant,
    created: DateTime,
}

impl Seen {
    fn new(info: &StreamInfo) -> Self {
        Self {
            revision: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            found: Mutex::new(None),
            mode: Mutex::new(Mode {
                direct: direct_checks(&info.config),
                decided: Instant::now(),
                created: info.created,
            }),
        }
    }

    /// Forgets every revision seen (the bucket was re-created: its sequences
    /// started again from 1).
    fn forget(&self) {
        self.revision.store(0, Ordering::Release);
        *self.found() = None;
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    fn saw(&self, revision: u64) {
        self.revision.fetch_max(revision, Ordering::AcqRel);
    }

    fn found(&self) -> std::sync::MutexGuard<'_, Option<Snapshot>> {
        // Replaced in one assignment: a poisoned lock still holds a whole value.
        self.found.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn mode(&self) -> std::sync::MutexGuard<'_, Mode> {
        self.mode.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether change checks on a stream so configured may use direct gets: a
/// single replica (the leader is the only server answering) that allows them.
fn direct_checks(config: &async_nats::jetstream::stream::Config) -> bool {
    config.num_replicas <= 1 && config.allow_direct
}

impl JetStreamStore {
    /// Opens the project's bucket, creating it (history 1, 512 KiB values,
    /// `cfg.replicas` replicas) when it does not exist. When another owner
    /// creates it at the same moment, the loser opens the winner's bucket.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when JetStream is unavailable, the bucket cannot be
    /// created or opened, or a call takes longer than `cfg.timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: at worst the bucket was created and is opened next time.
    pub async fn open(
        context: &js::Context,
        cfg: &JetStreamStoreConfig,
    ) -> Result<Self, StoreError> {
        Self::open_within(context, cfg, Duration::ZERO).await
    }

    /// As [`open`](Self::open), but while the JetStream cluster is still
    /// forming (no meta leader, too few peers to place the replicas, calls
    /// timing out) it tries again, with a pause that grows to 2 s, for up to
    /// `patience`. A service started beside its brokers (a compose file, a
    /// fresh cluster) then waits for them instead of exiting. A refusal
    /// waiting cannot fix (bad name, resources, replicas the cluster cannot
    /// have) fails at once.
    ///
    /// # Errors
    ///
    /// As [`open`](Self::open): the last error once `patience` has passed,
    /// or the first one that is not the cluster settling.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`open`](Self::open).
    pub async fn open_within(
        context: &js::Context,
        cfg: &JetStreamStoreConfig,
        patience: Duration,
    ) -> Result<Self, StoreError> {
        let give_up = Instant::now() + patience;
        let mut pause = Duration::from_millis(100);
        loop {
            match Self::open_once(context, cfg).await {
                Ok(store) => return Ok(store),
                Err(Opening::Settling(error)) if Instant::now() + pause < give_up => {
                    tracing::warn!(
                        bucket = bucket_name(&cfg.project),
                        error = abi_process::error_chain(&error),
                        "JetStream cannot serve the registry bucket yet; trying again in {pause:?}"
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(Opening::Settling(error) | Opening::Failed(error)) => return Err(error),
            }
        }
    }

    /// One attempt at [`open`](Self::open), saying whether a failure is the
    /// cluster settling.
    async fn open_once(context: &js::Context, cfg: &JetStreamStoreConfig) -> Result<Self, Opening> {
        let bucket = bucket_name(&cfg.project);
        let kv = deadline(
            "open",
            cfg.timeout,
            open_or_create(context, &cfg.project, cfg.replicas),
        )
        .await
        .map_err(Opening::Settling)??;
        let stream = deadline(
            "open",
            cfg.timeout,
            context.get_stream(abi_wire::discovery::registry_stream(&cfg.project)),
        )
        .await
        .map_err(Opening::Settling)?
        .map_err(Opening::of_get_stream)?;
        let seen = Seen::new(stream.cached_info());
        tracing::debug!(
            bucket,
            direct = seen.mode().direct,
            "registry bucket opened"
        );
        Ok(Self {
            kv,
            stream,
            subject: abi_wire::discovery::registry_key_subject(&cfg.project),
            timeout: cfg.timeout,
            seen: Arc::new(seen),
        })
    }

    /// Whether change checks currently use direct gets (one replica, direct
    /// gets allowed) rather than the stream leader's API; see the module docs.
    pub fn checks_direct(&self) -> bool {
        self.seen.mode().direct
    }

    /// Whether change checks may use direct gets, re-reading the stream's
    /// configuration when the last decision is older than [`MODE_REFRESH`].
    /// A stream created anew since (or one whose sequence went back) makes
    /// the store forget the revisions it saw.
    async fn direct(&self, deadline: &Deadline) -> Result<bool, StoreError> {
        let mode = *self.seen.mode();
        if mode.decided.elapsed() < MODE_REFRESH {
            return Ok(mode.direct);
        }
        let info = retry(deadline, || async {
            self.stream
                .get_info()
                .await
                .map_err(|e| StoreError::backend("revision", e))
        })
        .await?;
        let direct = direct_checks(&info.config);
        if direct != mode.direct {
            tracing::info!(direct, "registry change checks switched");
        }
        if info.created != mode.created
            || info.state.last_sequence < self.seen.revision.load(Ordering::Acquire)
        {
            tracing::warn!("the registry bucket was re-created; re-reading it");
            self.seen.forget();
        }
        *self.seen.mode() = Mode {
            direct,
            decided: Instant::now(),
            created: info.created,
        };
        Ok(direct)
    }

    /// The first message on the key after `revision`, if any (current as of
    /// a moment after this call started), by a direct get when `direct`.
    async fn next_after(
        &self,
        deadline: &Deadline,
        direct: bool,
        revision: u64,
    ) -> Result<Option<Snapshot>, StoreError> {
        let from = revision.saturating_add(1);
        retry(deadline, || async {
            let message = if direct {
                match self
                    .stream
                    .direct_get_next_for_subject(self.subject.as_str(), Some(from))
                    .await
                {
                    Ok(message) => message,
                    Err(e) if e.kind() == DirectGetErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(StoreError::backend("revision", e)),
                }
            } else {
                match self
                    .stream
                    .get_first_raw_message_by_subject(&self.subject, from)
                    .await
                {
                    Ok(message) => message,
                    Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => return Ok(None),
                    Err(e) => return Err(StoreError::backend("revision", e)),
                }
            };
            Ok(Some(Snapshot {
                bytes: message.payload,
                revision: message.sequence,
            }))
        })
        .await
    }

    /// The latest value and revision from the stream leader.
    async fn read_leader(&self, deadline: &Deadline) -> Result<Snapshot, StoreError> {
        retry(deadline, || async {
            match self
                .stream
                .get_last_raw_message_by_subject(&self.subject)
                .await
            {
                // A delete marker reads as an empty registry at its revision,
                // as in the reference.
                Ok(message) => Ok(Snapshot {
                    bytes: message.payload,
                    revision: message.sequence,
                }),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                    Ok(Snapshot::default())
                }
                Err(e) => Err(StoreError::backend("read", e)),
            }
        })
        .await
    }

    /// Whether `bytes`, sent as a compare-and-swap from `revision` by an
    /// attempt whose answer was lost, was stored: `Ok(Some(revision))` when
    /// it was, `Ok(None)` when it provably was not (someone else's write
    /// came first), an error when the store can no longer tell.
    ///
    /// Our write could only be stored as the first write to the key after
    /// `revision`. The bucket holds only the snapshot key, so that write has
    /// sequence `revision + 1` and is still there unless a later write
    /// replaced it (history 1); then the answer is lost with it.
    async fn settle(
        &self,
        deadline: &Deadline,
        bytes: &Bytes,
        revision: u64,
    ) -> Result<Option<u64>, StoreError> {
        let first = self.next_after(deadline, false, revision).await?;
        match first {
            Some(found) if found.bytes == *bytes => Ok(Some(found.revision)),
            Some(found) if found.revision == revision.saturating_add(1) => Ok(None),
            // Nothing after `revision`: the key was deleted or purged; ours
            // is not there either.
            None => Ok(None),
            Some(_) => Err(StoreError::backend(
                "compare_and_swap",
                "the outcome of a write whose answer was lost can no longer be told",
            )),
        }
    }
}

impl SnapshotStore for JetStreamStore {
    fn read(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>> {
        Box::pin(async move {
            // A snapshot a change check found only needs proof that nothing
            // newer came since (a delete marker reads as an empty registry,
            // as in the reference).
            let deadline = Deadline::after("read", self.timeout);
            let direct = self.direct(&deadline).await?;
            let found = self.seen.found().clone();
            if let Some(mut candidate) = found {
                for _ in 0..MAX_HOPS {
                    match self
                        .next_after(&deadline, direct, candidate.revision)
                        .await?
                    {
                        None => {
                            self.seen.saw(candidate.revision);
                            return Ok(candidate);
                        }
                        Some(newer) => candidate = newer,
                    }
                }
            }
            let snapshot = self.read_leader(&deadline).await?;
            self.seen.saw(snapshot.revision);
            Ok(snapshot)
        })
    }

    fn compare_and_swap(
        &self,
        bytes: Bytes,
        revision: u64,
    ) -> BoxFuture<'_, Result<u64, CasError>> {
        Box::pin(async move {
            let deadline = Deadline::after("compare_and_swap", self.timeout);
            // Whether an earlier attempt may have been stored although its
            // answer never came (a lost ack, a leader that failed after
            // storing it). Every attempt sends the same bytes with the same
            // expected revision, so at most one of them is stored.
            let mut unsure = false;
            let mut attempt = 1;
            loop {
                let last_error = match deadline
                    .attempt(self.kv.update(KEY, bytes.clone(), revision))
                    .await
                {
                    Some(Ok(new_revision)) => {
                        self.seen.saw(new_revision);
                        return Ok(new_revision);
                    }
                    Some(Err(e)) => {
                        match jetstream_codes::code_in(&e).map(jetstream_codes::refusal) {
                            Some(Refusal::Conflict) if unsure => {
                                return match self.settle(&deadline, &bytes, revision).await? {
                                    Some(new_revision) => {
                                        self.seen.saw(new_revision);
                                        Ok(new_revision)
                                    }
                                    None => Err(CasError::Conflict),
                                };
                            }
                            Some(Refusal::Conflict) => return Err(CasError::Conflict),
                            // The server refused it: nothing was stored.
                            Some(Refusal::TryAgain | Refusal::Other) => {}
                            // No answer from the server (a timeout, a broken
                            // connection): the write may have been stored.
                            None => unsure |= e.kind() != UpdateErrorKind::InvalidKey,
                        }
                        StoreError::backend("compare_and_swap", e)
                    }
                    None => {
                        unsure = true;
                        deadline.timed_out()
                    }
                };
                if !deadline.pause(attempt).await {
                    return Err(CasError::Store(last_error));
                }
                tracing::debug!(attempt, error = %last_error, "registry write retried");
                attempt += 1;
            }
        })
    }

    fn epoch(&self) -> u64 {
        self.seen.epoch.load(Ordering::Acquire)
    }

    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            // Mode first: it may forget the revisions of a re-created bucket.
            let deadline = Deadline::after("revision", self.timeout);
            let direct = self.direct(&deadline).await?;
            let known = self.seen.revision.load(Ordering::Acquire);
            match self.next_after(&deadline, direct, known).await? {
                None => Ok(known),
                Some(newer) => {
                    let revision = newer.revision;
                    self.seen.saw(revision);
                    *self.seen.found() = Some(newer);
                    Ok(revision)
                }
            }
        })
    }
}

/// Opens the bucket if its stream exists, else creates it; a failed create
/// (typically another owner winning the race) falls back to opening.
async fn open_or_create(
    context: &js::Context,
    project: &str,
    replicas: usize,
) -> Result<kv::Store, Opening> {
    let bucket = &bucket_name(project);
    match context
        .get_stream(abi_wire::discovery::registry_stream(project))
        .await
    {
        Ok(_) => {
            return context
                .get_key_value(bucket)
                .await
                .map_err(|e| Opening::Failed(StoreError::backend("open", e)));
        }
        Err(e) => match e.kind() {
            GetStreamErrorKind::JetStream(err)
                if err.error_code() == ErrorCode::STREAM_NOT_FOUND => {}
            _ => return Err(Opening::of_get_stream(e)),
        },
    }
    let config = kv::Config {
        bucket: bucket.to_owned(),
        history: 1,
        max_value_size: MAX_VALUE_BYTES,
        num_replicas: replicas.max(1),
        ..Default::default()
    };
    match context.create_key_value(config).await {
        Ok(store) => {
            tracing::info!(bucket, replicas, "created the registry bucket");
            Ok(store)
        }
        Err(create_error) => match context.get_key_value(bucket).await {
            Ok(store) => Ok(store),
            Err(_) => {
                let settling = create_settling(&create_error);
                let error = StoreError::backend("open", create_error);
                Err(if settling {
                    Opening::Settling(error)
                } else {
                    Opening::Failed(error)
                })
            }
        },
    }
}

/// Why one attempt at opening the bucket failed.
enum Opening {
    /// The cluster is still forming: the same attempt may succeed later.
    Settling(StoreError),
    /// Anything else.
    Failed(StoreError),
}

impl From<StoreError> for Opening {
    fn from(error: StoreError) -> Self {
        Self::Failed(error)
    }
}

impl Opening {
    /// A failed stream lookup: a request that got no answer, or a cluster
    /// code, is the cluster settling.
    fn of_get_stream(e: js::context::GetStreamError) -> Self {
        let settling = match e.kind() {
            GetStreamErrorKind::Request => true,
            GetStreamErrorKind::JetStream(js) => jetstream_codes::cluster_settling(js.error_code()),
            _ => false,
        };
        let error = StoreError::backend("open", e);
        if settling {
            Self::Settling(error)
        } else {
            Self::Failed(error)
        }
    }
}

/// Whether creating the bucket failed because the cluster is still forming:
/// the request timed out or found no JetStream, or the server answered with
/// a cluster code (say 10005, no peers yet to place the replicas on).
fn create_settling(error: &js::context::CreateKeyValueError) -> bool {
    use js::context::{
        CreateKeyValueErrorKind as Kv, CreateStreamError, CreateStreamErrorKind as S,
    };
    let code_settles =
        |source: &(dyn std::error::Error + 'static)| match jetstream_codes::code_in(source) {
            Some(code) => jetstream_codes::cluster_settling(code),
            None => true,
        };
    match error.kind() {
        Kv::TimedOut => true,
        Kv::JetStream => std::error::Error::source(error).is_none_or(code_settles),
        Kv::BucketCreate => std::error::Error::source(error)
            .and_then(|source| source.downcast_ref::<CreateStreamError>())
            .is_some_and(|stream| match stream.kind() {
                S::JetStreamUnavailable | S::TimedOut => true,
                S::JetStream(js) => jetstream_codes::cluster_settling(js.error_code()),
                _ => false,
            }),
        _ => false,
    }
}

/// Runs `future` under the store deadline.
async fn deadline<F: Future>(
    op: &'static str,
    timeout: Duration,
    future: F,
) -> Result<F::Output, StoreError> {
    tokio::time::timeout(timeout, future)
        .await
        .map_err(|_| StoreError::TimedOut { op, timeout })
}
