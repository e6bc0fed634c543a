//! The KV follower: registry snapshots from the JetStream KV key, with a
//! periodic check that reopens a watcher which stalled without an error.

use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use async_nats::jetstream::kv::{Entry, Operation, Store};
use futures::StreamExt;
use prost::Message;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::diff::watcher_stalled;
use super::{FIRST_BACKOFF, Live, REQUEST_TIMEOUT, WatchOptions, sleep_until_opt};
use crate::subjects;

/// The background task: follows the key and keeps the last live set.
pub(super) struct Follower {
    js: async_nats::jetstream::Context,
    bucket: String,
    options: WatchOptions,
    live: Live,
    /// The last revision applied (0: none yet).
    revision: u64,
}

/// Why following stopped: reopen, or the reader is gone.
enum Stop {
    Reopen,
    ReaderGone,
}

impl Follower {
    /// A follower of `project`'s registry key, reporting to `live`.
    pub(super) fn new(
        nats: async_nats::Client,
        project: &str,
        options: WatchOptions,
        live: Live,
    ) -> Self {
        Self {
            js: async_nats::jetstream::new(nats),
            bucket: subjects::registry_bucket(project),
            options,
            live,
            revision: 0,
        }
    }

    /// Follows the key until the reader is gone, reopening the watcher
    /// with backoff whenever it fails or stalls.
    pub(super) async fn run(mut self) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match self.follow(&mut backoff).await {
                Stop::ReaderGone => return,
                Stop::Reopen => {}
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.live.reader_gone() => return,
            }
            backoff = (backoff * 2).min(self.options.max_backoff);
        }
    }

    /// Opens a watcher and follows it until it fails, stalls or the reader leaves.
    async fn follow(&mut self, backoff: &mut Duration) -> Stop {
        let store = match tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.js.get_key_value(self.bucket.clone()),
        )
        .await
        {
            Ok(Ok(store)) => store,
            Ok(Err(err)) => {
                debug!(bucket = %self.bucket, error = %err, "registry bucket not available yet");
                return self.expire_now().await;
            }
            Err(_) => return self.expire_now().await,
        };
        let opened = if self.revision == 0 {
            tokio::time::timeout(
                REQUEST_TIMEOUT,
                store.watch_with_history(subjects::REGISTRY_KEY),
            )
            .await
        } else {
            tokio::time::timeout(
                REQUEST_TIMEOUT,
                store.watch_from_revision(subjects::REGISTRY_KEY, self.revision + 1),
            )
            .await
        };
        let mut watcher = match opened {
            Ok(Ok(watcher)) => watcher,
            Ok(Err(err)) => {
                warn!(bucket = %self.bucket, error = %err, "cannot open the registry watcher");
                return self.expire_now().await;
            }
            Err(_) => return self.expire_now().await,
        };
        *backoff = FIRST_BACKOFF;
        let mut check = tokio::time::interval_at(
            Instant::now() + self.options.check_interval,
            self.options.check_interval,
        );
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The revision the watcher was at when a newer one was first seen in the key.
        let mut behind_since: Option<u64> = None;
        loop {
            let next_expiry = self.live.next_expiry();
            tokio::select! {
                entry = watcher.next() => match entry {
                    Some(Ok(entry)) => {
                        if !self.apply_entry(&entry).await {
                            return Stop::ReaderGone;
                        }
                    }
                    Some(Err(err)) => {
                        warn!(bucket = %self.bucket, error = %err, "registry watcher failed; reopening");
                        return Stop::Reopen;
                    }
                    None => return Stop::Reopen,
                },
                () = sleep_until_opt(next_expiry) => {
                    if !self.live.expire().await {
                        return Stop::ReaderGone;
                    }
                }
                _ = check.tick() => {
                    match self.check(&store, &mut behind_since).await {
                        Some(stop) => return stop,
                        None => continue,
                    }
                }
                () = self.live.reader_gone() => return Stop::ReaderGone,
            }
        }
    }

    /// Compares the key with what the watcher delivered. Returns a reason to
    /// stop following when the watcher stalled.
    async fn check(&mut self, store: &Store, behind_since: &mut Option<u64>) -> Option<Stop> {
        let entry = match tokio::time::timeout(REQUEST_TIMEOUT, store.entry(subjects::REGISTRY_KEY))
            .await
        {
            Ok(Ok(entry)) => entry,
            // The server is unreachable: the watcher cannot be blamed yet.
            Ok(Err(_)) | Err(_) => return None,
        };
        let entry = entry?;
        if !watcher_stalled(entry.revision, self.revision, behind_since) {
            return None;
        }
        warn!(bucket = %self.bucket, revision = entry.revision, "registry watcher stalled; reopening");
        if !self.apply_entry(&entry).await {
            return Some(Stop::ReaderGone);
        }
        Some(Stop::Reopen)
    }

    /// Applies one KV entry. Returns false when the reader is gone.
    async fn apply_entry(&mut self, entry: &Entry) -> bool {
        if entry.revision <= self.revision {
            return true;
        }
        self.revision = entry.revision;
        let state = match entry.operation {
            Operation::Put => match pb::RegistryState::decode(entry.value.as_ref()) {
                Ok(state) => state,
                Err(err) => {
                    warn!(bucket = %self.bucket, error = %err, "undecodable registry snapshot skipped");
                    return true;
                }
            },
            Operation::Delete | Operation::Purge => pb::RegistryState::default(),
        };
        self.live.apply(state).await
    }

    /// Reports expiries while the key cannot be followed, then asks to reopen.
    async fn expire_now(&mut self) -> Stop {
        if self.live.expire().await {
            Stop::Reopen
        } else {
            Stop::ReaderGone
        }
    }
}
