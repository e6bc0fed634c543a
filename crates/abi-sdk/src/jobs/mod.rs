//! Jobs: triggering a job of any module and following its runs.
//!
//! The caller side ([`JobClient`], [`JobRun`], [`RunRecord`]) speaks the
//! reference's wire: the same trigger messages, run ids, run records and
//! completion notices, so it works against Python and Rust hosts alike.

pub mod client;
pub mod record;
pub mod run;

pub use client::{DEFAULT_TRIGGER_TIMEOUT, JobClient, TriggerError, TriggerErrorKind};
pub use record::{QUEUED, RunRecord};
pub use run::{
    CancelError, CancelErrorKind, DEFAULT_WAIT_POLL_INTERVAL, JobRun, WaitError, WaitErrorKind,
};
