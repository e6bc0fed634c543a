//! What a module embeds to take part in discovery: a [`DiscoveryClient`],
//! [`ModuleProxy`]s for the modules it depends on, a lease [`Session`], and a
//! [`Runner`] that calls the module's hooks in the reference's order, gates
//! job hosts during rollouts, serves health probes and drains on SIGTERM.
//!
//! A module is a small struct and one call:
//!
//! ```no_run
//! use abi_sdk::prelude::*;
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
//! # async fn main_() -> Result<(), abi_sdk::RunError> {
//! run_module(ModuleSpec::new("greeter").dependency("store", 1), Greeter).await
//! # }
//! ```
//!
//! What a module serves is declared by hosts, each built from typed specs
//! and handlers and given to [`ModuleSpec::serve`]: [`jobs::JobHost`]
//! (jobs over JetStream, gated in a rollout), [`agents::AgentHost`] and
//! [`models::ModelHost`]. The runner binds each to the module's [`Links`]
//! once the instance registered ([`ServedHost::bind`]: a running host never
//! exists unbound), starts, drains and closes them ([`Host`]). Callers:
//! [`DiscoveryClient`], [`ModuleProxy`] (with [`agents::AgentsExt`] and
//! [`models::ModelsExt`]), [`jobs::JobClient`], [`DocumentClient`]. The
//! [`prelude`] imports the usual set.
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

pub mod agents;
mod client;
mod config;
pub mod documents;
mod error;
mod health;
mod host;
mod ids;
pub mod jobs;
pub mod local;
pub mod models;
mod runner;
mod schedule;
mod session;
mod shutdown;
mod status;
mod subjects;
mod token;
mod transport;
pub mod watch;

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
pub use jobs::{JobClient, JobRun, RunRecord};
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
pub use token::TokenSource;
pub use watch::{RegistryEvent, RegistryWatch, WatchOptions};

/// What most modules need, in one import: `use abi_sdk::prelude::*;`. It
/// brings the module's declaration and hooks, the three hosts and their
/// specs, and the extension traits that give a [`ModuleProxy`] its
/// `agent_client` and `chat_model`.
pub mod prelude {
    pub use crate::agents::{AgentHost, AgentSpec, AgentsExt as _, invoke_fn};
    pub use crate::jobs::{JobContext, JobError, JobHost, JobResult, JobSpec, Trigger};
    pub use crate::models::{ChatInput, ChatMessage, ChatModelSpec, ModelHost, ModelsExt as _};
    pub use crate::{Context, HookResult, Module, ModuleSpec, Runner, run_module};
}

/// The generated wire types of `abi.discovery.v1`.
pub use abi_proto::discovery::v1 as pb;
