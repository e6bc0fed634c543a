//! Readiness: STARTING, DEGRADED and READY through chains of dependencies.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;

#[test]
fn a_chain_becomes_ready_in_one_write_once_its_last_link_is_up() {
    let mut reg = Registry::new();
    reg.up(&registration("a", "a", &["b"]));
    reg.up(&registration("b", "b", &["c"]));
    assert_eq!(reg.statuses("a", 1)["a"], "DEGRADED");
    assert_eq!(reg.statuses("b", 1)["b"], "DEGRADED");
    let c = registration("c", "c", &[]);
    reg.register(&c).unwrap();
    assert_eq!(reg.statuses("c", 1)["c"], "STARTING");
    assert_eq!(reg.statuses("b", 1)["b"], "DEGRADED");
    reg.renew(&c).unwrap();
    // Statuses are stored by the write itself, not only computed by lookups.
    for id in ["a", "b", "c"] {
        assert_eq!(reg.record(id).instance.as_ref().unwrap().status, "READY");
    }
}

#[test]
fn a_dependency_at_another_contract_does_not_count() {
    let mut reg = Registry::new();
    let mut a = registration("a", "a", &["b"]);
    descriptor(&mut a).dependencies[0].contract_major = 2;
    reg.up(&a);
    reg.up(&registration("b", "b-1", &[]));
    assert_eq!(reg.statuses("a", 1)["a"], "DEGRADED");
    reg.up(&at_contract(registration("b", "b-2", &[]), 2));
    assert_eq!(reg.statuses("a", 1)["a"], "READY");
}

#[test]
fn a_draining_dependency_no_longer_makes_its_dependents_ready() {
    let mut reg = Registry::new();
    let b = registration("b", "b", &[]);
    reg.up(&b);
    reg.up(&registration("a", "a", &["b"]));
    assert_eq!(reg.statuses("a", 1)["a"], "READY");
    let mut drain = renewal(&b, true);
    drain.draining = true;
    let drained = reg.renew_with(drain, OWNER).unwrap();
    assert_eq!(drained.instance.unwrap().status, "DRAINING");
    assert_eq!(reg.statuses("a", 1)["a"], "DEGRADED");
    assert_eq!(
        reg.record("a").instance.as_ref().unwrap().status,
        "DEGRADED"
    );
}

#[test]
fn an_instance_registered_beside_a_ready_dependency_starts_then_is_ready() {
    let mut reg = Registry::new();
    reg.up(&registration("b", "b", &[]));
    let a = registration("a", "a", &["b"]);
    let registered = reg.register(&a).unwrap();
    assert_eq!(registered.instance.unwrap().status, "STARTING");
    // A renewal that does not report initialization changes nothing.
    let renewed = reg.renew_with(renewal(&a, false), OWNER).unwrap();
    assert_eq!(renewed.instance.unwrap().status, "STARTING");
    let renewed = reg.renew(&a).unwrap();
    assert_eq!(renewed.instance.unwrap().status, "READY");
}
