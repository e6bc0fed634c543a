//! The integration tests of `abi-documents`: the store conformance suite on
//! SQLite files, the SQLite adapter's own guarantees (concurrency,
//! durability), and the codec against values the reference computed.

// Tests fail loudly on purpose: an unexpected error is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod codec_reference;
mod common;
pub mod conformance;
mod differential;
mod nats_service;
mod overflow;
mod postgres;
mod process;
mod put_decided;
mod put_many;
mod sqlite;
mod sync_call;
