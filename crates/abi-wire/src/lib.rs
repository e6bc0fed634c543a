//! The wire contract, once: names and defaults that every abi crate (the
//! services, the SDK, `abictl`, the benchmarks and the tests) shares, so none
//! of them spells one on its own.
//!
//! Today it holds how a process names its NATS servers ([`nats`]); the
//! subject, bucket and error-code builders of each surface move here as the
//! surfaces land.

pub mod nats;

pub use nats::{DEFAULT_NATS_URL, ServerList, ServerListError};
