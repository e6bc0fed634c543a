//! Bound parameters, and the placeholders that stand for them.

use super::Dialect;

/// One bound value, typed by what the SQL does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlParam {
    /// An integer.
    Int(i64),
    /// A text.
    Text(String),
    /// A JSON text the SQL casts to `JSONB` (text on SQLite).
    Json(String),
    /// A decimal text the SQL casts to `NUMERIC` on PostgreSQL, or compares
    /// with the `document_numeric` collation on SQLite.
    Numeric(String),
}

/// A statement's parameters in placeholder order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    dialect: Dialect,
    values: Vec<SqlParam>,
}

impl Params {
    /// No parameters yet.
    pub fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            values: Vec::new(),
        }
    }

    /// Binds `value` and returns its placeholder: `?` on SQLite (position
    /// decides), `$n` on PostgreSQL. Callers bind in the order the
    /// placeholders appear in the text.
    pub fn bind(&mut self, value: SqlParam) -> String {
        self.values.push(value);
        match self.dialect {
            Dialect::Sqlite => "?".to_owned(),
            Dialect::Postgres => format!("${}", self.values.len()),
        }
    }

    /// The values, in order.
    pub fn values(&self) -> &[SqlParam] {
        &self.values
    }

    /// The values, in order, owned.
    pub fn into_values(self) -> Vec<SqlParam> {
        self.values
    }

    /// How many values are bound.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no value is bound.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// SQL text with its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The SQL text.
    pub sql: String,
    /// The values its placeholders stand for.
    pub params: Vec<SqlParam>,
}

impl Statement {
    /// `sql` with `params`.
    pub fn new(sql: String, params: Params) -> Self {
        Self {
            sql,
            params: params.into_values(),
        }
    }
}
