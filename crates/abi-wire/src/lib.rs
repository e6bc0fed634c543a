//! The wire contract, once: every name, code, cap and default that the
//! services, the SDK, `abictl`, the benchmarks and the tests share, so none
//! of them spells one on its own.
//!
//! - [`discovery`]: `abi.discovery.v1` subjects, queue group, registry bucket
//!   and key, caps and the reference's defaults;
//! - [`documents`]: `abi.svc.document.v1` subjects, the reply's error-code
//!   header, the page share of the payload limit;
//! - [`jobs`]: the jobs stream, trigger/schedule/cancel/notice subjects,
//!   consumers, run ids and record collections (hashed names as the reference's);
//! - [`codes`]: the wire error codes ([`ErrorCode`]);
//! - [`status`]: the instance status names; [`jobs::RunStatus`] and
//!   [`agents::RunStatus`] the run statuses, [`jobs::Ack`] a delivery's answer;
//! - [`names`]: the identifier patterns (module, instance, rollout, app);
//! - [`auth`]: the token header;
//! - [`nats`]: how a process names its NATS servers ([`ServerList`]);
//! - [`rpc`]: each request type bound to its operation and response ([`rpc::Rpc`]);
//! - [`apps`]: web apps over NATS: the instance subject and the reference's
//!   limits;
//! - [`overflow`]: RPC overflow's subjects, headers and limits (payloads above
//!   the broker's max payload);
//! - [`workflows`]: the step journal's collections, ids, fields, limits and key check.
//!
//! The subjects of agents and models come here as those surfaces land.

pub mod agents;
pub mod apps;
pub mod auth;
pub mod codes;
pub mod discovery;
pub mod documents;
pub mod jobs;
pub mod models;
pub mod names;
pub mod nats;
pub mod overflow;
pub mod rpc;
pub mod run_status;
pub mod status;
pub mod trace;
pub mod workflows;

pub use auth::AUTH_HEADER;
pub use codes::ErrorCode;
pub use nats::{DEFAULT_NATS_URL, ServerList, ServerListError};
