//! Statuses: STARTING, STAGED, DEGRADED, READY or DRAINING, from the
//! rollout choice (see [`crate::rollout`]) and the readiness fix-point.
//!
//! Everything here reads borrowed records and returns its decisions, so a
//! lookup can judge a whole snapshot and copy only the instances it answers
//! with; [`compute`] writes the decisions back for a registry write.

use std::collections::HashSet;

use abi_proto::discovery::v1 as pb;

use crate::record::{self, DEGRADED, DRAINING, NodeRef, READY, STAGED, STARTING};
use crate::rollout::{Serving, plan_rollouts};

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
        let instance = record::instance_mut(record);
        if instance.status != status {
            instance.status = status.to_owned();
        }
    }
}

/// The constant for a stored status the rules compute, if it is one.
pub(crate) fn known(status: &str) -> Option<&'static str> {
    [STARTING, STAGED, DEGRADED, READY, DRAINING]
        .into_iter()
        .find(|known| *known == status)
}

/// Whether [`compute`] would leave `state` exactly as it is: every stored
/// status and draining mark is already the one it would write (and every
/// record has an instance for it to write into).
pub(crate) fn is_settled(state: &pb::RegistryState) -> bool {
    let records: Vec<&pb::RegistryRecord> = state.records.iter().collect();
    let evaluation = evaluate(&records);
    records
        .iter()
        .zip(evaluation.draining)
        .zip(evaluation.statuses)
        .all(|((record, draining), status)| {
            record.instance.is_some()
                && record.draining == draining
                && record::status(record) == status
        })
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
        assert_eq!(serving.get("a").copied(), Some("r1"));
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
