//! The watch's decisions as pure functions of their inputs: which events
//! two snapshots make, which instances expired by a given time, and whether
//! a KV watcher stalled. Time is an argument (seconds since the epoch), so
//! the tests need no clock.

use std::collections::HashMap;

use abi_proto::discovery::v1 as pb;

use super::RegistryEvent;
use crate::status::Status;

/// Replaces `live` with the live instances of `state` and returns the events.
pub(super) fn diff(
    live: &mut HashMap<String, pb::Instance>,
    state: pb::RegistryState,
    now: f64,
) -> Vec<RegistryEvent> {
    let mut next: HashMap<String, pb::Instance> = HashMap::new();
    let mut events = Vec::new();
    for record in state.records {
        let Some(instance) = record.instance else {
            continue;
        };
        if instance.expires_at <= now {
            continue;
        }
        match live.get(&instance.instance_id) {
            None => events.push(RegistryEvent::Registered(instance.clone())),
            Some(before) if before.status != instance.status => {
                events.push(RegistryEvent::StatusChanged {
                    instance: instance.clone(),
                    previous: Status::parse(&before.status),
                })
            }
            Some(_) => {}
        }
        next.insert(instance.instance_id.clone(), instance);
    }
    let mut left: Vec<_> = live
        .drain()
        .filter(|(id, _)| !next.contains_key(id))
        .map(|(_, i)| i)
        .collect();
    left.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    for instance in left {
        events.push(if instance.expires_at <= now {
            RegistryEvent::Expired(instance)
        } else {
            RegistryEvent::Gone(instance)
        });
    }
    *live = next;
    events
}

/// Removes instances whose lease passed by `now` and returns their events.
pub(super) fn expire(live: &mut HashMap<String, pb::Instance>, now: f64) -> Vec<RegistryEvent> {
    let mut gone: Vec<_> = live
        .values()
        .filter(|i| i.expires_at <= now)
        .cloned()
        .collect();
    gone.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    for instance in &gone {
        live.remove(&instance.instance_id);
    }
    gone.into_iter().map(RegistryEvent::Expired).collect()
}

/// Whether a check finds the watcher stalled: the key (at `key_revision`)
/// is newer than the last revision `applied`, and was already newer at the
/// previous check with nothing delivered since. `behind_since` carries the
/// applied revision at which the key was first seen ahead.
pub(super) fn watcher_stalled(
    key_revision: u64,
    applied: u64,
    behind_since: &mut Option<u64>,
) -> bool {
    if key_revision <= applied {
        *behind_since = None;
        return false;
    }
    if *behind_since != Some(applied) {
        // Newer in the key than delivered: give the watcher one interval.
        *behind_since = Some(applied);
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, status: &str, expires_at: f64) -> pb::RegistryRecord {
        pb::RegistryRecord {
            instance: Some(pb::Instance {
                instance_id: id.into(),
                status: status.into(),
                expires_at,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ids(events: &[RegistryEvent]) -> Vec<(String, &'static str)> {
        events
            .iter()
            .map(|e| {
                let tag = match e {
                    RegistryEvent::Registered(_) => "registered",
                    RegistryEvent::StatusChanged { .. } => "status",
                    RegistryEvent::Gone(_) => "gone",
                    RegistryEvent::Expired(_) => "expired",
                };
                (e.instance().instance_id.clone(), tag)
            })
            .collect()
    }

    #[test]
    fn successive_snapshots_become_events() {
        let mut live = HashMap::new();
        let first = pb::RegistryState {
            records: vec![
                record("a", "STARTING", 100.0),
                record("b", "READY", 100.0),
                record("old", "READY", 5.0),
            ],
        };
        let events = diff(&mut live, first, 10.0);
        assert_eq!(
            ids(&events),
            vec![("a".into(), "registered"), ("b".into(), "registered")]
        );

        let second = pb::RegistryState {
            records: vec![record("a", "READY", 100.0)],
        };
        let events = diff(&mut live, second, 20.0);
        assert_eq!(
            ids(&events),
            vec![("a".into(), "status"), ("b".into(), "gone")]
        );
        assert!(matches!(
            &events[0],
            RegistryEvent::StatusChanged {
                previous: Status::Starting,
                ..
            }
        ));

        let third = pb::RegistryState {
            records: vec![record("a", "READY", 100.0)],
        };
        assert!(diff(&mut live, third, 30.0).is_empty());
        assert_eq!(
            ids(&expire(&mut live, 100.0)),
            vec![("a".into(), "expired")]
        );
        assert!(live.is_empty());
    }

    /// Runs checks, one per interval, against a key and a watcher described by
    /// `key_at(tick)` and `delivered_at(tick)`; returns the first tick at which
    /// the watch gives up on the watcher and applies the key itself.
    fn first_stall(key_at: impl Fn(u32) -> u64, delivered_at: impl Fn(u32) -> u64) -> Option<u32> {
        let mut behind_since = None;
        (1..=20).find(|&tick| watcher_stalled(key_at(tick), delivered_at(tick), &mut behind_since))
    }

    #[test]
    fn a_stalled_watcher_is_overtaken_by_the_key_within_two_checks() {
        // The key moves from 3 to 5 just before check 4; the watcher stays at 3.
        let key = |tick| if tick >= 4 { 5 } else { 3 };
        assert_eq!(first_stall(key, |_| 3), Some(5));
        // Moved on just after check 4: seen at 5, applied at 6, so the change
        // is reported between one and two check intervals after the write.
        let key = |tick| if tick >= 5 { 5 } else { 3 };
        assert_eq!(first_stall(key, |_| 3), Some(6));
    }

    #[test]
    fn a_watcher_that_delivers_is_never_reopened() {
        // In step all along.
        assert_eq!(first_stall(u64::from, u64::from), None);
        // One interval late at every check, but moving: not a stall.
        assert_eq!(first_stall(|t| u64::from(t) + 1, u64::from), None);
        // Catches up after lagging one check.
        let delivered = |tick| if tick == 4 { 3 } else { 5 };
        assert_eq!(first_stall(|t| if t >= 4 { 5 } else { 3 }, delivered), None);
        // Moving, then stuck at 7 while the key is at 9.
        let delivered = |tick: u32| u64::from(tick.min(7));
        assert_eq!(first_stall(|t| u64::from(t.min(7)) + 2, delivered), Some(8));
    }

    #[test]
    fn a_key_behind_what_was_applied_resets_the_stall_detection() {
        let mut behind_since = None;
        assert!(!watcher_stalled(5, 3, &mut behind_since));
        // The key read back older (e.g. another server): forget the suspicion.
        assert!(!watcher_stalled(3, 3, &mut behind_since));
        assert_eq!(behind_since, None);
        assert!(!watcher_stalled(5, 3, &mut behind_since));
        assert!(watcher_stalled(5, 3, &mut behind_since));
    }
}
