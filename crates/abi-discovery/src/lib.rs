//! The discovery service: serves `abi.discovery.v1` over NATS request-reply and
//! keeps the registry as one compare-and-swap-protected protobuf snapshot in a
//! JetStream KV bucket. The rules themselves live in `abi-registry`; every
//! subject, queue group and bucket name comes from `abi_wire::discovery`.
//!
//! Code map, leaves first (no module uses one listed after it):
//! - `clock`, `error` (the core's [`DiscoveryError`]), `telemetry`
//!   (counters and histograms), `store` (the snapshot port, its JetStream and
//!   in-memory adapters, the cache and decoding);
//! - `writer` (the group-commit writer task), `discovery` (the core the
//!   endpoints call: lookups, and mutations through the writer);
//! - `config`, `endpoints` (NATS request handling), `service` (the core
//!   assembled: [`ServiceCore::start`]);
//! - `micro` (the NATS micro-service endpoints) and `metrics` (Prometheus text
//!   on `ABI_METRICS_ADDR`), which only read the others;
//! - `shutdown`, `run` (wiring it all together for the binary).
//!
//! **API boundary:** what embedders use is public: the service core
//! ([`ServiceCore`], [`Discovery`]), the request [`Handler`](endpoints::Handler)
//! and its port, the store port and adapters, the clock, the config and `run`
//! for the binary and the tests that run it in process. The writer, the
//! metrics and micro-service responders, and the counters are internal.

pub mod clock;
pub mod config;
pub mod discovery;
pub mod endpoints;
pub mod error;
pub(crate) mod metrics;
pub(crate) mod micro;
pub mod platform;
pub mod run;
pub mod service;
/// The signal watcher, shared with the other service binaries.
pub use abi_process::shutdown;
pub mod store;
pub(crate) mod telemetry;
pub(crate) mod writer;

pub use discovery::{Discovery, DiscoveryConfig};
pub use error::DiscoveryError;
/// The name this service answers `$SRV` requests with.
pub use micro::SERVICE_NAME;
pub use service::{HandlerConfig, ServiceCore};
