//! A module that serves and calls no jobs, workflows, agents or models depends on
//! `abi-sdk` with `default-features = false` and compiles none of the host
//! crates; with the default features it gets all three.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::process::Command;

const HOST_CRATES: [&str; 4] = ["abi-jobs", "abi-agents", "abi-models", "abi-workflows"];

/// The crates `abi-sdk` links with `features` (normal dependencies only).
fn linked_crates(features: &[&str]) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["tree", "--locked", "-e", "normal", "--prefix", "none"])
        .args(["-p", "abi-sdk"])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("cargo tree prints UTF-8")
        .lines()
        .filter_map(|line| line.split(' ').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn without_default_features_no_host_crate_is_compiled() {
    let plain = linked_crates(&["--no-default-features"]);
    assert!(plain.iter().any(|c| c == "abi-sdk-core"), "{plain:?}");
    for host in HOST_CRATES {
        assert!(!plain.iter().any(|c| c == host), "{host} in {plain:?}");
    }
    let full = linked_crates(&[]);
    for host in HOST_CRATES {
        assert!(
            full.iter().any(|c| c == host),
            "{host} missing from {full:?}"
        );
    }
    let jobs_only = linked_crates(&["--no-default-features", "--features", "jobs"]);
    assert!(jobs_only.iter().any(|c| c == "abi-jobs"));
    assert!(
        !jobs_only
            .iter()
            .any(|c| c == "abi-agents" || c == "abi-models")
    );
}
