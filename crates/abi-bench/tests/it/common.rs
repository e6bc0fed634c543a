//! Reading the benchmark's Markdown tables.

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
