//! Property tests: random operation sequences, run the way the discovery
//! service runs them, keep the registry's invariants.
//!
//! Each sequence mixes registrations (replicas, rollouts with cohorts,
//! dependencies that may form cycles, bad input), renewals that initialize or
//! drain, unregistrations, evictions by admins and others, lookups, and clock
//! jumps that let leases run out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use abi_registry::{
    Draft, MAX_INSTANCES, MAX_SNAPSHOT_BYTES, Mutation, Outcome, Prepared, RegistryState, Rules,
    pb, prune_expired, view,
};
use proptest::prelude::*;
use prost::Message;

const MODULES: [&str; 4] = ["a", "b", "c", "bad.*"];
const INSTANCES: [&str; 6] = ["i0", "i1", "i2", "i3", "i4", "bad.id"];
const ROLLOUTS: [&str; 5] = ["", "r1", "r2", "r3", "not valid"];
const OWNERS: [&str; 3] = ["owner", "intruder", "api"];

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    Register {
        module: usize,
        major: u32,
        instance: usize,
        deps: Vec<(usize, u32)>,
        rollout: usize,
        cohort: Vec<usize>,
        join_cohort: bool,
        owner: usize,
        good_token: bool,
    },
    Renew {
        instance: usize,
        initialized: bool,
        draining: bool,
        owner: usize,
        good_token: bool,
    },
    Unregister {
        instance: usize,
        owner: usize,
        good_token: bool,
    },
    Evict {
        instance: usize,
        owner: usize,
    },
    Lookup {
        module: usize,
        major: u32,
        limit: u32,
    },
    Advance(f64),
}

fn token(instance: &str, good: bool) -> String {
    if good {
        format!("{}{instance}", "t".repeat(32))
    } else {
        "w".repeat(40)
    }
}

/// An index into `values`, the last one (an invalid value) drawn rarely.
fn mostly_valid(values: usize) -> impl Strategy<Value = usize> {
    prop_oneof![19 => 0..values - 1, 1 => Just(values - 1)]
}

fn step() -> impl Strategy<Value = Step> {
    let register = (
        (
            mostly_valid(MODULES.len()),
            1..=2u32,
            mostly_valid(INSTANCES.len()),
        ),
        prop::collection::vec(
            (0..3usize, prop_oneof![4 => Just(1u32), 1 => Just(2u32)]),
            0..3,
        ),
        (
            mostly_valid(ROLLOUTS.len()),
            prop::collection::vec(0..3usize, 0..3),
            prop::bool::weighted(0.9),
        ),
        (prop::bool::weighted(0.95), prop::bool::weighted(0.95)),
    )
        .prop_map(
            |(
                (module, major, instance),
                deps,
                (rollout, cohort, join_cohort),
                (own, good_token),
            )| {
                Step::Register {
                    module,
                    major,
                    instance,
                    deps,
                    rollout,
                    cohort,
                    join_cohort,
                    owner: if own { 0 } else { 1 },
                    good_token,
                }
            },
        );
    let renew = (
        0..INSTANCES.len(),
        prop::bool::weighted(0.7),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.9),
    )
        .prop_map(
            |(instance, initialized, draining, own, good_token)| Step::Renew {
                instance,
                initialized,
                draining,
                owner: if own { 0 } else { 1 },
                good_token,
            },
        );
    let unregister = (0..INSTANCES.len(), prop::bool::weighted(0.8), any::<bool>()).prop_map(
        |(instance, own, good_token)| Step::Unregister {
            instance,
            owner: if own { 0 } else { 1 },
            good_token,
        },
    );
    let evict = (0..INSTANCES.len(), 0..OWNERS.len())
        .prop_map(|(instance, owner)| Step::Evict { instance, owner });
    let lookup =
        (0..MODULES.len(), 0..=2u32, 0..4u32).prop_map(|(module, major, limit)| Step::Lookup {
            module,
            major,
            limit,
        });
    prop_oneof![
        5 => register,
        5 => renew,
        1 => unregister,
        1 => evict,
        2 => lookup,
        2 => prop_oneof![4 => 0.0..8.0f64, 1 => 8.0..25.0f64].prop_map(Step::Advance),
    ]
}

