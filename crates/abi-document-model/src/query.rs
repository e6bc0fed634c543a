//! Documents as stored, and the queries that find them.

use crate::{Data, Datetime, Value};

/// A stored document: its data and what the service keeps about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// The document's id, unique in its collection.
    pub id: String,
    /// Its fields.
    pub data: Data,
    /// When it was first written (a replacing put keeps it).
    pub created_at: Datetime,
    /// When it was last written.
    pub updated_at: Datetime,
    /// 1 when created, plus one per write.
    pub version: i64,
}

/// One condition of a query: `field operator value`. Conditions are ANDed.
///
/// The operator is kept as sent (`eq`, `ne`, `lt`, `lte`, `gt`, `gte`, `in`,
/// `nin`, `contains`, `exists`), so a bad one is refused in the reference's
/// order of checks ([`crate::validate::validate_query`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    /// A top-level field name.
    pub field: String,
    /// The operator's name.
    pub operator: String,
    /// The operand (a list for `in`/`nin`, a bool for `exists`).
    pub value: Value,
}

impl Predicate {
    /// `field operator value`.
    pub fn new(
        field: impl Into<String>,
        operator: impl Into<String>,
        value: impl Into<Value>,
    ) -> Self {
        Self {
            field: field.into(),
            operator: operator.into(),
            value: value.into(),
        }
    }

    /// `field eq value`.
    pub fn eq(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(field, EQ, value)
    }

    /// `field in values` (at most [`crate::validate::MAX_IN_VALUES`]).
    pub fn is_in(field: impl Into<String>, values: Vec<Value>) -> Self {
        Self::new(field, IN, Value::List(values))
    }
}

/// The operator `eq`.
pub const EQ: &str = "eq";
/// The operator `in`.
pub const IN: &str = "in";

/// The order of a query's results: one field, `asc` or `desc` (then by id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderBy {
    /// The field to order by.
    pub field: String,
    /// `asc` or `desc`, kept as sent.
    pub direction: String,
}

impl OrderBy {
    /// Ascending by `field`.
    pub fn asc(field: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            direction: "asc".to_owned(),
        }
    }

    /// Descending by `field`.
    pub fn desc(field: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            direction: "desc".to_owned(),
        }
    }
}

/// What `find` is asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct FindQuery {
    /// Conditions, ANDed.
    pub where_: Vec<Predicate>,
    /// The order (by id when none).
    pub order_by: Option<OrderBy>,
    /// At most this many items (1 to [`crate::validate::MAX_PAGE_SIZE`]).
    pub limit: i64,
    /// Where the previous page ended.
    pub cursor: Option<String>,
    /// Stop a page before the item that would take its estimated size past this.
    pub max_bytes: Option<i64>,
}

impl Default for FindQuery {
    fn default() -> Self {
        Self {
            where_: Vec::new(),
            order_by: None,
            limit: DEFAULT_FIND_LIMIT,
            cursor: None,
            max_bytes: None,
        }
    }
}

/// The page size of a `find` that names none (the reference's).
pub const DEFAULT_FIND_LIMIT: i64 = 100;

/// One page of `find`. Only `cursor == None` means the end: a page cut by
/// `max_bytes` may be short and still have a next page.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page {
    /// The documents, in the query's order.
    pub items: Vec<Document>,
    /// The cursor of the next page, if there is one.
    pub cursor: Option<String>,
}
