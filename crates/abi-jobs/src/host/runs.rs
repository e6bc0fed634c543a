//! The runs this host is running, by run id: where a cancel or a hand-back
//! reaches them.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

/// How one running run is stopped.
#[derive(Clone, Debug, Default)]
pub(super) struct Control {
    /// A caller cancelled it.
    pub(super) cancelled: CancellationToken,
    /// The host shuts down: hand it back.
    pub(super) handback: CancellationToken,
}

/// One attempt's hold on its run id in [`Runs`], released on drop.
#[derive(Debug)]
pub(super) struct Claim<'a> {
    runs: &'a Runs,
    run_id: String,
    /// How the attempt is stopped.
    pub(super) control: Control,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.runs.lock().remove(&self.run_id);
    }
}

#[derive(Debug, Default)]
pub(crate) struct Runs {
    running: Mutex<HashMap<String, Control>>,
}

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Control>> {
        // Plain data: a panic elsewhere leaves it usable.
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Claims `run_id` for one attempt on this host: `None` while another
    /// attempt of it runs here (two attempts of one run never share the
    /// entry). The entry leaves when the claim drops.
    pub(super) fn claim<'a>(&'a self, run_id: &str) -> Option<Claim<'a>> {
        let mut running = self.lock();
        if running.contains_key(run_id) {
            return None;
        }
        let control = Control::default();
        running.insert(run_id.to_owned(), control.clone());
        Some(Claim {
            runs: self,
            run_id: run_id.to_owned(),
            control,
        })
    }

    pub(super) fn contains(&self, run_id: &str) -> bool {
        self.lock().contains_key(run_id)
    }

    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// A cancel for `run_id`; whether it runs here.
    pub(super) fn cancel(&self, run_id: &str) -> bool {
        let running = self.lock();
        let Some(control) = running.get(run_id) else {
            return false;
        };
        control.cancelled.cancel();
        true
    }

    /// Asks every run to hand itself back; returns how many.
    pub(super) fn hand_back_all(&self) -> usize {
        let running = self.lock();
        for control in running.values() {
            control.handback.cancel();
        }
        running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_attempt_of_a_run_cannot_take_the_first_ones_entry() {
        let runs = Runs::default();
        let first = runs.claim("ingest:7");
        assert!(first.is_some());
        assert!(runs.claim("ingest:7").is_none(), "already running here");
        let other = runs.claim("ingest:8");
        assert!(other.is_some(), "another run is claimed on its own");
        assert_eq!(runs.len(), 2);
        // A cancel reaches the attempt that holds the entry.
        assert!(runs.cancel("ingest:7"));
        assert!(
            first
                .as_ref()
                .is_some_and(|c| c.control.cancelled.is_cancelled())
        );
        drop(first);
        assert!(!runs.contains("ingest:7"));
        assert!(
            runs.contains("ingest:8"),
            "dropping one claim leaves the others"
        );
        let again = runs.claim("ingest:7");
        assert!(again.is_some_and(|c| !c.control.cancelled.is_cancelled()));
    }
}
