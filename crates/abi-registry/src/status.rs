//! Rollouts and statuses: which generation serves each module, which
//! instances drain, and the readiness fix-point.
//!
//! A *generation* of a module is every live instance sharing one rollout id
//! (the empty id is a generation too). A *rollout* is every live instance,
//! whatever its module, sharing one non-empty rollout id.
//!
//! Everything here reads borrowed records and returns its decisions, so a
//! lookup can judge a whole snapshot and copy only the instances it answers
//! with; [`compute`] writes the decisions back for a registry write.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use abi_proto::discovery::v1 as pb;

use crate::record;

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

/// A module id at one contract major, borrowed: a node of the dependency graph.
pub(crate) type NodeRef<'a> = (&'a str, u32);

/// What a registry write decides about a list of records.
#[derive(Debug)]
pub(crate) struct Evaluation {
    /// Per record: whether it is (now) draining.
    pub(crate) draining: Vec<bool>,
    /// Per record: its status.
    pub(crate) statuses: Vec<&'static str>,
}

/// Recomputes every record's status in place and marks replaced generations
/// as draining (a mark that is stored and never undone).
pub(crate) fn compute(state: &mut pb::RegistryState) {
    let evaluation = {
        let records: Vec<&pb::RegistryRecord> = state.records.iter().collect();
        evaluate(&records)
    };
    for ((record, draining), status) in state
        .records
        .iter_mut()
        .zip(evaluation.draining)
        .zip(evaluation.statuses)
    {
        record.draining = draining;
        record::instance_mut(record).status = status.to_owned();
    }
}

/// Decides the serving generations, the draining marks and the statuses of
/// `records`, without changing them.
///
/// Each record starts from DRAINING, STARTING, STAGED or DEGRADED; then a
/// DEGRADED record becomes READY once every dependency (module id and
/// contract major) has a READY record, repeated until nothing changes.
pub(crate) fn evaluate(records: &[&pb::RegistryRecord]) -> Evaluation {
    let (serving, drain) = plan_rollouts(records);
    let mut draining: Vec<bool> = records.iter().map(|r| r.draining).collect();
    for index in drain {
        draining[index] = true;
    }
    let mut statuses: Vec<&'static str> = records
        .iter()
        .zip(&draining)
        .map(|(r, &drains)| {
            if drains {
                DRAINING
            } else if !r.initialized {
                STARTING
            } else if staged(r, &serving) {
                STAGED
            } else {
                DEGRADED
            }
        })
        .collect();
    let mut ready: HashSet<NodeRef<'_>> = HashSet::new();
    for _ in 0..=records.len() {
        let before = ready.len();
        for (r, status) in records.iter().zip(statuses.iter_mut()) {
            if *status != DEGRADED {
                continue;
            }
            let descriptor = record::descriptor(r);
            if descriptor
                .dependencies
                .iter()
                .all(|dep| ready.contains(&(dep.module_id.as_str(), dep.contract_major)))
            {
                *status = READY;
                ready.insert((descriptor.module_id.as_str(), descriptor.contract_major));
            }
        }
        if ready.len() == before {
            break;
        }
    }
    Evaluation { draining, statuses }
}

/// Chooses the serving generation per module id, and which records the
/// generations it replaces add to the draining ones (indices into `records`).
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
pub(crate) fn plan_rollouts(records: &[&pb::RegistryRecord]) -> (Serving, Vec<usize>) {
    let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, record) in records.iter().enumerate() {
        if !record.rollout_id.is_empty() {
            groups.entry(&record.rollout_id).or_default().push(index);
        }
    }
    let starts: HashMap<&str, f64> = groups
        .iter()
        .map(|(rollout, members)| {
            let start = members
                .iter()
                .map(|&i| records[i].registered_at)
                .reduce(py_min)
                .unwrap_or(f64::INFINITY);
            (*rollout, start)
        })
        .collect();
    let complete: HashMap<&str, bool> = groups
        .iter()
        .map(|(rollout, members)| (*rollout, rollout_complete(members, records)))
        .collect();

    let mut winners: HashMap<&str, &str> = HashMap::new();
    for (rollout, members) in &groups {
        if !complete[rollout] {
            continue;
        }
        for &i in members {
            let module_id = record::module_id(records[i]);
            let replace = match winners.get(module_id) {
                None => true,
                Some(current) => later((starts[rollout], rollout), (starts[current], current)),
            };
            if replace {
                winners.insert(module_id, rollout);
            }
        }
    }

    let mut drain = Vec::new();
    for (index, record) in records.iter().enumerate() {
        let Some(&winner) = winners.get(record::module_id(record)) else {
            continue;
        };
        let rollout = record.rollout_id.as_str();
        if rollout == winner {
            continue;
        }
        if !rollout.is_empty()
            && !complete[rollout]
            && later((starts[rollout], rollout), (starts[winner], winner))
        {
            continue;
        }
        drain.push(index);
    }

    // Module ids without a complete rollout: per generation, whether it
    // served. Every record drained above belongs to a module id with a
    // complete rollout, so the stored draining marks are the right ones here.
    let mut candidates: BTreeMap<&str, BTreeMap<&str, bool>> = BTreeMap::new();
    for record in records {
        let module_id = record::module_id(record);
        if winners.contains_key(module_id) || record.draining || !record.initialized {
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
            winners.insert(module_id, rollout);
        }
    }
    let serving = winners
        .into_iter()
        .map(|(module_id, rollout)| (module_id.to_owned(), rollout.to_owned()))
        .collect();
    (serving, drain)
}

