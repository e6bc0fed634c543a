//! The reference's shared SQL compiler (`document_sql.py`) for both
//! dialects: the same SQL text for the same inputs, values always bound.
//!
//! Field names must appear as literals in the SQL text (expression indexes
//! only match queries whose expressions are textually equal). Those
//! literals are never escaped here: each backend quotes them with its own
//! database's rules through [`QuoteLiteral`].

mod expr;
mod find;
mod index;
mod params;
mod spec;
mod statements;

pub use expr::SortParts;
pub use find::{DOCUMENT_OVERHEAD, FindPlan, within_budget};
pub use index::IndexKey;
pub use params::{Params, SqlParam, Statement};
pub use spec::{merge_spec, parse_spec, spec_json};
pub use statements::{
    CatalogLock, DOCUMENT_COLUMNS, PutRow, PutShape, PutSlot, PutTemplate, PutValue,
};

use abi_document_model::DocumentError;

/// The database the SQL is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite with the JSON1 functions and this crate's custom functions.
    Sqlite,
    /// PostgreSQL with JSONB.
    Postgres,
}

/// Turns a string into a SQL string literal of the backend's dialect.
///
/// SQLite's adapter asks SQLite (`SELECT quote(?1)`); PostgreSQL's uses
/// `postgres_protocol::escape::escape_literal`.
pub trait QuoteLiteral: Send + Sync {
    /// The literal for `value` (which holds no NUL).
    ///
    /// # Errors
    ///
    /// When the backend cannot produce one.
    fn quote_literal(&self, value: &str) -> Result<String, DocumentError>;
}

/// Compiles statements for one backend: its dialect, its literal quoting and
/// its table names (already quoted/qualified as the backend needs them).
pub struct Compiler<'a> {
    dialect: Dialect,
    quote: &'a dyn QuoteLiteral,
    documents: &'a str,
    collections: &'a str,
}

impl std::fmt::Debug for Compiler<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiler")
            .field("dialect", &self.dialect)
            .field("documents", &self.documents)
            .field("collections", &self.collections)
            .finish_non_exhaustive()
    }
}

impl<'a> Compiler<'a> {
    /// A compiler for `dialect`, quoting with `quote`, over the tables
    /// `documents` and `collections`.
    pub fn new(
        dialect: Dialect,
        quote: &'a dyn QuoteLiteral,
        documents: &'a str,
        collections: &'a str,
    ) -> Self {
        Self {
            dialect,
            quote,
            documents,
            collections,
        }
    }

    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// A fresh parameter list for one statement of this dialect.
    pub fn params(&self) -> Params {
        Params::new(self.dialect)
    }

    fn pg(&self) -> bool {
        self.dialect == Dialect::Postgres
    }

    /// A string literal for `value`, from the backend.
    ///
    /// # Errors
    ///
    /// When the backend's quoting fails.
    pub fn literal(&self, value: &str) -> Result<String, DocumentError> {
        self.quote.quote_literal(value)
    }
}
