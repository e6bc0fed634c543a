//! The NATS edge of the service: one queue subscription per operation, each request
//! handled in its own task (bounded), answered with the protobuf response.
//!
//! - [`handle`]: one request to one reply, the reference's `_handle` rules;
//! - [`backend`]: the port the service core implements (and tests fake);
//! - [`serve`](mod@serve): subscriptions, concurrency, and the stop sequence;
//! - [`stats`]: per-endpoint counters for `$SRV.STATS`.

pub mod backend;
pub mod handle;
pub(crate) mod serve;
pub(crate) mod stats;

pub use backend::{Backend, Failure};
pub use handle::{Handler, MAX_PAYLOAD_CAP, Reply};
pub(crate) use serve::{Limits, serve};
pub(crate) use stats::Stats;
