//! Rollouts and statuses: which generation serves each module, which
//! instances drain, and the readiness fix-point.
//!
//! A *generation* of a module is every live instance sharing one rollout id
//! (the empty id is a generation too). A *rollout* is every live instance,
//! whatever its module, sharing one non-empty rollout id.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use abi_proto::discovery::v1 as pb;

use crate::record::{self, Node};

/// Computed statuses, as they travel in `Instance.status`.
pub(crate) const STARTING: &str = "STARTING";
/// Initialized, but another generation serves its module.
pub(crate) const STAGED: &str = "STAGED";
/// Serving, but some dependency has no READY instance.
pub(crate) const DEGRADED: &str = "DEGRADED";
/// Serving, and every dependency has a READY instance.
pub(crate) const READY: &str = "READY";
/// Replaced by another generation, or going away by itself.
pub(crate) const DRAINING: &str = "DRAINING";

/// The serving rollout id per module id (`""` for instances without one).
pub(crate) type Serving = HashMap<String, String>;

/// Recomputes every record's status in place, marking replaced generations
/// as draining (a mark that is stored and never undone).
///
/// Each record starts from DRAINING, STARTING, STAGED or DEGRADED; then a
/// DEGRADED record becomes READY once every dependency (module id and
/// contract major) has a READY record, repeated until nothing changes.
pub(crate) fn compute(state: &mut pb::RegistryState) {
    let serving = apply_rollouts(state);
    for record in &mut state.records {
        let status = if record.draining {
            DRAINING
        } else if !record.initialized {
            STARTING
        } else if staged(record, &serving) {
            STAGED
        } else {
            DEGRADED
        };
        record::instance_mut(record).status = status.to_owned();
    }
    let mut ready: HashSet<Node> = HashSet::new();
    for _ in 0..=state.records.len() {
        let before = ready.len();
        for record in &mut state.records {
            if record::status(record) != DEGRADED {
                continue;
            }
            let descriptor = record::descriptor(record);
            if descriptor
                .dependencies
                .iter()
                .all(|dep| ready.contains(&record::dependency_node(dep)))
            {
                ready.insert(record::node(record));
                record::instance_mut(record).status = READY.to_owned();
            }
        }
        if ready.len() == before {
            break;
        }
    }
}

/// Chooses the serving generation per module id and marks as draining the
/// generations it replaces; returns the choice.
///
/// A rollout is *complete* once each module id it declares has an
/// initialized, non-draining instance and each such instance's dependencies
/// are met: inside the rollout at the declared contract major, or outside it
/// by any initialized, non-draining instance. For each module id the complete
/// rollout that started last serves, and every other generation drains,
/// except a newer incomplete rollout, which waits (a partial deploy never
/// takes traffic away).
///
/// A module id with no complete rollout keeps a generation that served at the
/// last write (statuses are stored, so a rollout that broke keeps serving);
/// failing that, the oldest generation with an initialized instance.
/// Instances with no rollout id always count as served and oldest.
pub(crate) fn apply_rollouts(state: &mut pb::RegistryState) -> Serving {
    let (serving, drain) = plan_rollouts(state);
    for index in drain {
        state.records[index].draining = true;
    }
    serving
}

