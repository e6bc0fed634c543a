//! JetStream KV adapter: the snapshot is key `registry` of bucket
//! `ABI_DISCOVERY_<project>`, the same bucket and key the reference uses, so
//! Rust and Python owners share one registry.
//!
//! **Reads go through the stream leader.** `async-nats` creates KV buckets
//! with `allow_direct = true`, and its `Store::get`/`entry` then use the
//! direct-get API, which any replica (or mirror) may answer, possibly before
//! it has applied the latest write. A compare-and-swap that starts from such
//! a stale read only conflicts and retries, but a lookup served from it would
//! miss an acknowledged write. So [`SnapshotStore::read`] uses the
//! non-direct `$JS.API.STREAM.MSG.GET` (last message by subject), which only
//! the stream leader answers, and [`SnapshotStore::revision`] uses stream info
//! (also answered by the leader): its `last_seq` moves with every write to the
//! bucket without downloading the value.
//!
//! The revision is the stream sequence of the key's last message, which is
//! what the KV "expected last subject sequence" check of an update compares.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::kv::{self, UpdateErrorKind};
use async_nats::jetstream::stream::{LastRawMessageErrorKind, Stream};
use async_nats::jetstream::{self as js};
use bytes::Bytes;
use futures::future::BoxFuture;

use super::{CasError, Snapshot, SnapshotStore, StoreError};

/// The key holding the snapshot.
pub const KEY: &str = "registry";
/// Largest value the bucket accepts (the reference's 512 KiB).
pub const MAX_VALUE_BYTES: i32 = 512 * 1024;

/// The bucket of a project: `ABI_DISCOVERY_<project>`.
pub fn bucket_name(project: &str) -> String {
    format!("ABI_DISCOVERY_{project}")
}

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
        let bucket = bucket_name(&cfg.project);
        let kv = deadline(
            "open",
            cfg.timeout,
            open_or_create(context, &bucket, cfg.replicas),
        )
        .await??;
        let stream = deadline(
            "open",
            cfg.timeout,
            context.get_stream(format!("KV_{bucket}")),
        )
        .await?
        .map_err(|e| StoreError::backend("open", e))?;
        Ok(Self {
            kv,
            stream,
            subject: format!("$KV.{bucket}.{KEY}"),
            timeout: cfg.timeout,
        })
    }
}

impl SnapshotStore for JetStreamStore {
    fn read(&self) -> BoxFuture<'_, Result<Snapshot, StoreError>> {
        Box::pin(async move {
            let last = self.stream.get_last_raw_message_by_subject(&self.subject);
            match deadline("read", self.timeout, last).await? {
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
    }

    fn compare_and_swap(
        &self,
        bytes: Bytes,
        revision: u64,
    ) -> BoxFuture<'_, Result<u64, CasError>> {
        Box::pin(async move {
            let update = self.kv.update(KEY, bytes, revision);
            match deadline("compare_and_swap", self.timeout, update).await? {
                Ok(new_revision) => Ok(new_revision),
                Err(e) if e.kind() == UpdateErrorKind::WrongLastRevision => Err(CasError::Conflict),
                Err(e) => Err(CasError::Store(StoreError::backend("compare_and_swap", e))),
            }
        })
    }

    fn revision(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move {
            let info = deadline("revision", self.timeout, self.stream.get_info())
                .await?
                .map_err(|e| StoreError::backend("revision", e))?;
            Ok(info.state.last_sequence)
        })
    }
}

/// Opens the bucket if its stream exists, else creates it; a failed create
/// (typically another owner winning the race) falls back to opening.
async fn open_or_create(
    context: &js::Context,
    bucket: &str,
    replicas: usize,
) -> Result<kv::Store, StoreError> {
    match context.get_stream(format!("KV_{bucket}")).await {
        Ok(_) => {
            return context
                .get_key_value(bucket)
                .await
                .map_err(|e| StoreError::backend("open", e));
        }
        Err(e) => match e.kind() {
            GetStreamErrorKind::JetStream(err)
                if err.error_code() == ErrorCode::STREAM_NOT_FOUND => {}
            _ => return Err(StoreError::backend("open", e)),
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
            Err(_) => Err(StoreError::backend("open", create_error)),
        },
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
