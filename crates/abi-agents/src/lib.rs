//! Agents: serving them (the agent host) and calling them, wire-compatible with the
//! reference's `agent_host.py` and `agent.py`.
//!
//! Serve with an [`AgentHost`] given to [`abi_sdk_core::ModuleSpec::serve`]; call
//! with [`AgentsExt::agent_client`], which gives an [`AgentClient`].

mod client;
mod handler;
pub mod host;
mod record;

pub use client::{
    AgentClient, AgentError, AgentErrorKind, AgentsExt, Invocation, InvocationEvent,
    InvocationStatus, SubmitOptions,
};
pub use handler::{
    AgentEvent, AgentHandler, AgentSpec, EventStream, HandlerError, InvocationContext,
    InvokeFuture, invoke_fn,
};
pub use host::{AgentHost, AgentHostError, AgentHostOptions, AgentRetention, BoundAgentHost};
