//! The integration tests of `abi-discovery`, in one binary (one link on a
//! 2-core machine instead of one per file). Each module is one former test
//! file; `core_common` (the service core over a store, in process) and
//! `edges_common` (tokens, owners as processes, the Python reference) are
//! their shared fixtures. `cluster_owners` stays a binary of its own: its
//! leader-election timings are measured without other tests beside it.

mod core_common;
mod edges_common;

mod faults_cluster;
mod faults_restart;
mod fuzz_regression;
mod interop_reference;
mod metrics_http;
mod nats_drain;
mod nats_handler;
mod nats_ops;
mod platform_streams;
mod process_auth;
mod process_config;
mod process_owners;
mod process_shutdown;
mod store_conformance;
mod writer_batching;
mod writer_jetstream;
mod writer_two_owners;
