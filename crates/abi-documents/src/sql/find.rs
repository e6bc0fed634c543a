//! `find`: the query, its paging by count and by bytes, and its cursor.

use abi_document_model::validate::{validate_max_bytes, validate_query};
use abi_document_model::{Document, DocumentError, FindQuery, OrderBy, Page};

use super::Compiler;
use super::params::{SqlParam, Statement};
use super::statements::DOCUMENT_COLUMNS;
use crate::codec::{fingerprint, next_cursor, read_cursor};

/// What a document weighs beyond its stored JSON in a page's byte budget:
/// its id, timestamps and version on the wire.
pub const DOCUMENT_OVERHEAD: i64 = 64;

/// A compiled `find`: run [`FindPlan::rows`] (no byte budget), or
/// [`FindPlan::sizes`], [`within_budget`] and [`FindPlan::by_ids`]; then
/// [`FindPlan::page`] makes the page and its cursor.
#[derive(Debug, Clone)]
pub struct FindPlan {
    namespace: String,
    collection: String,
    query: FindQuery,
    fingerprint: Option<String>,
    /// The matching documents in order, at most `limit + 1` rows of
    /// [`DOCUMENT_COLUMNS`].
    pub rows: Statement,
    /// The same rows as `(id, stored size)`.
    pub sizes: Statement,
}

impl FindPlan {
    /// The page size asked for.
    pub fn limit(&self) -> i64 {
        self.query.limit
    }

    /// The byte budget asked for.
    pub fn max_bytes(&self) -> Option<i64> {
        self.query.max_bytes
    }

    /// The page of `items`; `more` says whether a next page exists, which
    /// then gets a cursor resuming after the last item.
    pub fn page(&self, items: Vec<Document>, more: bool) -> Page {
        let cursor = match (more, items.last()) {
            (true, Some(last)) => {
                let fp = self.fingerprint.clone().unwrap_or_else(|| {
                    fingerprint(
                        &self.namespace,
                        &self.collection,
                        &self.query.where_,
                        self.query.order_by.as_ref(),
                    )
                });
                Some(next_cursor(&fp, self.query.order_by.as_ref(), last))
            }
            _ => None,
        };
        Page { items, cursor }
    }
}

/// The ids a page keeps from `(id, stored size)` rows in order: at most
/// `limit`, and with `max_bytes`, none past the budget except a first item
/// larger than it. The flag says whether a next page exists.
pub fn within_budget(sized: &[(String, i64)], limit: i64, max_bytes: i64) -> (Vec<String>, bool) {
    let mut kept: Vec<String> = Vec::new();
    let mut used = 0i64;
    for (id, length) in sized {
        // Python's len() of the id counts code points.
        let weight = length + id.chars().count() as i64 + DOCUMENT_OVERHEAD;
        if kept.len() as i64 == limit || (!kept.is_empty() && used + weight > max_bytes) {
            return (kept, true);
        }
        kept.push(id.clone());
        used += weight;
    }
    (kept, false)
}

impl Compiler<'_> {
    /// Compiles `query` on a collection, with the reference's checks in its
    /// order: the query, `max_bytes`, then the cursor.
    ///
    /// # Errors
    ///
    /// `INVALID_ARGUMENT` for a bad query or a cursor of another query.
    pub fn plan_find(
        &self,
        namespace: &str,
        collection: &str,
        query: FindQuery,
    ) -> Result<FindPlan, DocumentError> {
        validate_query(&query.where_, query.order_by.as_ref(), query.limit)?;
        validate_max_bytes(query.max_bytes)?;
        let mut p = self.params();
        let (a, b) = self.scope(namespace, collection, &mut p)?;
        let mut condition = self.predicates(&query.where_, &mut p)?;
        let order_by: Option<&OrderBy> = query.order_by.as_ref();
        let mut parts = match order_by {
            Some(order) => self.sort_parts(&order.field)?.to_vec(),
            None => Vec::new(),
        };
        parts.push(format!("id COLLATE {}", self.id_collation()));
        let descending = order_by.is_some_and(|o| o.direction == "desc");
        let fp = query
            .cursor
            .as_ref()
            .map(|_| fingerprint(namespace, collection, &query.where_, order_by));
        if let (Some(cursor), Some(fp)) = (&query.cursor, &fp) {
            let key = read_cursor(cursor, fp, order_by.is_some())?;
            let mut placeholders = Vec::new();
            if let Some((rank, number, text)) = key.sort {
                placeholders.push(p.bind(SqlParam::Int(rank)));
                let n = p.bind(SqlParam::Numeric(number));
                placeholders.push(if self.pg() {
                    format!("CAST({n} AS NUMERIC)")
                } else {
                    n
                });
                placeholders.push(p.bind(SqlParam::Text(text)));
            }
            placeholders.push(p.bind(SqlParam::Text(key.id)));
            condition.push_str(&format!(
                " AND ({}) {} ({})",
                parts.join(", "),
                if descending { "<" } else { ">" },
                placeholders.join(", ")
            ));
        }
        // SQLite plans a bound LIMIT with its value and prepares the
        // statement again whenever it is bound anew; the limit, a checked
        // integer, goes into SQLite's text instead (as do the namespace and
        // collection, see `scope`).
        let l = if self.pg() {
            p.bind(SqlParam::Int(query.limit + 1))
        } else {
            (query.limit + 1).to_string()
        };
        let direction = if descending { " DESC" } else { " ASC" };
        let ordering = parts
            .iter()
            .map(|part| format!("{part}{direction}"))
            .collect::<Vec<_>>()
            .join(", ");
        let tail = format!(
            "FROM {} WHERE namespace = {a} AND collection = {b} AND ({condition}) ORDER BY {ordering} LIMIT {l}",
            self.documents
        );
        let size = if self.pg() {
            "octet_length(data::text)"
        } else {
            "length(data)"
        };
        let params = p.into_values();
        Ok(FindPlan {
            namespace: namespace.to_owned(),
            collection: collection.to_owned(),
            rows: Statement {
                sql: format!("SELECT {DOCUMENT_COLUMNS} {tail}"),
                params: params.clone(),
            },
            sizes: Statement {
                sql: format!("SELECT id, {size} {tail}"),
                params,
            },
            query,
            fingerprint: fp,
        })
    }

    /// The documents of a collection with the given ids (in no order).
    pub fn by_ids(&self, namespace: &str, collection: &str, ids: &[String]) -> Statement {
        let mut p = self.params();
        let a = p.bind(SqlParam::Text(namespace.to_owned()));
        let b = p.bind(SqlParam::Text(collection.to_owned()));
        let placeholders: Vec<String> = ids
            .iter()
            .map(|id| p.bind(SqlParam::Text(id.clone())))
            .collect();
        Statement::new(
            format!(
                "SELECT {DOCUMENT_COLUMNS} FROM {} WHERE namespace = {a} AND collection = {b} AND id IN ({})",
                self.documents,
                placeholders.join(", ")
            ),
            p,
        )
    }
}
