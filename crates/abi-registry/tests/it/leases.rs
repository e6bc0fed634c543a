//! Leases: expiry, renewal, idempotent registration, ownership and eviction.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;
use abi_registry::{Error, ErrorCode, Rules, lease_hash};

#[test]
fn readiness_follows_a_dependency_through_loss_and_recovery_with_replicas() {
    let mut reg = Registry::new();
    let a = registration("a", "a", &["b"]);
    let b = registration("b", "b", &[]);
    reg.up(&a);
    reg.up(&b);
    assert_eq!(reg.statuses("a", 1), statuses(&[("a", "READY")]));

    // Only a renews: at 21 b's lease (ended at 20) is gone, a loses READY.
    reg.now = 15.0;
    reg.renew(&a).unwrap();
    reg.now = 21.0;
    assert_eq!(reg.statuses("a", 1), statuses(&[("a", "DEGRADED")]));
    assert_refused(
        reg.renew(&b),
        "LEASE_EXPIRED: Register a fresh instance after lease loss",
    );

    // Two fresh replicas of b bring a back.
    for id in ["b2", "b3"] {
        reg.up(&registration("b", id, &[]));
    }
    assert_eq!(
        reg.statuses("b", 1),
        statuses(&[("b2", "READY"), ("b3", "READY")])
    );
    assert_eq!(reg.statuses("a", 1), statuses(&[("a", "READY")]));
}

#[test]
fn a_lease_ends_exactly_at_its_expiry() {
    let mut reg = Registry::new();
    let m = registration("m", "m-1", &[]);
    reg.register(&m).unwrap();
    reg.now = 19.999;
    assert_eq!(reg.listed(), ["m-1"]);
    reg.now = 20.0;
    assert!(reg.listed().is_empty());
    assert_refused(reg.get_module("m", 1), "MODULE_NOT_FOUND: m");
}

#[test]
fn register_and_renew_report_the_lease_granted() {
    let mut reg = Registry::new();
    reg.now = 100.0;
    let m = registration("m", "m-1", &[]);
    let registered = reg.register(&m).unwrap();
    assert_eq!(registered.lease_seconds, 20.0);
    let instance = registered.instance.unwrap();
    assert_eq!(instance.expires_at, 120.0);
    assert_eq!(instance.status, "STARTING");
    assert_eq!(instance.instance_id, "m-1");
    assert_eq!(instance.descriptor, m.descriptor);

    reg.now = 110.5;
    let renewed = reg.renew(&m).unwrap();
    assert_eq!(renewed.lease_seconds, 20.0);
    let instance = renewed.instance.unwrap();
    assert_eq!(instance.expires_at, 130.5);
    assert_eq!(instance.status, "READY");

    let record = reg.record("m-1");
    assert_eq!(record.registered_at, 100.0);
    assert_eq!(record.owner, OWNER);
    assert_eq!(record.lease_hash, lease_hash(&m.lease_token));
    assert!(record.initialized && !record.draining);
}

#[test]
fn a_register_retry_neither_extends_the_lease_nor_overstates_what_is_left() {
    let mut reg = Registry::new();
    let m = registration("module", "instance", &[]);
    let first = reg.register(&m).unwrap();
    reg.now = 15.0;
    let repeated = reg.register(&m).unwrap();
    assert_eq!(
        repeated.instance.as_ref().unwrap().expires_at,
        first.instance.as_ref().unwrap().expires_at
    );
    assert_eq!(repeated.lease_seconds, 5.0);
    assert_eq!(reg.record("instance").registered_at, 0.0);
}

