//! The documents of `abi.svc.document.v1`, as plain Rust values.
//!
//! Shared by the document service (`abi-documents`) and the SDK's client, so
//! both read and write one model: [`Value`] and [`Data`] (a document's
//! fields), [`Datetime`] (an aware instant with the reference's ISO 8601
//! forms), [`CollectionSpec`], [`Predicate`] and [`OrderBy`], [`Document`] and
//! [`Page`], the checks the reference makes on each ([`validate`]), the
//! errors with their wire codes ([`DocumentError`]), the protobuf form
//! ([`pb`]), and the storage port the service's adapters implement
//! ([`store::DocumentStore`]).
//!
//! **Architecture invariant:** pure data and pure functions: no I/O, no clock
//! other than [`Datetime::now`], no tokio.

pub mod datetime;
pub mod decode;
pub mod encode;
pub mod error;
pub mod pb;
pub mod query;
pub mod spec;
pub mod store;
pub mod validate;
pub mod value;

pub use datetime::Datetime;
pub use error::DocumentError;
pub use query::{Document, FindQuery, OrderBy, Page, Predicate};
pub use spec::{CollectionSpec, FieldSpec};
pub use store::{BatchFailure, Decided, DocumentStore, Write};
pub use value::{Data, Value};
