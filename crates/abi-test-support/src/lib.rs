//! Test support for the workspace: real `nats-server` processes and small
//! helpers for bounded waiting.
//!
//! - [`NatsServer::start`]: one JetStream server on a free loopback port with
//!   its own temporary store directory, killed on `Drop`. [`NatsServer::restart`]
//!   brings it back on the same port with the same store (a crash and
//!   recovery).
//! - [`NatsCluster::start`]: an N-node JetStream cluster on loopback, ready
//!   once every node is current with the meta leader; nodes can be stopped and
//!   started again.
//! - [`stream_leader`]: which node leads a stream (to kill it).
//! - [`wait_until`]: poll an async condition until it holds or a deadline
//!   passes (the replacement for "sleep a bit").
//! - [`unique_name`]: a name no other test in this process (or a concurrent
//!   one) uses, for buckets and projects.
//! - [`python`], [`workspace_root`]: the Python that imports the reference
//!   (`$ABI_PYTHON`, else `<workspace>/.venv/bin/python`) and the workspace.
//! - [`ReferenceOwner`], [`reference_dump`], [`spawn_until_ready`]: the Python
//!   reference discovery service as a child process.
//! - [`requests`]: tokens (service, module, bound) and the requests tests send.
//! - [`WireClient`]: raw discovery requests over NATS (token header, deadline,
//!   decoded reply).
//! - [`stored_snapshot`]: a project's registry snapshot read from its KV key.
//!
//! The `nats-server` binary is found through `ABI_NATS_SERVER`, then `PATH`,
//! then `<workspace>/.venv/bin/nats-server`. When none exists the helpers
//! panic with a message saying to run `./scripts/setup.sh`: tests never skip.
//!
//! Everything here panics on failure, with a message: that is how a test
//! fails.
//!
//! Use it from another crate's tests with a path dev-dependency:
//!
//! ```toml
//! [dev-dependencies]
//! abi-test-support = { path = "../abi-test-support" }
//! ```
//!
//! Servers are real processes with real time: start them in ordinary
//! `#[tokio::test]`s (a paused tokio clock does not speed them up). Give each
//! test its own server (cheap: ~50 ms) or at least its own bucket and project
//! via [`unique_name`], so tests run in parallel.

// This crate only runs inside tests, where a panic with a clear message is
// the failure report.
#![allow(clippy::expect_used, clippy::unwrap_used)]
#![warn(missing_docs)]

mod binary;
mod cluster;
pub mod http;
mod leader;
pub mod postgres;
mod process;
mod python;
mod reference;
pub mod requests;
mod server;
mod snapshot;
mod wait;
mod wire_client;

pub use binary::{nats_server_binary, workspace_binary};
pub use cluster::NatsCluster;
pub use leader::{stream_leader, wait_for_stream_leader};
pub use python::{PYTHON_ENV, python, workspace_root};
pub use reference::{
    REFERENCE_START_TIMEOUT, ReferenceOwner, SpawnError, reference_dump, reference_owner_script,
    serve_command, spawn_until_ready,
};
pub use server::NatsServer;
pub use snapshot::{SnapshotReadError, stored_snapshot};
pub use wait::{WaitTimedOut, unique_name, wait_until};
pub use wire_client::{DEFAULT_CALL_TIMEOUT, WireCallError, WireClient, auth_headers};
