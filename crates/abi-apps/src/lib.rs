//! Web apps over NATS, wire-compatible with the reference's `AppHost` and
//! `call_app` (`abi.app.v1`): a module serves an app's folder and any
//! `tower::Service` over `http` requests (an axum `Router` is one) on
//! `abi.mod.<project>.<instance>.app.<name>.http`, and callers reach it with
//! an `http` request, no HTTP server or port on the module's side.
//!
//! - [`AppHost`]: the host, on the host kit (start, drain, close with the
//!   module);
//! - [`AppSpec`]: an app's declaration, its folder (`apps/<name>/` with its
//!   `manifest.json`) and service;
//! - [`AppService`], [`AppCaller`]: the service and who called it;
//! - [`AppClient`] ([`AppsExt::web_app`]): the caller;
//! - [`decide`]: the checks before an app runs, pure, in the reference's
//!   order and words; [`files`]: which path names a file, its type and tag.

pub mod client;
pub mod decide;
pub mod files;
mod host;
mod service;
mod spec;
pub mod stream;
pub mod upload;

pub use client::{AppClient, AppsExt, DEFAULT_APP_TIMEOUT, RequestBody};
pub use host::{AppHost, DEFAULT_MAX_CONCURRENCY, DuplicateApp};
pub use service::{AppBody, AppCaller, AppService, ResponseBody};
pub use spec::{AppSpec, ReadError};
