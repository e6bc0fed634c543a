//! `abi-bench jobs --smoke` end to end: a real nats-server, the real
//! `abi-discovery` (the jobs stream) and `abi-documents` (the run records)
//! binaries, the raw floor and our host as processes of this binary, and the
//! Python reference's `JobHost`, a few runs each. A correctness check of the
//! tables only: no timing is asserted.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{cells, is_latency, is_number};

const COLUMNS: [&str; 3] = [
    "raw JetStream floor",
    "JobHost (Rust)",
    "reference JobHost (Python)",
];

/// The workspace binary `name` of this test's profile (built only when missing).
fn binary(name: &str) -> PathBuf {
    abi_test_support::workspace_binary(Path::new(env!("CARGO_BIN_EXE_abi-bench")), name, name)
}

#[test]
fn smoke_run_prints_every_row_and_verdict_for_every_target() {
    let _alone = crate::common::ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_abi-bench"))
        .args(["jobs", "--smoke", "--discovery-bin"])
        .arg(binary("abi-discovery"))
        .arg("--documents-bin")
        .arg(binary("abi-documents"))
        .output()
        .expect("run abi-bench jobs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "abi-bench jobs failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("one after another on one nats-server"),
        "the notes say how the targets shared the bus:\n{stdout}"
    );

    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('|')).collect();
    let header = cells(lines[0]);
    assert_eq!(header[0], "metric");
    assert_eq!(&header[1..], COLUMNS, "columns");
    assert!(lines[1].starts_with("|---|"), "separator: {}", lines[1]);
    let split = lines
        .iter()
        .position(|l| l.starts_with("| target |"))
        .expect("a verdict table");
    let rows: Vec<Vec<String>> = lines[2..split].iter().map(|l| cells(l)).collect();
    for row in &rows {
        assert_eq!(row.len(), 1 + COLUMNS.len(), "row width: {row:?}");
    }
    let row = |prefix: &str| -> &Vec<String> {
        let found: Vec<_> = rows.iter().filter(|r| r[0].starts_with(prefix)).collect();
        assert_eq!(found.len(), 1, "row {prefix:?} in:\n{stdout}");
        found[0]
    };
    for label in ["trigger-to-start, idle", "trigger-to-completion notice"] {
        let r = row(label);
        assert!(r[1..].iter().all(|c| is_latency(c)), "{label}: {r:?}");
    }
    for n in [1, 16, 64] {
        let r = row(&format!("throughput, max_concurrency {n}, 50 triggers"));
        assert!(
            r[1..].iter().all(|c| is_number(c) && c != "0"),
            "max_concurrency {n}: {r:?}"
        );
    }
    let stored = row("triggers stored while publishing");
    assert!(stored[1..].iter().all(|c| is_number(c) && c != "0"));
    for label in [
        "host process CPU",
        "host process peak RSS",
        "abi-documents CPU",
        "nats-server CPU",
    ] {
        let r = row(label);
        assert!(r[1..].iter().all(|c| is_number(c)), "{label}: {r:?}");
    }
    let split_cpu = row("CPU per run, max_concurrency 64");
    for cell in &split_cpu[1..] {
        let parts: Vec<&str> = cell.split(" / ").collect();
        assert!(
            parts.len() == 4 && parts.iter().all(|p| is_number(p)),
            "four processes' CPU per run: {split_cpu:?}"
        );
    }
    let failed = row("failed or missing runs");
    assert_eq!(&failed[1..], ["0", "0", "0"], "every run succeeded");
    assert_eq!(rows.len(), 12, "no other rows:\n{stdout}");

    let verdicts: Vec<Vec<String>> = lines[split..].iter().map(|l| cells(l)).collect();
    assert_eq!(verdicts[0], ["target", "measured", "verdict"]);
    assert_eq!(verdicts.len(), 2 + 2, "two targets:\n{stdout}");
    for verdict in &verdicts[2..] {
        assert!(
            verdict[2] == "**met**" || verdict[2] == "**missed**",
            "every target judged: {verdict:?}"
        );
    }
}
