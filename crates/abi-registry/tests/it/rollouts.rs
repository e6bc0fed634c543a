//! Rollouts: cohorts, the serving generation, STAGED and DRAINING.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;

const COHORT: &[&str] = &["a", "b"];

#[test]
fn a_rollout_waits_for_its_cohort_then_drains_the_previous_generation() {
    let mut reg = Registry::new();
    reg.up(&registration("a", "a-old", &[]));
    reg.up(&registration("b", "b-old", &[]));
    reg.now = 10.0;
    let new_a = in_rollout(registration("a", "a-new", &[]), "release-2", COHORT);
    reg.up(&new_a);
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "READY"), ("a-new", "STAGED")])
    );
    assert_eq!(reg.statuses("b", 1)["b-old"], "READY");

    let new_b = in_rollout(registration("b", "b-new", &[]), "release-2", COHORT);
    reg.up(&new_b);
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "DRAINING"), ("a-new", "READY")])
    );
    assert_eq!(
        reg.statuses("b", 1),
        statuses(&[("b-old", "DRAINING"), ("b-new", "READY")])
    );
    // The drain is stored, so it survives the next write.
    assert!(reg.record("a-old").draining && reg.record("b-old").draining);
    assert_eq!(reg.record("a-new").rollout_modules, ["a", "b"]);
}

#[test]
fn a_replica_joins_its_rollout_and_a_later_rollout_replaces_both() {
    let mut reg = Registry::new();
    reg.up(&in_rollout(registration("a", "a1", &[]), "release-1", &[]));
    reg.up(&in_rollout(registration("a", "a2", &[]), "release-1", &[]));
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a1", "READY"), ("a2", "READY")])
    );
    reg.now = 5.0;
    let next = at_contract(registration("a", "a3", &[]), 2);
    reg.up(&in_rollout(next, "release-2", &[]));
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a1", "DRAINING"), ("a2", "DRAINING")])
    );
    assert_eq!(reg.statuses("a", 2), statuses(&[("a3", "READY")]));
}

#[test]
fn a_new_rollout_may_add_jobs_and_agents_and_still_waits_for_its_cohort() {
    let mut reg = Registry::new();
    reg.up(&with_jobs(registration("a", "a-old", &[]), [ingest()]));
    reg.up(&registration("b", "b-old", &[]));
    reg.now = 10.0;
    // Same contract major: a changed schedule and a new job on a, an agent on b.
    let new_a = with_jobs(
        in_rollout(registration("a", "a-new", &[]), "release-2", COHORT),
        [
            job("ingest", "cron", "0 0 7 * * *"),
            job("summary", "every", "1h"),
        ],
    );
    let new_b = with_agent(
        in_rollout(registration("b", "b-new", &[]), "release-2", COHORT),
        "Researcher",
    );
    reg.up(&new_a);
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "READY"), ("a-new", "STAGED")])
    );
    reg.up(&new_b);
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "DRAINING"), ("a-new", "READY")])
    );
    assert_eq!(
        reg.statuses("b", 1),
        statuses(&[("b-old", "DRAINING"), ("b-new", "READY")])
    );
}

#[test]
fn a_single_module_rollout_with_a_new_job_replaces_the_live_one() {
    let mut reg = Registry::new();
    reg.up(&in_rollout(registration("a", "v1", &[]), "release-1", &[]));
    reg.now = 10.0;
    let v2 = with_jobs(
        in_rollout(registration("a", "v2", &[]), "release-2", &[]),
        [ingest()],
    );
    reg.up(&v2);
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("v1", "DRAINING"), ("v2", "READY")])
    );
}

#[test]
fn a_first_rollout_becomes_ready_once_its_cohort_is_up() {
    let mut reg = Registry::new();
    reg.up(&in_rollout(
        registration("b", "b1", &[]),
        "release-1",
        COHORT,
    ));
    // Alone, b1 has no generation to wait for: it serves.
    assert_eq!(reg.statuses("b", 1), statuses(&[("b1", "READY")]));
    reg.up(&in_rollout(
        registration("a", "a1", &["b"]),
        "release-1",
        COHORT,
    ));
    assert_eq!(reg.statuses("a", 1), statuses(&[("a1", "READY")]));
    assert_eq!(reg.statuses("b", 1), statuses(&[("b1", "READY")]));
}

