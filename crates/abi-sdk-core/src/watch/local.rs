//! The in-process follower: registry snapshots from an in-process service
//! (the test kit) instead of the KV key.

use abi_proto::discovery::v1 as pb;
use prost::Message;
use tokio::sync::watch;
use tracing::warn;

use super::{Live, sleep_until_opt};
use crate::local::LocalSnapshot;

/// The in-process counterpart of the KV follower (`kv.rs`): every snapshot the channel
/// shows is applied (a channel never stalls, so there is nothing to check).
pub(super) async fn follow_local(
    mut snapshots: Option<watch::Receiver<LocalSnapshot>>,
    mut live: Live,
) {
    if snapshots.is_none() {
        warn!("no in-process discovery service for this project: the watch reports nothing");
    }
    let mut revision = 0;
    loop {
        if let Some(rx) = snapshots.as_mut() {
            let snapshot = rx.borrow_and_update().clone();
            if snapshot.revision > revision {
                revision = snapshot.revision;
                match pb::RegistryState::decode(snapshot.bytes.as_ref()) {
                    Ok(state) => {
                        if !live.apply(state).await {
                            return;
                        }
                    }
                    Err(err) => warn!(error = %err, "undecodable registry snapshot skipped"),
                }
            }
        }
        let next_expiry = live.next_expiry();
        tokio::select! {
            open = next_change(&mut snapshots) => {
                if !open {
                    // The service stopped: only expiries are left to report.
                    snapshots = None;
                }
            }
            () = sleep_until_opt(next_expiry) => {
                if !live.expire().await {
                    return;
                }
            }
            () = live.reader_gone() => return,
        }
    }
}

/// Waits for the next snapshot; false once the sender is gone. Never
/// returns without a channel.
async fn next_change(snapshots: &mut Option<watch::Receiver<LocalSnapshot>>) -> bool {
    match snapshots {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt;
    use tokio::time::Instant;

    use super::*;
    use crate::watch::{Clock, RegistryEvent, RegistryWatch, WatchOptions};

    /// Wall time that moves with the (paused) Tokio clock, from epoch 1000.
    #[derive(Debug)]
    struct TokioClock {
        start: Instant,
    }

    impl Clock for TokioClock {
        fn now_epoch(&self) -> f64 {
            1000.0 + self.start.elapsed().as_secs_f64()
        }
    }

    fn snapshot(revision: u64, expires_at: f64) -> LocalSnapshot {
        let state = pb::RegistryState {
            records: vec![pb::RegistryRecord {
                instance: Some(pb::Instance {
                    instance_id: "a".into(),
                    status: "READY".into(),
                    expires_at,
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        LocalSnapshot {
            revision,
            bytes: state.encode_to_vec().into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_passing_on_a_paused_clock_is_reported_once_at_its_time() {
        let start = Instant::now();
        let (snapshots_tx, snapshots_rx) = watch::channel(snapshot(1, 1005.0));
        let options = WatchOptions::default().clock(Arc::new(TokioClock { start }));
        let mut events = RegistryWatch::spawn_local(Some(snapshots_rx), options);
        let first = tokio::time::timeout(Duration::from_secs(1), events.next())
            .await
            .unwrap();
        assert!(
            matches!(first, Some(RegistryEvent::Registered(_))),
            "{first:?}"
        );
        let second = tokio::time::timeout(Duration::from_secs(60), events.next())
            .await
            .unwrap();
        assert!(
            matches!(second, Some(RegistryEvent::Expired(_))),
            "{second:?}"
        );
        assert_eq!(start.elapsed(), Duration::from_secs(5));
        // Nothing is left to expire: the watch sleeps instead of spinning.
        let third = tokio::time::timeout(Duration::from_secs(3600), events.next()).await;
        assert!(third.is_err(), "{third:?}");
        drop(snapshots_tx);
    }
}