fn mutation(step: &Step) -> Option<(Mutation, &'static str)> {
    Some(match step {
        Step::Register {
            module,
            major,
            instance,
            deps,
            rollout,
            cohort,
            join_cohort,
            owner,
            good_token,
        } => {
            let mut cohort: Vec<usize> = cohort.clone();
            cohort.dedup();
            if *join_cohort && !cohort.is_empty() && !cohort.contains(module) {
                cohort.push(*module);
            }
            if *join_cohort && *rollout == 0 {
                // Mostly valid: a cohort only comes with a rollout id.
                cohort.clear();
            }
            let mut dependencies: Vec<pb::Dependency> = Vec::new();
            for (m, major) in deps {
                let dep = pb::Dependency {
                    module_id: MODULES[*m].into(),
                    contract_major: *major,
                };
                if !dependencies.contains(&dep) {
                    dependencies.push(dep);
                }
            }
            let req = pb::RegisterRequest {
                descriptor: Some(pb::ModuleDescriptor {
                    module_id: MODULES[*module].into(),
                    contract_major: *major,
                    dependencies,
                    ..Default::default()
                }),
                instance_id: INSTANCES[*instance].into(),
                lease_token: token(INSTANCES[*instance], *good_token),
                rollout_id: ROLLOUTS[*rollout].into(),
                rollout_modules: cohort.iter().map(|m| MODULES[*m].to_owned()).collect(),
                ..Default::default()
            };
            (Mutation::Register(req), OWNERS[*owner])
        }
        Step::Renew {
            instance,
            initialized,
            draining,
            owner,
            good_token,
        } => (
            Mutation::Renew(pb::RenewRequest {
                instance_id: INSTANCES[*instance].into(),
                lease_token: token(INSTANCES[*instance], *good_token),
                initialized: *initialized,
                draining: *draining,
                ..Default::default()
            }),
            OWNERS[*owner],
        ),
        Step::Unregister {
            instance,
            owner,
            good_token,
        } => (
            Mutation::Unregister(pb::UnregisterRequest {
                instance_id: INSTANCES[*instance].into(),
                lease_token: token(INSTANCES[*instance], *good_token),
                ..Default::default()
            }),
            OWNERS[*owner],
        ),
        Step::Evict { instance, owner } => (
            Mutation::Evict(pb::EvictRequest {
                instance_id: INSTANCES[*instance].into(),
                ..Default::default()
            }),
            OWNERS[*owner],
        ),
        Step::Lookup { .. } | Step::Advance(_) => return None,
    })
}

/// Everything a run answered, to compare two runs of one sequence.
type Transcript = Vec<String>;