#[test]
fn a_missing_dependency_blocks_the_cutover() {
    let mut reg = Registry::new();
    reg.up(&registration("a", "a-old", &[]));
    let blocked = at_contract(registration("a", "a-new", &["missing"]), 2);
    reg.up(&in_rollout(blocked, "release-2", &[]));
    assert_eq!(reg.statuses("a", 1), statuses(&[("a-old", "READY")]));
    assert_eq!(reg.statuses("a", 2), statuses(&[("a-new", "STAGED")]));
    assert!(!reg.record("a-old").draining);
}

#[test]
fn the_serving_generation_keeps_serving_when_its_rollout_breaks() {
    let mut reg = Registry::new();
    let old_a = in_rollout(registration("a", "a-old", &[]), "release-1", COHORT);
    reg.up(&old_a);
    reg.up(&in_rollout(
        registration("b", "b-old", &[]),
        "release-1",
        COHORT,
    ));
    reg.now = 10.0;
    let new_a = in_rollout(registration("a", "a-new", &[]), "release-2", COHORT);
    reg.up(&new_a);
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "READY"), ("a-new", "STAGED")])
    );
    reg.now = 15.0;
    reg.renew(&old_a).unwrap();
    reg.now = 25.0; // b-old's lease ran out: release-1 is no longer complete.
    reg.renew(&new_a).unwrap();
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "READY"), ("a-new", "STAGED")])
    );

    // A replacement replica of the serving generation is not staged either.
    reg.up(&in_rollout(
        registration("a", "a-old-2", &[]),
        "release-1",
        COHORT,
    ));
    assert_eq!(reg.statuses("a", 1)["a-old-2"], "READY");

    // release-2 completes, takes over and drains the incomplete release-1.
    reg.up(&in_rollout(
        registration("b", "b-new", &[]),
        "release-2",
        COHORT,
    ));
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[
            ("a-old", "DRAINING"),
            ("a-old-2", "DRAINING"),
            ("a-new", "READY"),
        ])
    );
}

#[test]
fn an_incomplete_generation_serves_until_none_of_its_instances_is_left() {
    let mut reg = Registry::new();
    let cohort = &["a", "b", "c"]; // b never comes up: no rollout completes.
    let other = in_rollout(registration("c", "c-1", &[]), "release-1", cohort);
    reg.up(&other);
    reg.up(&in_rollout(
        registration("a", "a-1", &[]),
        "release-1",
        cohort,
    ));
    reg.now = 5.0;
    let second = in_rollout(registration("a", "a-2", &[]), "release-2", cohort);
    reg.up(&second);
    // The oldest generation serves first, and keeps serving.
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-1", "READY"), ("a-2", "STAGED")])
    );
    reg.now = 15.0;
    reg.renew(&other).unwrap();
    reg.renew(&second).unwrap();
    reg.now = 22.0; // a-1's lease ran out: release-2 is all that is left for a.
    reg.renew(&second).unwrap();
    assert_eq!(reg.statuses("a", 1), statuses(&[("a-2", "READY")]));

    // A late replica of the older release-1 does not take a-2's place back.
    reg.up(&in_rollout(
        registration("a", "a-1b", &[]),
        "release-1",
        cohort,
    ));
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-2", "READY"), ("a-1b", "STAGED")])
    );
}

#[test]
fn an_instance_outside_rollouts_serves_while_a_staged_rollout_waits() {
    // Without a complete rollout, instances with no rollout id count as the
    // oldest generation and serve.
    let mut reg = Registry::new();
    reg.up(&registration("a", "plain", &[]));
    reg.up(&in_rollout(
        registration("a", "a-r", &[]),
        "release-9",
        COHORT,
    ));
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("plain", "READY"), ("a-r", "STAGED")])
    );
    // Uninitialized members are STARTING whatever their generation.
    reg.register(&in_rollout(
        registration("a", "a-r2", &[]),
        "release-9",
        COHORT,
    ))
    .unwrap();
    assert_eq!(reg.statuses("a", 1)["a-r2"], "STARTING");
}

