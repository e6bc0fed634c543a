//! What a module embeds to take part in discovery: a [`DiscoveryClient`],
//! [`ModuleProxy`]s for the modules it depends on, a lease [`Session`], and a
//! [`Runner`] that calls the module's hooks in the reference's order, gates
//! job hosts during rollouts, serves health probes and drains on SIGTERM.
//!
//! A module is a small struct and one call:
//!
//! ```no_run
//! use abi_sdk::{Context, HookResult, Module, ModuleSpec, run_module};
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
mod proxy;
mod runner;
mod schedule;
mod session;
mod shutdown;
mod status;
mod subjects;
mod token;
mod transport;
pub mod watch;

pub use client::{AgentMatch, DEFAULT_REQUEST_TIMEOUT, DiscoveryClient, MAX_PAGE, Page};
pub use config::{
    Config, ConfigError, ConfigErrorKind, DEFAULT_DRAIN_TIMEOUT, DEFAULT_HEALTH_HOST,
    DEFAULT_NATS_URL, DEFAULT_PROJECT, DEFAULT_REFRESH_INTERVAL, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_STARTUP_TIMEOUT, DiscoveryConfig,
};
pub use documents::DocumentClient;
pub use error::{BoxError, CallError, CallErrorKind, Error};
pub use host::{Host, ServedHost};
pub use jobs::{JobClient, JobRun, RunRecord};
pub use local::{LocalDiscovery, LocalError, LocalSnapshot};
pub use proxy::{Found, ModuleProxy, Modules};
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

/// The generated wire types of `abi.discovery.v1`.
pub use abi_proto::discovery::v1 as pb;
