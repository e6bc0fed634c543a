//! The discovery service: serves `abi.discovery.v1` over NATS request-reply and
//! keeps the registry as one compare-and-swap-protected protobuf snapshot in a
//! JetStream KV bucket. The rules themselves live in `abi-registry`.
//!
//! Code map: `store` (the snapshot port and its JetStream and in-memory
//! adapters), `writer` (the group-commit writer task), `discovery` (the
//! facade the endpoints call), `clock`, `config`, `subjects`, `endpoints`
//! (NATS request handling), `micro` (the NATS micro-service endpoints),
//! `metrics` (Prometheus text on `ABI_METRICS_ADDR`),
//! `shutdown`, `run` (wiring it all together for the binary).

pub mod clock;
pub mod config;
pub mod discovery;
pub mod endpoints;
pub mod error;
pub mod metrics;
pub mod micro;
pub mod run;
pub mod shutdown;
pub mod store;
pub mod subjects;
pub(crate) mod telemetry;
pub mod writer;
