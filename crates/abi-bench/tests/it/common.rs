//! Running a benchmark's smoke pass and reading its Markdown tables.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cells of one table row.
pub fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_owned())
        .collect()
}

/// "p50 / p99" in milliseconds, both finite, p50 <= p99.
pub fn is_latency(cell: &str) -> bool {
    let parts: Vec<f64> = cell
        .split(" / ")
        .filter_map(|p| p.parse::<f64>().ok())
        .collect();
    parts.len() == 2 && parts.iter().all(|v| v.is_finite() && *v >= 0.0) && parts[0] <= parts[1]
}

/// A finite, non-negative number.
pub fn is_number(cell: &str) -> bool {
    cell.parse::<f64>().is_ok_and(|v| v.is_finite() && v >= 0.0)
}

/// Held by each smoke run: they measure, so they run one at a time (the
/// test harness would run them in parallel threads of this binary).
pub static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The workspace binary `name` of this test's profile (built only when missing).
pub fn binary(name: &str) -> PathBuf {
    abi_test_support::workspace_binary(Path::new(env!("CARGO_BIN_EXE_abi-bench")), name, name)
}

/// What `abi-bench <bench> --smoke` printed, its tables checked for shape:
/// a `metric` header naming the columns, the metric rows (each as wide as
/// the header), then the verdict table.
pub struct SmokeRun {
    /// Everything it printed on stdout.
    pub stdout: String,
    /// The metric rows, as cells.
    pub rows: Vec<Vec<String>>,
    /// The verdict table's rows (its header first), as cells.
    pub verdicts: Vec<Vec<String>>,
}

impl SmokeRun {
    /// Runs `abi-bench <bench> --smoke` against the workspace's discovery and
    /// document binaries, one smoke run at a time.
    pub fn run(bench: &str, columns: &[&str]) -> Self {
        Self::run_with(bench, &[], columns)
    }

    /// As [`SmokeRun::run`], with `extra` flags after `--smoke`.
    pub fn run_with(bench: &str, extra: &[&str], columns: &[&str]) -> Self {
        let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let out = Command::new(env!("CARGO_BIN_EXE_abi-bench"))
            .args([bench, "--smoke"])
            .args(extra)
            .arg("--discovery-bin")
            .arg(binary("abi-discovery"))
            .arg("--documents-bin")
            .arg(binary("abi-documents"))
            .output()
            .expect("run abi-bench");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "abi-bench {bench} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        );
        assert!(
            stdout.contains("one after another on one nats-server"),
            "the notes say how the targets shared the bus:\n{stdout}"
        );
        let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with('|')).collect();
        let header = cells(lines[0]);
        assert_eq!(header[0], "metric");
        assert_eq!(&header[1..], columns, "columns");
        assert!(lines[1].starts_with("|---|"), "separator: {}", lines[1]);
        let split = lines
            .iter()
            .position(|l| l.starts_with("| target |"))
            .expect("a verdict table");
        let rows: Vec<Vec<String>> = lines[2..split].iter().map(|l| cells(l)).collect();
        for row in &rows {
            assert_eq!(row.len(), 1 + columns.len(), "row width: {row:?}");
        }
        let verdicts = lines[split..].iter().map(|l| cells(l)).collect();
        Self {
            stdout,
            rows,
            verdicts,
        }
    }

    /// The one metric row whose label starts with `prefix`.
    pub fn row(&self, prefix: &str) -> &Vec<String> {
        let found: Vec<_> = self
            .rows
            .iter()
            .filter(|r| r[0].starts_with(prefix))
            .collect();
        assert_eq!(found.len(), 1, "row {prefix:?} in:\n{}", self.stdout);
        found[0]
    }
}
