//! The document service `abi.svc.document.v1`: storage behind the
//! [`abi_document_model::DocumentStore`] port.
//!
//! * [`codec`]: the reference's stored JSON, equality and sort keys, exact
//!   numeric comparison and cursors, byte for byte.
//! * [`sql`]: the reference's SQL compiler, one implementation for SQLite
//!   and PostgreSQL.
//! * [`store`]: the adapters (SQLite here; PostgreSQL beside it).
//! * [`service`]: the NATS micro service `document` over a store
//!   ([`service::Handler`] is free of NATS); [`config`]: the binary's settings.

pub mod codec;
pub mod config;
pub mod run;
pub mod service;
pub mod sql;
pub mod store;
