//! `abi-workflows`: durable multi-step work for a module, wire-compatible
//! with the reference's `naas_abi_sdk.workflows`. A workflow is a job of kind
//! `workflow` (`abi_wire::workflows::KIND`) whose steps are journaled, so a
//! retried or resumed run returns a finished step's stored result instead of
//! running it again.
//!
//! This crate holds the journal's decisions, pure and table-tested, and
//! differential-tested against the reference's `StepJournal`:
//! - [`journal`]: what a step's start, local retry, child run and end write
//!   ([`Journal`]), which stored documents belong to a trigger, the timeline
//!   `steps` shows;
//! - [`result`]: a step result's JSON and its limit ([`encode_result`]);
//! - [`store`]: the journal's reads and compare-and-swap writes ([`StepStore`]);
//! - [`flow`]: [`FlowContext::step`], a step run once per run, with local
//!   retries, cancellation and replay, and [`FlowContext::map`], a step per
//!   item (`key[i]`), `concurrency` at a time, order kept;
//! - [`call`]: [`FlowContext::call`] and [`FlowContext::map_call`], another
//!   module's workflow as a child run journaled before the wait;
//! - [`children`]: what an attempt's end does to the children it waits for;
//! - [`handler`]: [`workflow_fn`], a workflow function as its job's handler
//!   (declare the job with `JobSpec::as_workflow`);
//! - [`schema`]: input and output checked against the declared JSON Schemas,
//!   [`TypedWorkflow::typed`] deriving them from the Rust types;
//! - [`client`]: [`WorkflowClient`] and [`WorkflowRun`], the caller side.
//!
//! Step keys, collections and ids are in `abi_wire::workflows`.

pub mod call;
pub mod children;
pub mod client;
mod fan_out;
pub mod flow;
pub mod handler;
pub mod journal;
pub mod result;
pub mod schema;
pub mod store;

pub use call::encode_input;
pub use children::AttemptEnd;
pub use client::{WorkflowCallError, WorkflowClient, WorkflowRun};
pub use flow::{FlowContext, FlowError, StepOptions};
pub use handler::workflow_fn;
pub use journal::{Child, Finish, Journal};
pub use result::{StepResultError, encode_result};
pub use schema::TypedWorkflow;
pub use store::{StepStore, read_steps};
