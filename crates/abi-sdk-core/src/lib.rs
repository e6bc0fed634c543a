//! What a module embeds to take part in discovery: a [`DiscoveryClient`],
//! [`ModuleProxy`]s for the modules it depends on, a lease [`Session`], and a
//! [`Runner`] that calls the module's hooks in the reference's order, gates
//! job hosts during rollouts, serves health probes and drains on SIGTERM.
//!
//! A module is a small struct and one call:
//!
//! ```no_run
//! use abi_sdk_core::prelude::*;
//!
//! struct Greeter;
//!
//! impl Module for Greeter {
//!     async fn on_initialized(&self, cx: &Context) -> HookResult {
//!         let store = cx.modules().get("store")?;
//!         println!("store has {} ready instances", store.ready_instances().await?.len());
//!         Ok(())
//!     }
//! }
//!
//! # async fn main_() -> Result<(), abi_sdk_core::RunError> {
//! run_module(ModuleSpec::new("greeter").dependency("store", 1), Greeter).await
//! # }
//! ```
//!
//! What a module serves is declared by hosts given to
//! [`ModuleSpec::serve`]. The hosts live in their own crates, built on the
//! host kit here ([`host`]): `abi-jobs` (jobs over JetStream, gated in a
//! rollout), `abi-agents` and `abi-models`; the `abi-sdk` facade re-exports
//! this crate and them (each behind a default feature), so a module that
//! serves none of them depends on this crate alone. The runner binds each
//! host to the module's [`Links`] once the instance registered
//! ([`ServedHost::bind`]: a running host never exists unbound), starts,
//! drains and closes them ([`Host`]). Callers: [`DiscoveryClient`],
//! [`ModuleProxy`], [`DocumentClient`]; job declarations ([`job_spec`]) are
//! here too, since a module's descriptor carries them.
//!
//! Configuration comes from the environment as the reference reads it
//! ([`Config::from_env`]): `NATS_URL`, `ABI_PROJECT`, `ABI_MODULE_KEY` or
//! `ABI_SERVICE_TOKEN`, `ABI_ROLLOUT_ID`, `ABI_ROLLOUT_MODULES`,
//! `ABI_HEALTH_PORT`, `ABI_HEALTH_HOST`; every value can be set in code.
//!
//! Beyond the reference, readiness reacts to registry events ([`watch`]):
//! a dependency turning READY wakes its dependents at once, with the 2 s
//! poll kept as the fallback. And a module can run against an in-process
//! service instead of NATS ([`local`], [`Runner::local`]): the `abi-testkit`
//! crate uses that for fast tests of module code.

#![warn(missing_docs)]

mod client;
mod config;
pub mod documents;
mod error;
mod health;
pub mod host;
pub mod ids;
pub mod instance_call;
pub mod job_spec;
pub mod local;
pub mod routes;
mod runner;
mod schedule;
mod session;
mod shutdown;
mod status;
mod subjects;
mod token;
mod transport;
pub mod watch;

/// Trace context and spans (`abi_process::traces`), for the host crates.
pub use abi_process::traces;
pub use client::proxy::{Found, ModuleProxy, Modules};
pub use client::{AgentMatch, DEFAULT_REQUEST_TIMEOUT, DiscoveryClient, MAX_PAGE, Page};
pub use config::{
    Config, ConfigError, ConfigErrorKind, DEFAULT_DRAIN_TIMEOUT, DEFAULT_HEALTH_HOST,
    DEFAULT_NATS_URL, DEFAULT_PROJECT, DEFAULT_REFRESH_INTERVAL, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_STARTUP_TIMEOUT, DiscoveryConfig,
};
pub use documents::DocumentClient;
pub use error::{BoxError, CallError, CallErrorKind, Error};
pub use host::{Host, Links, MissingLink, ServedHost};
pub use local::{LocalDiscovery, LocalError, LocalSnapshot};
pub use runner::{
    Context, HookResult, MODULE_INBOX_PREFIX, Module, ModuleSpec, RunError, RunErrorKind, Runner,
    WorkGuard, run_module,
};
pub use session::{
    DEFAULT_HEALTH_SUMMARY_INTERVAL, Rollout, Session, SessionError, SessionErrorKind,
    SessionHandle,
};
pub use status::Status;
pub use token::{BoundSigner, TokenSource};
pub use watch::{RegistryEvent, RegistryWatch, WatchOptions};

/// What most modules need, in one import: `use abi_sdk_core::prelude::*;`. It
/// brings the module's declaration and hooks, the three hosts and their
/// specs, and the extension traits that give a [`ModuleProxy`] its
/// `agent_client` and `chat_model`.
pub mod prelude {
    pub use crate::{Context, HookResult, Module, ModuleSpec, Runner, run_module};
}

/// The generated wire types of `abi.discovery.v1`.
pub use abi_proto::discovery::v1 as pb;
