//! The timestamps run records hold, as the reference writes them: Python's
//! `datetime.isoformat()` in UTC (`2026-10-01T12:00:00.123456+00:00`, the
//! fraction omitted when zero). Hosts compare them as strings, so a Rust
//! host must write the identical text.

use std::time::Duration;

use abi_document_model::Datetime;

/// `datetime.now(timezone.utc).isoformat()`.
pub fn now_iso() -> String {
    Datetime::now().isoformat()
}

/// `(datetime.now(timezone.utc) + timedelta(seconds=after)).isoformat()`.
pub fn iso_after(after: Duration) -> String {
    let now = Datetime::now().unix_micros();
    let micros = i64::try_from(after.as_micros()).unwrap_or(i64::MAX);
    Datetime::from_unix_micros(now.saturating_add(micros))
        .unwrap_or(Datetime::now())
        .isoformat()
}

/// A trigger's `fired_at`: its JetStream stored timestamp (`nanos` since the
/// epoch) as nats-py parses it, `datetime.fromtimestamp(ns / 1e9, utc)`:
/// float division, then CPython's split into whole seconds and microseconds
/// rounded half to even. Hosts of both languages compare this text, so it
/// must match to the bit.
pub fn fired_at(nanos: i128) -> String {
    // The same lossy float nats-py computes, on purpose.
    let t = nanos as f64 / 1e9;
    let mut whole = t.trunc();
    let mut micros = ((t - whole) * 1e6).round_ties_even();
    if micros >= 1e6 {
        micros -= 1e6;
        whole += 1.0;
    } else if micros < 0.0 {
        micros += 1e6;
        whole -= 1.0;
    }
    // Both are integral floats well inside i64 for any stored timestamp.
    let unix_micros = (whole as i64).saturating_mul(1_000_000) + micros as i64;
    Datetime::from_unix_micros(unix_micros)
        .map(Datetime::isoformat)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Golden values printed by CPython 3.11:
    /// `datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat()`.
    #[test]
    fn fired_at_rounds_as_cpython() {
        for (ns, expected) in [
            (0, "1970-01-01T00:00:00+00:00"),
            (
                1_790_000_000_123_456_789,
                "2026-09-21T14:13:20.123457+00:00",
            ),
            (1_790_000_000_000_000_000, "2026-09-21T14:13:20+00:00"),
            (1_790_000_000_000_000_500, "2026-09-21T14:13:20+00:00"),
            (1_790_000_000_999_999_600, "2026-09-21T14:13:21+00:00"),
            (
                1_764_582_000_123_456_500,
                "2025-12-01T09:40:00.123456+00:00",
            ),
        ] {
            assert_eq!(fired_at(ns), expected, "{ns}");
        }
    }
}
