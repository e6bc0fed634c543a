//! When the next lease renewal happens (the reference's schedule).

use std::time::Duration;

/// Renewals happen at most this far apart while healthy.
const HEALTHY_INTERVAL: Duration = Duration::from_secs(5);
/// Backoff never waits longer than this.
const MAX_INTERVAL: Duration = Duration::from_secs(30);
/// Failures double the interval up to 2^3 = 8 times.
const MAX_DOUBLINGS: u32 = 3;
/// Never renew sooner than this, so an expired lease cannot spin.
const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// The delay before the next renewal.
///
/// `lease` is the lease length the service last granted, `failures` the
/// renewals failed in a row, `remaining` how much of the confirmed lease is
/// left (`None` or zero once it passed) and `jitter` a factor in 0.9..=1.1.
///
/// The healthy interval is `min(5 s, lease / 4)`, doubled per failure up to
/// 8x and capped at 30 s; after jitter it is cut to half of what is left of
/// the lease (half a lease once it passed), but never below 50 ms.
pub(crate) fn renew_delay(
    lease: Duration,
    failures: u32,
    remaining: Option<Duration>,
    jitter: f64,
) -> Duration {
    let base = HEALTHY_INTERVAL.min(lease / 4);
    let backed_off = (base * 2u32.pow(failures.min(MAX_DOUBLINGS))).min(MAX_INTERVAL);
    let jittered = backed_off.mul_f64(jitter.clamp(0.9, 1.1));
    let budget = match remaining {
        Some(left) if !left.is_zero() => left / 2,
        _ => lease / 2,
    };
    jittered.min(budget.max(MIN_INTERVAL))
}

/// A jitter factor drawn uniformly from 0.9..1.1.
pub(crate) fn jitter() -> f64 {
    use rand::Rng;
    rand::thread_rng().gen_range(0.9..=1.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn healthy_renewals_are_a_quarter_lease_up_to_five_seconds() {
        assert_eq!(renew_delay(S(20), 0, Some(S(20)), 1.0), S(5));
        assert_eq!(renew_delay(S(8), 0, Some(S(8)), 1.0), S(2));
        assert_eq!(renew_delay(S(60), 0, Some(S(60)), 1.0), S(5));
    }

    #[test]
    fn failures_double_up_to_eight_times_and_thirty_seconds() {
        let lease = S(600);
        let left = Some(S(600));
        assert_eq!(renew_delay(lease, 1, left, 1.0), S(10));
        assert_eq!(renew_delay(lease, 2, left, 1.0), S(20));
        assert_eq!(renew_delay(lease, 3, left, 1.0), S(30));
        assert_eq!(renew_delay(lease, 9, left, 1.0), S(30));
        // Eight times a small base stays below the cap.
        assert_eq!(renew_delay(S(8), 7, Some(S(100)), 1.0), S(16));
    }

    #[test]
    fn never_later_than_half_the_lease_left_nor_sooner_than_50ms() {
        assert_eq!(renew_delay(S(20), 2, Some(S(6)), 1.0), S(3));
        assert_eq!(
            renew_delay(S(20), 0, Some(Duration::from_millis(40)), 1.0),
            MIN_INTERVAL
        );
        // An expired lease still backs off, by half a lease at most.
        assert_eq!(renew_delay(S(20), 3, None, 1.0), S(10));
        assert_eq!(renew_delay(S(20), 3, Some(Duration::ZERO), 1.0), S(10));
    }

    #[test]
    fn jitter_scales_by_ten_percent_either_way() {
        assert_eq!(
            renew_delay(S(20), 0, Some(S(20)), 0.9),
            Duration::from_millis(4500)
        );
        assert_eq!(
            renew_delay(S(20), 0, Some(S(20)), 1.1),
            Duration::from_millis(5500)
        );
        assert_eq!(
            renew_delay(S(20), 0, Some(S(20)), 5.0),
            Duration::from_millis(5500)
        );
        for _ in 0..100 {
            let j = jitter();
            assert!((0.9..=1.1).contains(&j));
        }
    }
}
