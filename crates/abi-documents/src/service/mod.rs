//! The document service on NATS: [`handler`] (bytes in, reply bytes out,
//! no NATS), [`serve`] (the micro service and its endpoints), `outbox`
//! (replies a commit answers sent in one write), [`metrics`].

pub mod handler;
pub mod metrics;
mod outbox;
pub mod serve;

pub use handler::{Answer, Handler, HandlerConfig, Request};
pub use metrics::Metrics;
pub use serve::{ServeConfig, ServeError, serve};
