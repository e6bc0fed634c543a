//! Storage adapters implementing [`abi_document_model::DocumentStore`].

pub mod postgres;
pub mod sqlite;

pub use sqlite::{SqliteConfig, SqliteStore};
