//! `abi-bench --smoke` end to end: a real nats-server, the real
//! `abi-discovery` binary and the Python reference, a few calls each. A
//! correctness check of the table only: no timing is asserted.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{cells, is_latency, is_number};

const COLUMNS: [&str; 4] = [
    "raw req-reply",
    "raw KV CAS",
    "abi-discovery (Rust)",
    "reference (Python)",
];

/// The `abi-discovery` binary of this test's profile (built only when missing).
fn discovery_binary() -> PathBuf {
    abi_test_support::workspace_binary(
        Path::new(env!("CARGO_BIN_EXE_abi-bench")),
        "abi-discovery",
        "abi-discovery",
    )
}

#[test]
fn smoke_run_prints_every_row_for_every_target() {
    let _alone = crate::common::ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let discovery = discovery_binary();
    let out = Command::new(env!("CARGO_BIN_EXE_abi-bench"))
        .arg("--smoke")
        .arg("--discovery-bin")
        .arg(&discovery)
        .output()
        .expect("run abi-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "abi-bench failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );

    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('|')).collect();
    assert!(lines.len() >= 2, "no table in:\n{stdout}");
    let header = cells(lines[0]);
    assert_eq!(header[0], "metric");
    assert_eq!(&header[1..], COLUMNS, "columns");
    assert!(lines[1].starts_with("|---|"), "separator: {}", lines[1]);

    let rows: Vec<Vec<String>> = lines[2..].iter().map(|l| cells(l)).collect();
    for row in &rows {
        assert_eq!(row.len(), 1 + COLUMNS.len(), "row width: {row:?}");
    }
    let row = |label: &str| -> &Vec<String> {
        let found: Vec<_> = rows.iter().filter(|r| r[0] == label).collect();
        assert_eq!(found.len(), 1, "row {label:?} in:\n{stdout}");
        found[0]
    };
    for op in ["register", "renew", "get_module"] {
        for n in [1, 64, 256] {
            let r = row(&format!("{op} @{n}: p50 / p99 (ms)"));
            // Request-reply and both services answer every operation; KV CAS
            // stands for the writes only.
            for (i, cell) in r[1..].iter().enumerate() {
                if i == 1 && op == "get_module" {
                    assert_eq!(cell, "—", "{op} @{n} {}", COLUMNS[i]);
                } else {
                    assert!(is_latency(cell), "{op} @{n} {}: {cell:?}", COLUMNS[i]);
                }
            }
        }
    }
    let throughput = row("renew throughput @256, 64 callers (ops/s)");
    assert!(
        throughput[1..].iter().all(|c| is_number(c) && c != "0"),
        "{throughput:?}"
    );
    for label in ["service CPU while measured (s)", "service peak RSS (MiB)"] {
        let r = row(label);
        assert_eq!(&r[1..3], ["—", "—"], "{label}: raw targets have no process");
        assert!(r[3..].iter().all(|c| is_number(c)), "{label}: {r:?}");
    }
    let rss = row("service peak RSS (MiB)");
    assert!(rss[3..].iter().all(|c| c != "0.0"), "{rss:?}");
    let failed = row("failed calls");
    // The bench prints each target's first error on stderr: shown here, so a
    // failed call says what it was.
    assert_eq!(
        &failed[1..],
        ["0", "0", "0", "0"],
        "failed calls; stderr:\n{stderr}"
    );
    assert_eq!(rows.len(), 13, "no other rows:\n{stdout}");
}