#[test]
fn replicas_of_one_generation_must_declare_identical_descriptors() {
    let mut reg = Registry::new();
    reg.up(&registration("a", "old", &[]));
    let first = with_jobs(
        in_rollout(registration("a", "r2-1", &[]), "release-2", &[]),
        [ingest()],
    );
    reg.register(&first).unwrap();
    let replica = || in_rollout(registration("a", "r2-2", &[]), "release-2", &[]);
    // Another replica of that rollout must match it, even with a live old one.
    for differs in [
        replica(),
        with_jobs(replica(), [job("other", "cron", "0 0 6 * * *")]),
        with_agent(with_jobs(replica(), [ingest()]), "Researcher"),
    ] {
        assert_refused(
            reg.register(&differs),
            "DESCRIPTOR_CONFLICT: Replicas of a contract in one rollout must declare identical dependencies, agents, jobs, models and apps",
        );
    }
    reg.register(&with_jobs(replica(), [ingest()])).unwrap();
    // Without rollout ids, every live replica is one generation.
    assert_refused(
        reg.register(&with_agent(registration("a", "plain", &[]), "Researcher")),
        "DESCRIPTOR_CONFLICT: Replicas of a contract in one rollout must declare identical dependencies, agents, jobs, models and apps",
    );
}

#[test]
fn members_of_one_rollout_must_declare_the_same_cohort() {
    let mut reg = Registry::new();
    reg.register(&in_rollout(
        registration("a", "a-1", &[]),
        "release-2",
        &["b", "a"],
    ))
    .unwrap();
    // Order and spelling of the list do not matter: it is stored sorted.
    reg.register(&in_rollout(
        registration("b", "b-1", &[]),
        "release-2",
        &["a", "b"],
    ))
    .unwrap();
    assert_eq!(reg.record("a-1").rollout_modules, ["a", "b"]);
    let before = reg.bytes();
    assert_refused(
        reg.register(&in_rollout(
            registration("c", "c-1", &[]),
            "release-2",
            &["a", "b", "c"],
        )),
        "DESCRIPTOR_CONFLICT: Rollout members do not match",
    );
    assert_refused(
        reg.register(&in_rollout(registration("a", "a-2", &[]), "release-2", &[])),
        "DESCRIPTOR_CONFLICT: Rollout members do not match",
    );
    assert_eq!(reg.bytes(), before);
}

#[test]
fn a_rollout_waits_for_an_initialized_dependency_outside_its_cohort() {
    let mut reg = Registry::new();
    reg.up(&registration("a", "a-old", &[]));
    let x = registration("x", "x-1", &[]);
    reg.register(&x).unwrap();
    reg.now = 1.0;
    reg.up(&in_rollout(
        registration("a", "a-new", &["x"]),
        "release-2",
        &[],
    ));
    // x is registered but not initialized: release-2 is not complete.
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "READY"), ("a-new", "STAGED")])
    );
    reg.renew(&x).unwrap();
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "DRAINING"), ("a-new", "READY")])
    );
}

#[test]
fn a_cohort_dependency_must_be_met_at_its_contract_major() {
    let mut reg = Registry::new();
    reg.up(&registration("a", "a-old", &[]));
    reg.up(&registration("b", "b-old", &[]));
    reg.now = 1.0;
    let mut new_a = in_rollout(registration("a", "a-new", &["b"]), "release-2", COHORT);
    descriptor(&mut new_a).dependencies[0].contract_major = 2;
    reg.up(&new_a);
    reg.up(&in_rollout(
        registration("b", "b-new", &[]),
        "release-2",
        COHORT,
    ));
    // The cohort brings b at contract 1 only: release-2 never completes.
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-old", "READY"), ("a-new", "STAGED")])
    );
    assert_eq!(
        reg.statuses("b", 1),
        statuses(&[("b-old", "READY"), ("b-new", "STAGED")])
    );
}

#[test]
fn rollouts_that_start_together_are_ordered_by_rollout_id() {
    let mut reg = Registry::new();
    reg.up(&in_rollout(registration("a", "a-1", &[]), "release-1", &[]));
    reg.up(&in_rollout(registration("a", "a-2", &[]), "release-2", &[]));
    // Both complete, both registered at 0: the greater id is the later one.
    assert_eq!(
        reg.statuses("a", 1),
        statuses(&[("a-1", "DRAINING"), ("a-2", "READY")])
    );
}
