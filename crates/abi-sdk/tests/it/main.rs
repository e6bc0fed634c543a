//! The integration tests of `abi-sdk`, in one binary (one link on a 2-core
//! machine instead of one per file). `common` scripts a discovery service on
//! the in-process transport for the client and session tests (paused clock);
//! `watch_kv` and the client's "no responders" test use real nats-servers.

mod common;

mod client_fake;
mod jobs_descriptor;
mod plain_module;
mod runner_fake;
mod session_fake;
mod watch_kv;