/// What [`apply_rollouts`] decides, without changing `state`: the serving
/// generation per module id, and the indices of the records to mark draining.
pub(crate) fn plan_rollouts(state: &pb::RegistryState) -> (Serving, Vec<usize>) {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (index, record) in state.records.iter().enumerate() {
        if !record.rollout_id.is_empty() {
            groups
                .entry(record.rollout_id.clone())
                .or_default()
                .push(index);
        }
    }
    let starts: HashMap<&str, f64> = groups
        .iter()
        .map(|(rollout, members)| {
            let start = members
                .iter()
                .map(|&i| state.records[i].registered_at)
                .reduce(py_min)
                .unwrap_or(f64::INFINITY);
            (rollout.as_str(), start)
        })
        .collect();
    let complete: HashMap<&str, bool> = groups
        .iter()
        .map(|(rollout, members)| (rollout.as_str(), rollout_complete(members, state)))
        .collect();

    let mut serving: Serving = HashMap::new();
    for (rollout, members) in &groups {
        if !complete[rollout.as_str()] {
            continue;
        }
        for &i in members {
            let module_id = record::module_id(&state.records[i]);
            let replace = match serving.get(module_id) {
                None => true,
                Some(current) => later(
                    (starts[rollout.as_str()], rollout),
                    (starts[current.as_str()], current),
                ),
            };
            if replace {
                serving.insert(module_id.to_owned(), rollout.clone());
            }
        }
    }

    let mut drain = Vec::new();
    for (index, record) in state.records.iter().enumerate() {
        let Some(winner) = serving.get(record::module_id(record)) else {
            continue;
        };
        let rollout = record.rollout_id.as_str();
        if rollout == winner {
            continue;
        }
        if !rollout.is_empty()
            && !complete[rollout]
            && later(
                (starts[rollout], rollout),
                (starts[winner.as_str()], winner),
            )
        {
            continue;
        }
        drain.push(index);
    }

    // Module ids without a complete rollout: per generation, whether it served.
    let mut candidates: BTreeMap<&str, BTreeMap<&str, bool>> = BTreeMap::new();
    for record in &state.records {
        let module_id = record::module_id(record);
        if serving.contains_key(module_id) || record.draining || !record.initialized {
            continue;
        }
        let served =
            record.rollout_id.is_empty() || matches!(record::status(record), READY | DEGRADED);
        let generation = candidates
            .entry(module_id)
            .or_default()
            .entry(record.rollout_id.as_str())
            .or_insert(false);
        *generation = *generation || served;
    }
    let mut fallback = Vec::new();
    for (module_id, generations) in candidates {
        let mut best: Option<(bool, f64, &str)> = None;
        for (rollout, served) in generations {
            let start = starts.get(rollout).copied().unwrap_or(f64::NEG_INFINITY);
            let key = (!served, start, rollout);
            if best.is_none_or(|b| earlier(key, b)) {
                best = Some(key);
            }
        }
        if let Some((_, _, rollout)) = best {
            fallback.push((module_id.to_owned(), rollout.to_owned()));
        }
    }
    serving.extend(fallback);
    (serving, drain)
}

/// Whether a rollout's initialized instance waits while another generation
/// serves its module.
pub(crate) fn staged(record: &pb::RegistryRecord, serving: &Serving) -> bool {
    if record.draining || !record.initialized || record.rollout_id.is_empty() {
        return false;
    }
    serving
        .get(record::module_id(record))
        .is_some_and(|winner| *winner != record.rollout_id)
}

/// Whether the rollout made of `members` (indices into `state.records`) is
/// complete; see [`apply_rollouts`].
fn rollout_complete(members: &[usize], state: &pb::RegistryState) -> bool {
    let Some(&first) = members.first() else {
        return false;
    };
    let declared: BTreeSet<&str> = state.records[first]
        .rollout_modules
        .iter()
        .map(String::as_str)
        .collect();
    if declared.is_empty()
        || members.iter().any(|&i| {
            let set: BTreeSet<&str> = state.records[i]
                .rollout_modules
                .iter()
                .map(String::as_str)
                .collect();
            set != declared
        })
    {
        return false;
    }
    let live: Vec<&pb::RegistryRecord> = members
        .iter()
        .map(|&i| &state.records[i])
        .filter(|r| r.initialized && !r.draining)
        .collect();
    let up: HashSet<&str> = live.iter().map(|r| record::module_id(r)).collect();
    if !declared.iter().all(|m| up.contains(m)) {
        return false;
    }
    let cohort: HashSet<Node> = live.iter().map(|r| record::node(r)).collect();
    for member in &live {
        for dep in &record::descriptor(member).dependencies {
            if declared.contains(dep.module_id.as_str()) {
                if !cohort.contains(&record::dependency_node(dep)) {
                    return false;
                }
                continue;
            }
            let met = state.records.iter().any(|other| {
                let d = record::descriptor(other);
                other.initialized
                    && !other.draining
                    && d.module_id == dep.module_id
                    && d.contract_major == dep.contract_major
            });
            if !met {
                return false;
            }
        }
    }
    true
}

