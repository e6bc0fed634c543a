//! `abi-jobs`: jobs over JetStream for modules built on `abi-sdk-core`.
//! Jobs: declaring them, serving them, triggering a job of any module and
//! following its runs.
//!
//! The host side: declarations ([`JobSpec`], [`Trigger`]), handlers
//! ([`JobContext`], [`JobError`]) and the host that runs them ([`JobHost`]),
//! sharing consumers and run records with the reference's `JobHost`.
//!
//! The caller side ([`JobClient`], [`JobRun`], [`RunRecord`]) speaks the
//! reference's wire: the same trigger messages, run ids, run records and
//! completion notices, so it works against Python and Rust hosts alike.

pub mod claim_check;
pub mod client;
mod context;
mod control;
pub mod host;
pub mod record;
pub use client::run;
pub mod time;

/// Declarations live in the core (a module's descriptor carries them, so a
/// module that serves no jobs still checks them); re-exported here.
pub use abi_sdk_core::job_spec::{
    JOB_CONTRACT_MAJOR, JobSpec, JobSpecError, MAX_ATTEMPTS, MAX_CONCURRENCY, MAX_DESCRIPTOR_BYTES,
    MAX_SCHEMA_BYTES, MAX_TRIGGER_INPUT_BYTES, Trigger, go_duration_seconds,
};
pub use context::{
    JobContext, JobError, JobErrorKind, JobHandler, JobResult, MAX_LOG_LINE_CHARS, MAX_LOG_LINES,
    RunHost, StopReason,
};
pub use host::{BoundJobHost, JobHost, JobHostLinks, JobHostOptions, JobRetention};

pub use client::{DEFAULT_TRIGGER_TIMEOUT, JobClient, TriggerError, TriggerErrorKind};
pub use control::{ControlError, ControlErrorKind};
pub use record::{QUEUED, RunRecord};
pub use run::{
    CancelError, CancelErrorKind, DEFAULT_WAIT_POLL_INTERVAL, JobRun, WaitError, WaitErrorKind,
};