/// Runs `steps` as the service does (prune, apply, keep on success) and
/// checks the invariants after every step. Returns the transcript.
fn run(rules: &Rules, steps: &[Step]) -> Result<Transcript, TestCaseError> {
    let mut stored = RegistryState::default();
    let mut now = 1_000.0;
    let mut transcript = Vec::new();
    for step in steps {
        match step {
            Step::Advance(seconds) => now += seconds,
            Step::Lookup {
                module,
                major,
                limit,
            } => {
                let get_req = pb::GetModuleRequest {
                    module_id: MODULES[*module].into(),
                    contract_major: *major,
                    ..Default::default()
                };
                let list_req = pb::ListModulesRequest {
                    limit: *limit,
                    ..Default::default()
                };
                let get = rules.get_module(&stored, &get_req, now);
                let list = rules.list_modules(&stored, &list_req, now);
                // A prepared snapshot answers exactly the same, twice.
                let prepared = Prepared::new(Arc::new(stored.clone()));
                for _ in 0..2 {
                    prop_assert_eq!(&rules.get_module(&prepared, &get_req, now), &get);
                    prop_assert_eq!(&rules.list_modules(&prepared, &list_req, now), &list);
                }
                if let Ok(list) = &list {
                    prop_assert!(list.instances.len() <= *limit as usize);
                    prop_assert!(
                        list.instances
                            .windows(2)
                            .all(|w| w[0].instance_id < w[1].instance_id)
                    );
                }
                transcript.push(format!("{get:?} {list:?}"));
            }
            _ => {
                let (mutation, owner) = mutation(step).expect("a mutation step");
                let mut live = stored.clone();
                prune_expired(&mut live, now);
                let before = live.encode_to_vec();
                let previous: HashMap<String, (bool, bool)> = live
                    .records
                    .iter()
                    .map(|r| {
                        let id = r.instance.as_ref().unwrap().instance_id.clone();
                        (id, (r.initialized, r.draining))
                    })
                    .collect();
                let answer = rules.apply(&mut live, &mutation, owner, now);
                match &answer {
                    Err(_) => {
                        prop_assert_eq!(
                            live.encode_to_vec(),
                            before,
                            "a refusal changed the state"
                        );
                    }
                    Ok(outcome) => {
                        check_outcome(rules, outcome)?;
                        // No operation removes and re-adds one instance, so a
                        // record seen before is the same registration.
                        for r in &live.records {
                            let id = &r.instance.as_ref().unwrap().instance_id;
                            if let Some((initialized, draining)) = previous.get(id) {
                                prop_assert!(
                                    r.initialized || !initialized,
                                    "initialized went back"
                                );
                                prop_assert!(r.draining || !draining, "draining went back");
                            }
                        }
                        stored = live;
                    }
                }
                transcript.push(format!("{answer:?}"));
            }
        }
        check_state(&stored, now)?;
    }
    transcript.push(format!("{:?}", stored.encode_to_vec()));
    Ok(transcript)
}

fn check_outcome(rules: &Rules, outcome: &Outcome) -> Result<(), TestCaseError> {
    let lease = match outcome {
        Outcome::Register(r) => Some(r.lease_seconds),
        Outcome::Renew(r) => Some(r.lease_seconds),
        Outcome::Unregister(_) | Outcome::Evict(_) => None,
    };
    if let Some(lease) = lease {
        prop_assert!((0.0..=rules.lease_seconds() + 1e-9).contains(&lease));
    }
    Ok(())
}