/// Python's `min(a, b)` for the start times: keeps `a` unless `b` is smaller.
fn py_min(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}

/// `(start, rollout) > (start, rollout)` as Python compares tuples: the first
/// element that differs decides.
fn later(a: (f64, &str), b: (f64, &str)) -> bool {
    if a.0 != b.0 { a.0 > b.0 } else { a.1 > b.1 }
}

/// `(not served, start, rollout) < ...` as Python compares tuples.
fn earlier(a: (bool, f64, &str), b: (bool, f64, &str)) -> bool {
    if a.0 != b.0 {
        !a.0
    } else if a.1 != b.1 {
        a.1 < b.1
    } else {
        a.2 < b.2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(module: &str, rollout: &str, start: f64, initialized: bool) -> pb::RegistryRecord {
        pb::RegistryRecord {
            instance: Some(pb::Instance {
                descriptor: Some(pb::ModuleDescriptor {
                    module_id: module.into(),
                    contract_major: 1,
                    ..Default::default()
                }),
                instance_id: format!("{module}-{rollout}"),
                ..Default::default()
            }),
            initialized,
            rollout_id: rollout.into(),
            registered_at: start,
            rollout_modules: if rollout.is_empty() {
                Vec::new()
            } else {
                vec![module.into()]
            },
            ..Default::default()
        }
    }

    #[test]
    fn tuples_compare_like_python() {
        assert!(later((2.0, "a"), (1.0, "b")));
        assert!(later((1.0, "b"), (1.0, "a")));
        assert!(!later((1.0, "a"), (1.0, "a")));
        // Served first, then the oldest start, then the rollout id.
        assert!(earlier((false, 9.0, "z"), (true, 0.0, "a")));
        assert!(earlier((false, f64::NEG_INFINITY, ""), (false, 0.0, "a")));
        assert!(earlier((true, 1.0, "a"), (true, 1.0, "b")));
        assert!(!earlier((true, 1.0, "b"), (true, 1.0, "b")));
    }

    #[test]
    fn planning_changes_nothing_and_applying_marks_what_was_planned() {
        let mut state = pb::RegistryState {
            records: vec![
                record("a", "", 0.0, true),
                record("a", "r1", 1.0, true),
                record("a", "r2", 2.0, false),
            ],
        };
        let before = state.clone();
        let (serving, drain) = plan_rollouts(&state);
        assert_eq!(state, before);
        // r1 is complete and serves; the plain generation drains; the newer,
        // incomplete r2 waits without draining.
        assert_eq!(serving.get("a").map(String::as_str), Some("r1"));
        assert_eq!(drain, vec![0]);
        assert_eq!(apply_rollouts(&mut state), serving);
        let draining: Vec<bool> = state.records.iter().map(|r| r.draining).collect();
        assert_eq!(draining, [true, false, false]);
        compute(&mut state);
        let statuses: Vec<&str> = state.records.iter().map(record::status).collect();
        assert_eq!(statuses, [DRAINING, READY, STARTING]);
    }

    #[test]
    fn without_a_complete_rollout_the_oldest_initialized_generation_serves() {
        let mut first = record("a", "r1", 1.0, true);
        let mut second = record("a", "r2", 2.0, true);
        // Cohorts naming a missing module: neither rollout completes.
        first.rollout_modules = vec!["a".into(), "b".into()];
        second.rollout_modules = vec!["a".into(), "b".into()];
        let mut state = pb::RegistryState {
            records: vec![second, first],
        };
        compute(&mut state);
        let statuses: Vec<&str> = state.records.iter().map(record::status).collect();
        assert_eq!(statuses, [STAGED, READY]);
        assert!(state.records.iter().all(|r| !r.draining));
    }
}
