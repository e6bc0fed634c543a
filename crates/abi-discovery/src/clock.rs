//! Wall-clock time behind a trait, so tests control it.

use std::sync::Mutex;

/// A source of the current time in seconds since the Unix epoch, as an `f64`
/// (what the rules and the reference use for leases).
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Seconds since the Unix epoch.
    fn now(&self) -> f64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        // A clock before 1970 is a misconfigured host; treat it as the epoch
        // rather than failing every request.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }
}

/// A clock that moves only when told to, for tests.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<f64>,
}

impl ManualClock {
    /// A clock showing `now`.
    pub fn new(now: f64) -> Self {
        Self {
            now: Mutex::new(now),
        }
    }

    /// Sets the time.
    pub fn set(&self, now: f64) {
        *self.lock() = now;
    }

    /// Moves the time forward by `seconds`.
    pub fn advance(&self, seconds: f64) {
        *self.lock() += seconds;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, f64> {
        // An f64 cannot be left half-written, so a poisoned lock is still usable.
        self.now.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> f64 {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(100.0);
        assert_eq!(clock.now(), 100.0);
        clock.advance(2.5);
        assert_eq!(clock.now(), 102.5);
        clock.set(7.0);
        assert_eq!(clock.now(), 7.0);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now() > 1_577_836_800.0);
    }
}
