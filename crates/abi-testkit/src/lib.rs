//! Fast tests of module code: run modules against a discovery service in
//! this process, with no NATS server.
//!
//! [`TestRegistry`] is the real service core of `abi-discovery` (the same
//! rules, token checks, request handling and group-commit writer) over the
//! in-memory store. Modules talk to it through the SDK's in-process transport
//! ([`abi_sdk::LocalDiscovery`]): their runner, lease session, dependency
//! wait, rollout gate and drain behave as over NATS, only in microseconds.
//!
//! ```
//! use abi_sdk::{Context, HookResult, Module, ModuleSpec, Status};
//! use abi_testkit::TestRegistry;
//!
//! struct Store;
//! impl Module for Store {}
//!
//! struct Greeter;
//! impl Module for Greeter {
//!     async fn on_initialized(&self, cx: &Context) -> HookResult {
//!         let store = cx.modules().get("store")?;
//!         assert!(!store.ready_instances().await?.is_empty());
//!         Ok(())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = TestRegistry::new();
//! // Started first, the dependent waits for its dependency to be READY.
//! let greeter = registry.start_module(ModuleSpec::new("greeter").dependency("store", 1), Greeter);
//! let store = registry.start_module(ModuleSpec::new("store"), Store);
//! registry.wait_for_status("greeter", Status::Ready).await?;
//!
//! greeter.stop().await?; // drains and unregisters, like SIGTERM
//! registry.wait_gone("greeter").await?;
//! store.stop().await?;
//! # Ok(())
//! # }
//! ```
//!
//! What it does not cover: the module's own NATS traffic
//! ([`abi_sdk::Context::nats`] is `None` here), the health probe unless
//! configured, and anything about the network (reconnects, the broker's
//! payload limit). Those stay for the end-to-end tests with a real server.

#![warn(missing_docs)]

mod registry;
mod running;
mod service;

pub use registry::{
    DEFAULT_LEASE_SECONDS, DEFAULT_REFRESH, DEFAULT_REQUEST_TIMEOUT, DEFAULT_STARTUP_TIMEOUT,
    DEFAULT_WAIT, SetupError, TestRegistry, TestRegistryBuilder, WaitTimedOut,
};
pub use running::{Ended, RunningModule};
