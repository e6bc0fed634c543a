//! The dependency-cycle check, generation by generation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;

const CYCLE: &str = "DEPENDENCY_CYCLE: Required modules form a cycle";

#[test]
fn a_module_that_would_depend_on_itself_is_refused() {
    let mut reg = Registry::new();
    let a = registration("a", "a", &["b"]);
    reg.register(&a).unwrap();
    reg.register(&a).unwrap(); // An idempotent retry is not a cycle.
    let before = reg.bytes();
    assert_refused(reg.register(&registration("b", "b", &["a"])), CYCLE);
    assert_refused(reg.register(&registration("c", "c", &["c"])), CYCLE);
    assert_eq!(reg.bytes(), before);
}

#[test]
fn longer_cycles_are_found_and_contract_majors_are_distinct_nodes() {
    let mut reg = Registry::new();
    reg.register(&registration("a", "a", &["b"])).unwrap();
    reg.register(&registration("b", "b", &["c"])).unwrap();
    assert_refused(reg.register(&registration("c", "c", &["a"])), CYCLE);
    // c at contract 2 depending on a@1 closes no loop through c@2.
    reg.register(&at_contract(registration("c", "c2", &["a"]), 2))
        .unwrap();
}

#[test]
fn a_cycle_elsewhere_does_not_refuse_an_unrelated_module() {
    let mut reg = Registry::new();
    reg.register(&registration("a", "a", &["b"])).unwrap();
    reg.register(&registration("d", "d", &["a", "b"])).unwrap();
    reg.register(&registration("e", "e", &["d"])).unwrap();
    assert_eq!(reg.listed(), ["a", "d", "e"]);
}

#[test]
fn draining_instances_take_no_part() {
    let mut reg = Registry::new();
    let a = registration("a", "a", &["b"]);
    reg.register(&a).unwrap();
    let mut drain = renewal(&a, false);
    drain.draining = true;
    reg.renew_with(drain, OWNER).unwrap();
    reg.register(&registration("b", "b", &["a"])).unwrap();
}

fn flip_a_dependency(order: [&str; 2]) -> Registry {
    let mut reg = Registry::new();
    reg.up(&registration("a", "a-old", &["b"]));
    reg.up(&registration("b", "b-old", &[]));
    reg.now = 10.0;
    // release-2 reverses the edge: b depends on a, and a no longer on b.
    let cohort = &["a", "b"];
    for name in order {
        let req = match name {
            "a" => in_rollout(registration("a", "a-new", &[]), "release-2", cohort),
            _ => in_rollout(registration("b", "b-new", &["a"]), "release-2", cohort),
        };
        reg.up(&req);
    }
    reg
}

#[test]
fn a_rollout_may_reverse_a_dependency_between_the_modules_it_replaces() {
    for order in [["b", "a"], ["a", "b"]] {
        let reg = flip_a_dependency(order);
        assert_eq!(
            reg.statuses("a", 1),
            statuses(&[("a-old", "DRAINING"), ("a-new", "READY")]),
            "{order:?}"
        );
        assert_eq!(
            reg.statuses("b", 1),
            statuses(&[("b-old", "DRAINING"), ("b-new", "READY")]),
            "{order:?}"
        );
    }
}

#[test]
fn cycles_within_a_generation_or_with_one_that_can_serve_beside_it_are_refused() {
    let mut reg = Registry::new();
    reg.up(&registration("a", "a-old", &[]));
    reg.up(&registration("c", "c-old", &["a"]));
    let cohort = &["a", "b"];
    reg.register(&in_rollout(
        registration("a", "a-2", &["b"]),
        "release-2",
        cohort,
    ))
    .unwrap();
    // Within one generation.
    assert_refused(
        reg.register(&in_rollout(
            registration("b", "b-2", &["a"]),
            "release-2",
            cohort,
        )),
        CYCLE,
    );
    // With the generation serving c, which release-3 does not replace.
    assert_refused(
        reg.register(&in_rollout(
            registration("a", "a-3", &["c"]),
            "release-3",
            &[],
        )),
        CYCLE,
    );
    // With release-2's staged a: both rollouts could serve side by side.
    assert_refused(
        reg.register(&in_rollout(
            registration("b", "b-4", &["a"]),
            "release-4",
            &[],
        )),
        CYCLE,
    );
    // Unrelated modules and acyclic edges still register.
    reg.register(&in_rollout(
        registration("d", "d-1", &["a", "c"]),
        "release-5",
        &[],
    ))
    .unwrap();
}