#[test]
fn a_retry_must_come_from_the_same_lease_and_keep_its_identity() {
    let mut reg = Registry::new();
    let m = registration("m", "m-1", &[]);
    reg.register(&m).unwrap();

    assert_refused(
        reg.register_as(&m, "intruder"),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    let mut other_token = m.clone();
    other_token.lease_token = "b".repeat(40);
    assert_refused(
        reg.register(&other_token),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    let mut new_version = m.clone();
    descriptor(&mut new_version).package_version = "2.0.0".to_owned();
    assert_refused(
        reg.register(&new_version),
        "DESCRIPTOR_CONFLICT: Registration identity cannot change",
    );
}

#[test]
fn a_changed_declaration_on_retry_is_a_replica_conflict_first() {
    // The replica check runs over every live record, the instance's own
    // included, before the retry's identity check.
    let mut reg = Registry::new();
    let m = registration("m", "m-1", &[]);
    reg.register(&m).unwrap();
    assert_refused(
        reg.register(&with_agent(m, "Researcher")),
        "DESCRIPTOR_CONFLICT: Replicas of a contract in one rollout must declare identical dependencies, agents, jobs, models and apps",
    );
}

#[test]
fn renewals_need_the_owner_and_its_token() {
    let mut reg = Registry::new();
    let m = registration("m", "m-1", &[]);
    reg.register(&m).unwrap();
    let before = reg.bytes();
    assert_refused(
        reg.renew_with(renewal(&m, true), "intruder"),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    let mut wrong = renewal(&m, true);
    wrong.lease_token = "wrong".to_owned();
    assert_refused(
        reg.renew_with(wrong, OWNER),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    assert_eq!(reg.bytes(), before);
}

#[test]
fn initialized_and_draining_never_go_back() {
    let mut reg = Registry::new();
    let m = registration("m", "m-1", &[]);
    reg.register(&m).unwrap();
    reg.renew(&m).unwrap();
    let again = reg.renew_with(renewal(&m, false), OWNER).unwrap();
    assert_eq!(again.instance.unwrap().status, "READY");
    assert!(reg.record("m-1").initialized);

    let mut drain = renewal(&m, false);
    drain.draining = true;
    let drained = reg.renew_with(drain, OWNER).unwrap();
    assert_eq!(drained.instance.unwrap().status, "DRAINING");
    let later = reg.renew_with(renewal(&m, true), OWNER).unwrap();
    assert_eq!(later.instance.unwrap().status, "DRAINING");
    let record = reg.record("m-1");
    assert!(record.initialized && record.draining);
}

#[test]
fn only_the_owner_unregisters_and_unregistering_twice_succeeds() {
    let mut reg = Registry::new();
    let a = registration("a", "a", &["b"]);
    reg.register(&a).unwrap();
    reg.register(&a).unwrap();
    assert_refused(
        reg.unregister(&a, "other"),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    assert_eq!(reg.listed(), ["a"]);
    reg.unregister(&a, OWNER).unwrap();
    reg.unregister(&a, OWNER).unwrap();
    assert!(reg.listed().is_empty());
    assert!(reg.state.records.is_empty());
}

#[test]
fn unregister_leaves_the_other_stored_statuses_as_they_were() {
    // The reference does not recompute statuses on unregister: the stored
    // snapshot keeps a's READY, lookups compute DEGRADED.
    let mut reg = Registry::new();
    let a = registration("a", "a", &["b"]);
    let b = registration("b", "b", &[]);
    reg.up(&b);
    reg.up(&a);
    reg.unregister(&b, OWNER).unwrap();
    assert_eq!(reg.record("a").instance.as_ref().unwrap().status, "READY");
    assert_eq!(reg.statuses("a", 1), statuses(&[("a", "DEGRADED")]));
}

#[test]
fn platform_admins_evict_and_the_owner_must_register_again() {
    let mut reg = Registry::new();
    let stuck = registration("research", "r-1", &[]);
    reg.register_as(&stuck, "research").unwrap();

    let evicted = reg.evict("r-1", "api").unwrap();
    let instance = evicted.instance.unwrap();
    assert_eq!(instance.instance_id, "r-1");
    assert_eq!(instance.descriptor.unwrap().module_id, "research");
    assert_eq!(instance.status, "STARTING");
    assert!(reg.listed().is_empty());

    let lost = reg.renew_with(renewal(&stuck, false), "research");
    assert_refused(
        lost,
        "LEASE_EXPIRED: Register a fresh instance after lease loss",
    );
}

#[test]
fn only_configured_admin_identities_evict() {
    let mut reg = Registry::with_rules(Rules::new(20.0, ["ops"]).unwrap());
    reg.register_as(&registration("research", "r-1", &[]), "research")
        .unwrap();
    for caller in ["research", "api", "engine"] {
        assert_refused(
            reg.evict("r-1", caller),
            "PERMISSION_DENIED: Only platform administrators can evict registrations",
        );
    }
    reg.evict("r-1", "ops").unwrap();
    assert!(reg.listed().is_empty());
}

#[test]
fn the_default_admins_are_the_api_and_the_engine() {
    let mut reg = Registry::new();
    for (i, caller) in ["api", "engine"].into_iter().enumerate() {
        let id = format!("m-{i}");
        reg.register_as(&registration("m", &id, &[]), "m").unwrap();
        reg.evict(&id, caller).unwrap();
    }
    reg.register_as(&registration("m", "m-0", &[]), "m")
        .unwrap();
    assert_refused(
        reg.evict("m-0", "m"),
        "PERMISSION_DENIED: Only platform administrators can evict registrations",
    );
}

#[test]
fn evicting_an_unknown_or_malformed_instance_is_refused() {
    let mut reg = Registry::new();
    assert_refused(reg.evict("missing", "api"), "INSTANCE_NOT_FOUND: missing");
    assert_refused(
        reg.evict("", "api"),
        "INVALID_ARGUMENT: Invalid instance identity",
    );
    assert_refused(
        reg.evict("a/b", "api"),
        "INVALID_ARGUMENT: Invalid instance identity",
    );
    // The caller is checked before the instance id.
    assert_refused(
        reg.evict("a/b", "nobody"),
        "PERMISSION_DENIED: Only platform administrators can evict registrations",
    );
}

#[test]
fn eviction_recomputes_the_statuses_left_behind() {
    let mut reg = Registry::new();
    let a = registration("a", "a", &["b"]);
    let b = registration("b", "b", &[]);
    reg.up(&b);
    reg.up(&a);
    let evicted = reg.evict("b", "engine").unwrap();
    assert_eq!(evicted.instance.unwrap().status, "READY");
    assert_eq!(
        reg.record("a").instance.as_ref().unwrap().status,
        "DEGRADED"
    );
}

#[test]
fn admin_identities_must_be_named_and_leases_sensible() {
    assert!(Rules::new(20.0, [""]).is_err());
    assert!(Rules::new(0.5, ["api"]).is_err());
    assert!(Rules::new(f64::NAN, ["api"]).is_err());
    assert!(Rules::new(f64::INFINITY, ["api"]).is_err());
    let rules = Rules::new(1.0, ["ops"]).unwrap();
    assert_eq!(rules.lease_seconds(), 1.0);
    assert!(rules.is_admin("ops") && !rules.is_admin("api"));
}

#[test]
fn error_codes_carry_the_reference_strings() {
    let err = Error::new(ErrorCode::LeaseExpired, "Provider registration expired");
    assert_eq!(
        err.to_string(),
        "LEASE_EXPIRED: Provider registration expired"
    );
    assert_eq!(err.message(), "Provider registration expired");
    assert_eq!(
        ErrorCode::from_wire("REGISTRY_BUSY"),
        Some(ErrorCode::RegistryBusy)
    );
    assert_eq!(ErrorCode::from_wire("BOGUS"), None);
    for code in [
        ErrorCode::InvalidArgument,
        ErrorCode::DescriptorConflict,
        ErrorCode::DependencyCycle,
        ErrorCode::PermissionDenied,
        ErrorCode::RegistryFull,
        ErrorCode::RegistryBusy,
        ErrorCode::LeaseExpired,
        ErrorCode::InstanceNotFound,
        ErrorCode::ModuleNotFound,
        ErrorCode::IncompatibleModule,
        ErrorCode::AgentNotFound,
        ErrorCode::ModelNotFound,
        ErrorCode::AppNotFound,
        ErrorCode::ModuleUnavailable,
        ErrorCode::Unauthenticated,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unavailable,
    ] {
        assert_eq!(ErrorCode::from_wire(code.as_str()), Some(code));
    }
}
