//! Bounds: 256 live instances and a 512 KiB snapshot.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;
use abi_registry::{MAX_INSTANCES, MAX_SNAPSHOT_BYTES};
use prost::Message;

const FULL: &str = "REGISTRY_FULL: Registry supports at most 256 live instances";
const TOO_BIG: &str = "REGISTRY_FULL: Registry snapshot exceeds 512 KiB";

/// A JSON object of exactly `bytes` bytes.
fn json_of(bytes: usize) -> String {
    format!("{{\"d\":\"{}\"}}", "x".repeat(bytes - 8))
}

/// A module whose descriptor holds `jobs` jobs of about 32 KiB each.
fn heavy(module_id: &str, jobs: usize) -> pb::RegisterRequest {
    with_jobs(
        registration(module_id, module_id, &[]),
        (0..jobs).map(|i| {
            let mut job = job(&format!("j{i}"), "every", "1h");
            job.input_schema = json_of(16 * 1024);
            job.output_schema = json_of(16 * 1024);
            job
        }),
    )
}

#[test]
fn the_registry_holds_at_most_256_live_instances() {
    let mut reg = Registry::new();
    let replicas: Vec<_> = (0..MAX_INSTANCES)
        .map(|i| registration("m", &format!("m-{i}"), &[]))
        .collect();
    for req in &replicas {
        reg.register(req).unwrap();
    }
    assert_eq!(MAX_INSTANCES, 256);
    assert_eq!(reg.state.records.len(), 256);

    let before = reg.bytes();
    assert_refused(reg.register(&registration("m", "one-more", &[])), FULL);
    assert_eq!(reg.bytes(), before);
    // A retry of a registered instance adds nothing, so it still succeeds.
    reg.register(&replicas[7]).unwrap();

    // A lease that ends makes room again.
    reg.unregister(&replicas[0], OWNER).unwrap();
    reg.register(&registration("m", "one-more", &[])).unwrap();
    reg.now = 25.0;
    reg.register(&registration("m", "after-expiry", &[]))
        .unwrap();
    assert_eq!(reg.listed(), ["after-expiry"]);
}

#[test]
fn a_mutation_that_would_grow_the_snapshot_past_512_kib_is_refused() {
    let mut reg = Registry::new();
    // One descriptor alone can be over the bound.
    assert_refused(reg.register(&heavy("huge", 17)), TOO_BIG);
    assert!(reg.state.records.is_empty());

    // Or the registry fills up module by module.
    let mut registered = 0;
    loop {
        let req = heavy(&format!("m{registered}"), 4);
        let before = reg.bytes();
        match reg.register(&req) {
            Ok(_) => registered += 1,
            Err(err) => {
                assert_eq!(err.to_string(), TOO_BIG);
                assert_eq!(reg.bytes(), before);
                break;
            }
        }
        assert!(reg.state.encoded_len() <= MAX_SNAPSHOT_BYTES);
    }
    assert_eq!(registered, 3);
    assert!(reg.state.encoded_len() <= 512 * 1024);

    // Shrinking mutations still go through on a nearly full registry.
    let first = heavy("m0", 4);
    reg.renew(&first).unwrap();
    reg.unregister(&first, OWNER).unwrap();
    reg.register(&heavy("m3", 4)).unwrap();
}

#[test]
fn the_instance_count_is_checked_before_the_snapshot_size() {
    let mut reg = Registry::new();
    for i in 0..MAX_INSTANCES {
        reg.register(&registration("m", &format!("m-{i}"), &[]))
            .unwrap();
    }
    assert_refused(reg.register(&heavy("huge", 17)), FULL);
}