fn check_state(stored: &RegistryState, now: f64) -> Result<(), TestCaseError> {
    let live = view(stored, now);
    prop_assert!(live.records.len() <= MAX_INSTANCES);
    prop_assert!(stored.encoded_len() <= MAX_SNAPSHOT_BYTES);
    let ready: HashSet<(String, u32)> = live
        .records
        .iter()
        .filter_map(|r| {
            let i = r.instance.as_ref()?;
            let d = i.descriptor.as_ref()?;
            (i.status == "READY").then(|| (d.module_id.clone(), d.contract_major))
        })
        .collect();
    for r in &live.records {
        let i = r.instance.as_ref().unwrap();
        prop_assert!(
            ["STARTING", "STAGED", "DEGRADED", "READY", "DRAINING"].contains(&i.status.as_str()),
            "unknown status {}",
            i.status
        );
        prop_assert!(i.expires_at > now, "a lookup sees an expired record");
        if i.status == "READY" {
            for dep in &i.descriptor.as_ref().unwrap().dependencies {
                prop_assert!(
                    ready.contains(&(dep.module_id.clone(), dep.contract_major)),
                    "{} is READY but its dependency {} has no READY instance",
                    i.instance_id,
                    dep.module_id
                );
            }
        }
        if r.draining {
            prop_assert_eq!(&i.status, "DRAINING");
        } else if !r.initialized {
            prop_assert_eq!(&i.status, "STARTING");
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_the_invariants_and_are_deterministic(
        steps in prop::collection::vec(step(), 1..60)
    ) {
        let rules = Rules::default();
        let first = run(&rules, &steps)?;
        let second = run(&rules, &steps)?;
        prop_assert_eq!(first, second);
    }
}

/// Runs `steps` the way the service's writer does: the mutations between two
/// clock moves (or lookups) form one batch, applied to one [`Draft`] after
/// pruning; and, beside it, one plain [`Rules::apply`] per mutation. Every
/// answer and the stored bytes after every batch must be the same.
fn batches_match_single_applies(rules: &Rules, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut single = RegistryState::default();
    let mut batched = RegistryState::default();
    let mut now = 1_000.0;
    let mut run: Vec<&Step> = Vec::new();
    for step in steps.iter().chain([&Step::Advance(0.0)]) {
        let advance = match step {
            Step::Advance(seconds) => *seconds,
            Step::Lookup { .. } => 0.0,
            _ => {
                run.push(step);
                continue;
            }
        };
        let mut draft = {
            let mut state = batched.clone();
            prune_expired(&mut state, now);
            Draft::new(state)
        };
        for step in run.drain(..) {
            let (mutation, owner) = mutation(step).expect("a mutation step");
            let mut live = single.clone();
            prune_expired(&mut live, now);
            let want = rules.apply(&mut live, &mutation, owner, now);
            if want.is_ok() {
                single = live;
            }
            let have = draft.apply(rules, &mutation, owner, now);
            prop_assert_eq!(&have, &want, "answers differ for {:?}", step);
            prop_assert_eq!(draft.encoded_len(), draft.state().encoded_len());
        }
        batched = draft.into_state();
        prune_expired(&mut single, now);
        prop_assert_eq!(batched.encode_to_vec(), single.encode_to_vec());
        now += advance;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_draft_applies_a_batch_exactly_like_single_applies(
        steps in prop::collection::vec(step(), 1..80)
    ) {
        batches_match_single_applies(&Rules::default(), &steps)?;
    }
}

/// A descriptor of roughly `size` bytes, made of agent descriptions.
fn bulky(module: &str, size: usize) -> pb::ModuleDescriptor {
    let agents = (0..size / 4000 + 1)
        .map(|n| pb::AgentDescriptor {
            name: format!("agent{n}"),
            description: "d".repeat(size.min(4000)),
            contract_major: 1,
            capabilities: vec!["agent.invoke.v1".into()],
        })
        .collect();
    pb::ModuleDescriptor {
        module_id: module.into(),
        contract_major: 1,
        agents,
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Filling the registry with registrations of random sizes stops at 256
    /// instances or 512 KiB, with REGISTRY_FULL and nothing changed.
    #[test]
    fn bounds_hold_while_filling_the_registry(
        // Small descriptors hit the count first, large ones the byte bound.
        sizes in prop_oneof![Just(1_500usize), Just(12_000usize)]
            .prop_flat_map(|max| prop::collection::vec(0..max, 260..300))
    ) {
        let rules = Rules::default();
        let mut state = RegistryState::default();
        for (n, size) in sizes.iter().enumerate() {
            let req = pb::RegisterRequest {
                descriptor: Some(bulky(&format!("m{n}"), *size)),
                instance_id: format!("i{n}"),
                lease_token: "t".repeat(32),
                ..Default::default()
            };
            let before = state.encode_to_vec();
            let count = state.records.len();
            match rules.apply(&mut state, &Mutation::Register(req), "owner", 0.0) {
                Ok(_) => prop_assert_eq!(state.records.len(), count + 1),
                Err(err) => {
                    prop_assert_eq!(err.code(), abi_registry::ErrorCode::RegistryFull);
                    prop_assert_eq!(state.encode_to_vec(), before);
                    let full_by_count = count == MAX_INSTANCES;
                    let full_by_size = err.message() == "Registry snapshot exceeds 512 KiB";
                    prop_assert!(full_by_count || full_by_size, "{}", err);
                }
            }
            prop_assert!(state.records.len() <= MAX_INSTANCES);
            prop_assert!(state.encoded_len() <= MAX_SNAPSHOT_BYTES);
        }
        // 260+ attempts always hit one of the two bounds.
        prop_assert!(
            state.records.len() == MAX_INSTANCES
                || state.encoded_len() > MAX_SNAPSHOT_BYTES - 30_000
        );
    }
}
