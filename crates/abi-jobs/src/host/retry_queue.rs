//! [`RetryQueue`]: where a delivery leaves the retry it decided on (a run,
//! its stream sequence and the delay); the retry driver (`retry.rs`) takes
//! them from here and re-drives each after its delay. The queue keeps the
//! two apart: a delivery never calls the code that re-drives deliveries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::Job;

/// One retry to run after `delay`.
pub(super) struct Due {
    pub(super) job: Arc<Job>,
    pub(super) run_id: String,
    pub(super) sequence: u64,
    pub(super) delay: Duration,
}

/// The host's retries, from the deliveries to the retry driver.
pub(crate) struct RetryQueue {
    sender: mpsc::UnboundedSender<Due>,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Due>>>,
}

impl RetryQueue {
    pub(super) fn new() -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        Self {
            sender,
            receiver: Mutex::new(Some(receiver)),
        }
    }

    /// Queues the next attempt of `run_id` after `delay`. Once the driver
    /// stopped (the host closes) the retry is dropped: the record says
    /// RETRYING with its `retry_at`, and any host's sweep takes it over.
    pub(super) fn schedule(&self, job: &Arc<Job>, run_id: &str, sequence: u64, delay: Duration) {
        let due = Due {
            job: job.clone(),
            run_id: run_id.to_owned(),
            sequence,
            delay,
        };
        let _ = self.sender.send(due);
    }

    /// The driver's end of the queue; `None` once taken.
    pub(super) fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<Due>> {
        // A poisoned lock only means a thread panicked holding it; the
        // receiver inside is still whole.
        self.receiver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}
