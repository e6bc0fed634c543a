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

    pub(super) fn add(&self, run_id: &str) -> Control {
        let control = Control::default();
        self.lock().insert(run_id.to_owned(), control.clone());
        control
    }

    pub(super) fn remove(&self, run_id: &str) {
        self.lock().remove(run_id);
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
