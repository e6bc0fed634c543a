//! How the runner shares the time left for closing hosts: one after the
//! other, each gets an equal share of what is left, so a host that overruns
//! its share takes only its own time and the hosts after it still close.
//! Pure, so the rule is a table test.

use tokio::time::Instant;

/// The deadline of the next host to close, at `now`, with `hosts_left`
/// hosts (this one included) still to close by `until`.
pub(crate) fn share(now: Instant, until: Instant, hosts_left: usize) -> Instant {
    let left = until.saturating_duration_since(now);
    let count = u32::try_from(hosts_left.max(1)).unwrap_or(u32::MAX);
    now + left / count
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn each_host_gets_an_equal_share_of_what_is_left() {
        let now = Instant::now();
        let secs = Duration::from_secs;
        // (time left, hosts left, share)
        let rows = [
            (secs(9), 3, secs(3)),
            (secs(9), 1, secs(9)),
            (secs(9), 0, secs(9)),
            (secs(0), 2, secs(0)),
            (Duration::from_millis(10), 4, Duration::from_micros(2500)),
        ];
        for (left, hosts, expected) in rows {
            assert_eq!(
                share(now, now + left, hosts) - now,
                expected,
                "{left:?} for {hosts}"
            );
        }
        // A deadline already gone gives no time at all.
        assert_eq!(share(now + secs(5), now, 2), now + secs(5));
    }
}
