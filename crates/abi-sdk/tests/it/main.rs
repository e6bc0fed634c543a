//! The integration tests of `abi-sdk`, in one binary (one link on a 2-core
//! machine instead of one per file). `common` scripts a discovery service on
//! a real nats-server for the client and session tests.

mod common;

mod client_fake;
mod session_fake;
mod watch_kv;