/// Whether a rollout's initialized instance waits while another generation
/// serves its module (the caller has ruled out draining records).
fn staged(record: &pb::RegistryRecord, serving: &Serving) -> bool {
    if !record.initialized || record.rollout_id.is_empty() {
        return false;
    }
    serving
        .get(record::module_id(record))
        .is_some_and(|winner| *winner != record.rollout_id)
}

/// Whether the rollout made of `members` (indices into `records`) is
/// complete; see [`plan_rollouts`].
fn rollout_complete(members: &[usize], records: &[&pb::RegistryRecord]) -> bool {
    let Some(&first) = members.first() else {
        return false;
    };
    let modules = |i: usize| -> BTreeSet<&str> {
        records[i]
            .rollout_modules
            .iter()
            .map(String::as_str)
            .collect()
    };
    let declared = modules(first);
    if declared.is_empty() || members.iter().any(|&i| modules(i) != declared) {
        return false;
    }
    let live: Vec<&pb::RegistryRecord> = members
        .iter()
        .map(|&i| records[i])
        .filter(|r| r.initialized && !r.draining)
        .collect();
    let up: HashSet<&str> = live.iter().map(|r| record::module_id(r)).collect();
    if !declared.iter().all(|m| up.contains(m)) {
        return false;
    }
    let cohort: HashSet<NodeRef<'_>> = live
        .iter()
        .map(|r| {
            let d = record::descriptor(r);
            (d.module_id.as_str(), d.contract_major)
        })
        .collect();
    for member in &live {
        for dep in &record::descriptor(member).dependencies {
            if declared.contains(dep.module_id.as_str()) {
                if !cohort.contains(&(dep.module_id.as_str(), dep.contract_major)) {
                    return false;
                }
                continue;
            }
            let met = records.iter().any(|other| {
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
    #![allow(clippy::unwrap_used, clippy::expect_used)]
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
    fn evaluating_changes_nothing_and_computing_stores_the_decisions() {
        let mut state = pb::RegistryState {
            records: vec![
                record("a", "", 0.0, true),
                record("a", "r1", 1.0, true),
                record("a", "r2", 2.0, false),
            ],
        };
        let before = state.clone();
        let records: Vec<&pb::RegistryRecord> = state.records.iter().collect();
        let evaluation = evaluate(&records);
        assert_eq!(state, before);
        // r1 is complete and serves; the plain generation drains; the newer,
        // incomplete r2 waits without draining.
        let (serving, _) = plan_rollouts(&records);
        assert_eq!(serving.get("a").map(String::as_str), Some("r1"));
        assert_eq!(evaluation.draining, [true, false, false]);
        assert_eq!(evaluation.statuses, [DRAINING, READY, STARTING]);
        compute(&mut state);
        let draining: Vec<bool> = state.records.iter().map(|r| r.draining).collect();
        assert_eq!(draining, [true, false, false]);
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

    #[test]
    fn readiness_follows_dependency_chains_in_any_order() {
        let mut state = pb::RegistryState {
            records: vec![
                record("c", "", 0.0, true),
                record("b", "", 0.0, true),
                record("a", "", 0.0, true),
            ],
        };
        // c needs b, b needs a: listed backwards, so it takes three passes.
        for (i, dep) in [(0, "b"), (1, "a")] {
            let descriptor = state.records[i]
                .instance
                .as_mut()
                .unwrap()
                .descriptor
                .as_mut();
            descriptor.unwrap().dependencies.push(pb::Dependency {
                module_id: dep.into(),
                contract_major: 1,
            });
        }
        compute(&mut state);
        let statuses: Vec<&str> = state.records.iter().map(record::status).collect();
        assert_eq!(statuses, [READY, READY, READY]);
        // Needing another contract major leaves it DEGRADED.
        state.records[1]
            .instance
            .as_mut()
            .unwrap()
            .descriptor
            .as_mut()
            .unwrap()
            .dependencies[0]
            .contract_major = 2;
        compute(&mut state);
        let statuses: Vec<&str> = state.records.iter().map(record::status).collect();
        assert_eq!(statuses, [DEGRADED, DEGRADED, READY]);
    }
}
