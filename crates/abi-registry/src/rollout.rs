//! Rollouts: which generation serves each module id, and which drain.
//!
//! A *generation* of a module is every live instance sharing one rollout id
//! (the empty id is a generation too). A *rollout* is every live instance,
//! whatever its module, sharing one non-empty rollout id.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use abi_proto::discovery::v1 as pb;

use crate::record::{self, DEGRADED, NodeRef, READY};

/// The module ids that must all be up before this rollout replaces the
/// generation it follows, sorted and unique; empty outside a rollout.
pub(crate) fn cohort(req: &pb::RegisterRequest) -> Vec<String> {
    if !req.rollout_modules.is_empty() {
        let mut modules = req.rollout_modules.clone();
        modules.sort();
        modules.dedup();
        modules
    } else if !req.rollout_id.is_empty() {
        vec![record::or_empty(req.descriptor.as_ref()).module_id.clone()]
    } else {
        Vec::new()
    }
}

/// A stored cohort, sorted for comparison with [`cohort`].
pub(crate) fn sorted(modules: &[String]) -> Vec<String> {
    let mut modules = modules.to_vec();
    modules.sort();
    modules
}

/// The serving rollout id per module id (`""` for instances without one),
/// borrowed from the records.
pub(crate) type Serving<'a> = HashMap<&'a str, &'a str>;

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
pub(crate) fn plan_rollouts<'a>(records: &[&'a pb::RegistryRecord]) -> (Serving<'a>, Vec<usize>) {
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
    (winners, drain)
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
    use super::*;

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
}
