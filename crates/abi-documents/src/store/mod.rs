//! Storage adapters implementing [`abi_document_model::DocumentStore`].

pub mod postgres;
