//! The catalog and document statements.

use abi_document_model::{DocumentError, Predicate};

use super::Compiler;
use super::params::{Params, SqlParam, Statement};

/// The columns every document read returns, in this order.
pub const DOCUMENT_COLUMNS: &str = "id, data, created_at, updated_at, version";
/// What a put answers on SQLite besides its data: the row's stamps. SQLite
/// keeps the JSON text as given, so the data that comes back is the data
/// sent (in its stored form, `codec::as_stored`) and need not be read and
/// parsed again; PostgreSQL's JSONB may rewrite numbers, so a put there
/// returns [`DOCUMENT_COLUMNS`].
pub const PUT_STAMP_COLUMNS: &str = "created_at, updated_at, version";

/// The row lock a catalog read takes on PostgreSQL (SQLite has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogLock {
    /// `FOR SHARE`: reads and document writes.
    Share,
    /// `FOR UPDATE`: declaring or dropping the collection.
    Exclusive,
    /// No lock: a lookup outside a transaction (a single-document read,
    /// which needs no snapshot of the catalog beyond its own statement).
    None,
}

/// What a put writes: the document's address, its stored JSON text, the
/// write time and the expected version.
#[derive(Debug, Clone, Copy)]
pub struct PutRow<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// The collection.
    pub collection: &'a str,
    /// The document id.
    pub id: &'a str,
    /// The data as stored (`codec::dumps` of `codec::encode_data`).
    pub raw: &'a str,
    /// The write time, ISO with microseconds.
    pub now: &'a str,
    /// `None` upserts, `Some(0)` only inserts, `Some(n)` updates version `n`.
    pub if_version: Option<i64>,
}

impl<'a> PutRow<'a> {
    /// The value `slot` stands for in this row.
    pub fn value(&self, slot: PutSlot) -> PutValue<'a> {
        match slot {
            PutSlot::Namespace => PutValue::Text(self.namespace),
            PutSlot::Collection => PutValue::Text(self.collection),
            PutSlot::Id => PutValue::Text(self.id),
            PutSlot::Data => PutValue::Text(self.raw),
            PutSlot::Now => PutValue::Text(self.now),
            PutSlot::Version => PutValue::Int(self.if_version.unwrap_or_default()),
        }
    }
}

/// Which statement a put is, by its `if_version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutShape {
    /// `None` (or a negative version, which validation refuses first):
    /// insert, or update whatever version is there.
    Upsert,
    /// `Some(0)`: insert only.
    Create,
    /// `Some(n)`, `n > 0`: update version `n` only.
    Update,
}

impl PutShape {
    /// Every shape, in [`PutShape::index`] order.
    pub const ALL: [Self; 3] = [Self::Upsert, Self::Create, Self::Update];

    /// The shape of a put with `if_version`.
    pub fn of(if_version: Option<i64>) -> Self {
        match if_version {
            Some(0) => Self::Create,
            Some(version) if version > 0 => Self::Update,
            _ => Self::Upsert,
        }
    }

    /// This shape's place in [`PutShape::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What one placeholder of a put's text stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutSlot {
    /// [`PutRow::namespace`].
    Namespace,
    /// [`PutRow::collection`].
    Collection,
    /// [`PutRow::id`].
    Id,
    /// [`PutRow::raw`].
    Data,
    /// [`PutRow::now`].
    Now,
    /// [`PutRow::if_version`] (only bound when it is a version to match).
    Version,
}

/// A row's value for one [`PutSlot`], borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutValue<'a> {
    /// A text (the stored JSON is one too).
    Text(&'a str),
    /// An integer.
    Int(i64),
}

/// A put's SQL text for one shape of `if_version`, and its placeholders in
/// order ([`Compiler::put_template`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutTemplate {
    /// The SQL text.
    pub sql: String,
    /// What each placeholder stands for, in order.
    pub slots: Vec<PutSlot>,
}

/// What an insert does when the document exists: nothing for a create-only
/// put (`if_version` 0), else an upsert one version up.
fn on_conflict(shape: PutShape) -> &'static str {
    if shape == PutShape::Create {
        "DO NOTHING"
    } else {
        "DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at, version = current.version + 1"
    }
}

fn text(value: &str) -> SqlParam {
    SqlParam::Text(value.to_owned())
}

impl Compiler<'_> {
    /// The collection's catalog row (`spec`).
    pub fn select_spec(&self, namespace: &str, collection: &str, lock: CatalogLock) -> Statement {
        let mut p = self.params();
        let (a, b) = (p.bind(text(namespace)), p.bind(text(collection)));
        let lock = match (self.pg(), lock) {
            (false, _) => "",
            (true, CatalogLock::Share) => " FOR SHARE",
            (true, CatalogLock::Exclusive) => " FOR UPDATE",
            (true, CatalogLock::None) => "",
        };
        Statement::new(
            format!(
                "SELECT spec FROM {} WHERE namespace = {a} AND name = {b}{lock}",
                self.collections
            ),
            p,
        )
    }

    /// A catalog row for a new collection, unless there is one.
    pub fn insert_collection(&self, namespace: &str, name: &str, spec_json: &str) -> Statement {
        let mut p = self.params();
        let (a, b, c) = (
            p.bind(text(namespace)),
            p.bind(text(name)),
            p.bind(text(spec_json)),
        );
        Statement::new(
            format!(
                "INSERT INTO {} (namespace, name, spec) VALUES ({a}, {b}, {c}) ON CONFLICT (namespace, name) DO NOTHING",
                self.collections
            ),
            p,
        )
    }

    /// Replaces a collection's catalog spec.
    pub fn update_spec(&self, spec_json: &str, namespace: &str, name: &str) -> Statement {
        let mut p = self.params();
        let (a, b, c) = (
            p.bind(text(spec_json)),
            p.bind(text(namespace)),
            p.bind(text(name)),
        );
        Statement::new(
            format!(
                "UPDATE {} SET spec = {a} WHERE namespace = {b} AND name = {c}",
                self.collections
            ),
            p,
        )
    }

    /// Every `(id, data)` of a collection, for checking declared types.
    pub fn select_collection_data(&self, namespace: &str, collection: &str) -> Statement {
        let mut p = self.params();
        let (a, b) = (p.bind(text(namespace)), p.bind(text(collection)));
        Statement::new(
            format!(
                "SELECT id, data FROM {} WHERE namespace = {a} AND collection = {b}",
                self.documents
            ),
            p,
        )
    }

    /// Deletes every document of a collection.
    pub fn delete_collection_documents(&self, namespace: &str, collection: &str) -> Statement {
        let mut p = self.params();
        let (a, b) = (p.bind(text(namespace)), p.bind(text(collection)));
        Statement::new(
            format!(
                "DELETE FROM {} WHERE namespace = {a} AND collection = {b}",
                self.documents
            ),
            p,
        )
    }

    /// `DROP INDEX IF EXISTS` for one of a collection's indexes.
    pub fn drop_index(&self, name: &str) -> Statement {
        Statement::new(
            format!("DROP INDEX IF EXISTS {}", self.qualified_index_name(name)),
            self.params(),
        )
    }

    /// Deletes a collection's catalog row.
    pub fn delete_collection(&self, namespace: &str, collection: &str) -> Statement {
        let mut p = self.params();
        let (a, b) = (p.bind(text(namespace)), p.bind(text(collection)));
        Statement::new(
            format!(
                "DELETE FROM {} WHERE namespace = {a} AND name = {b}",
                self.collections
            ),
            p,
        )
    }

    /// The names of a namespace's collections (unsorted).
    pub fn select_collections(&self, namespace: &str) -> Statement {
        let mut p = self.params();
        let a = p.bind(text(namespace));
        Statement::new(
            format!(
                "SELECT name FROM {} WHERE namespace = {a}",
                self.collections
            ),
            p,
        )
    }

    /// Every namespace holding a collection (unsorted).
    pub fn select_namespaces(&self) -> Statement {
        Statement::new(
            format!("SELECT DISTINCT namespace FROM {}", self.collections),
            self.params(),
        )
    }

    /// Writes a document; no row written means a version conflict.
    /// `if_version`: `None` upserts, `Some(0)` only inserts, `Some(n)`
    /// updates version `n` only. On PostgreSQL it returns the written row's
    /// [`DOCUMENT_COLUMNS`]; on SQLite nothing, since SQLite runs `RETURNING`
    /// as a trigger, and a write with a trigger keeps a statement journal (a
    /// copy of every page it touches): the row count tells a conflict there,
    /// and [`Compiler::select_stamps`] reads the stamps when the write did
    /// not fix them.
    pub fn put(&self, row: &PutRow<'_>) -> Statement {
        self.put_bound(row, &mut Vec::new())
    }

    /// [`Compiler::put`]'s text for puts of `shape`, and what each
    /// placeholder stands for: a backend that keeps the text (it depends on
    /// the shape only) binds a row's values by reference with
    /// [`PutRow::value`], without building the text and its values again.
    pub fn put_template(&self, shape: PutShape) -> PutTemplate {
        let if_version = match shape {
            PutShape::Upsert => None,
            PutShape::Create => Some(0),
            PutShape::Update => Some(1),
        };
        let row = PutRow {
            namespace: "",
            collection: "",
            id: "",
            raw: "",
            now: "",
            if_version,
        };
        let mut slots = Vec::new();
        let sql = self.put_bound(&row, &mut slots).sql;
        PutTemplate { sql, slots }
    }

    /// [`Compiler::put`], noting in `slots` what each bound value is.
    fn put_bound(&self, row: &PutRow<'_>, slots: &mut Vec<PutSlot>) -> Statement {
        let mut p = self.params();
        let mut bind = |slot: PutSlot| {
            slots.push(slot);
            p.bind(match row.value(slot) {
                PutValue::Text(value) if slot == PutSlot::Data => SqlParam::Json(value.to_owned()),
                PutValue::Text(value) => text(value),
                PutValue::Int(value) => SqlParam::Int(value),
            })
        };
        let json = |placeholder: String| {
            if self.pg() {
                format!("CAST({placeholder} AS JSONB)")
            } else {
                placeholder
            }
        };
        let shape = PutShape::of(row.if_version);
        let mut sql = match shape {
            PutShape::Update => {
                let data = json(bind(PutSlot::Data));
                let (updated, a, b, c, v) = (
                    bind(PutSlot::Now),
                    bind(PutSlot::Namespace),
                    bind(PutSlot::Collection),
                    bind(PutSlot::Id),
                    bind(PutSlot::Version),
                );
                format!(
                    "UPDATE {} SET data = {data}, updated_at = {updated}, version = version + 1 WHERE namespace = {a} AND collection = {b} AND id = {c} AND version = {v}",
                    self.documents
                )
            }
            PutShape::Create | PutShape::Upsert => {
                let (a, b, c) = (
                    bind(PutSlot::Namespace),
                    bind(PutSlot::Collection),
                    bind(PutSlot::Id),
                );
                let data = json(bind(PutSlot::Data));
                let (created, updated) = (bind(PutSlot::Now), bind(PutSlot::Now));
                let conflict = on_conflict(shape);
                format!(
                    "INSERT INTO {} AS current (namespace, collection, id, data, created_at, updated_at, version) VALUES ({a}, {b}, {c}, {data}, {created}, {updated}, 1) ON CONFLICT (namespace, collection, id) {conflict}",
                    self.documents
                )
            }
        };
        if self.pg() {
            sql.push_str(" RETURNING ");
            sql.push_str(DOCUMENT_COLUMNS);
        }
        Statement::new(sql, p)
    }

    /// One document's [`PUT_STAMP_COLUMNS`] (what a put answers besides
    /// its data).
    pub fn select_stamps(&self, namespace: &str, collection: &str, id: &str) -> Statement {
        self.select_one(PUT_STAMP_COLUMNS, namespace, collection, id)
    }

    /// PostgreSQL's put in one statement (one round trip, its own
    /// transaction): the catalog row is read and share-locked as in a put's
    /// transaction, and the document is written only if the collection's
    /// spec is still `spec`, the one the data was checked against. Always one
    /// row: the catalog's spec (NULL when the collection does not exist),
    /// then [`DOCUMENT_COLUMNS`] of the written document (NULL when nothing
    /// was written: another spec, no collection, or a version conflict).
    pub fn put_if_spec(&self, row: &PutRow<'_>, spec: &str) -> Statement {
        let PutRow {
            namespace,
            collection,
            id,
            raw,
            now,
            if_version,
        } = *row;
        let mut p = self.params();
        let (a, b) = (p.bind(text(namespace)), p.bind(text(collection)));
        let catalog = format!(
            "SELECT spec FROM {} WHERE namespace = {a} AND name = {b} FOR SHARE",
            self.collections
        );
        let wanted = p.bind(text(spec));
        let data = format!("CAST({} AS JSONB)", p.bind(SqlParam::Json(raw.to_owned())));
        let now = format!("CAST({} AS TIMESTAMPTZ)", p.bind(text(now)));
        let (c, d, e) = (
            p.bind(text(namespace)),
            p.bind(text(collection)),
            p.bind(text(id)),
        );
        let write = match if_version {
            Some(version) if version > 0 => {
                let v = p.bind(SqlParam::Int(version));
                format!(
                    "UPDATE {} SET data = {data}, updated_at = {now}, version = version + 1 WHERE namespace = {c} AND collection = {d} AND id = {e} AND version = {v} AND EXISTS (SELECT 1 FROM catalog WHERE catalog.spec = {wanted})",
                    self.documents
                )
            }
            _ => {
                let conflict = on_conflict(PutShape::of(if_version));
                format!(
                    "INSERT INTO {} AS current (namespace, collection, id, data, created_at, updated_at, version) SELECT CAST({c} AS TEXT), CAST({d} AS TEXT), CAST({e} AS TEXT), {data}, {now}, {now}, 1 FROM catalog WHERE catalog.spec = {wanted} ON CONFLICT (namespace, collection, id) {conflict}",
                    self.documents
                )
            }
        };
        Statement::new(
            format!(
                "WITH catalog AS ({catalog}), written AS ({write} RETURNING {DOCUMENT_COLUMNS}) SELECT (SELECT spec FROM catalog), written.id, written.data, written.created_at, written.updated_at, written.version FROM (SELECT 1) AS one LEFT JOIN written ON TRUE"
            ),
            p,
        )
    }

    /// One document's row.
    pub fn get(&self, namespace: &str, collection: &str, id: &str) -> Statement {
        self.select_one(DOCUMENT_COLUMNS, namespace, collection, id)
    }

    /// A get in one statement, which reads one snapshot with no transaction
    /// around it: one row when the document exists, whether its collection
    /// is declared (1, or NULL) and then [`DOCUMENT_COLUMNS`]; no row when
    /// it does not ([`Compiler::declared`] then tells which answer). The
    /// placeholders are numbered, so the text does not depend on the values
    /// and can be kept: 1 is the namespace, 2 the collection, 3 the id.
    ///
    /// One table in `FROM`, matched on its whole primary key: SQLite then
    /// plans the lookup without weighing the collections' partial indexes.
    /// A join would weigh them against the bound namespace, and SQLite
    /// prepares such a statement again whenever that value is bound anew.
    pub fn get_with_catalog(&self) -> String {
        let (namespace, collection, id) = (self.numbered(1), self.numbered(2), self.numbered(3));
        format!(
            "SELECT ({}), {DOCUMENT_COLUMNS} FROM {} WHERE namespace = {namespace} AND collection = {collection} AND id = {id}",
            self.declared(),
            self.documents
        )
    }

    /// One row (1) when the collection is declared, none when not; numbered
    /// placeholders: 1 is the namespace, 2 the collection.
    pub fn declared(&self) -> String {
        format!(
            "SELECT 1 FROM {} WHERE namespace = {} AND name = {}",
            self.collections,
            self.numbered(1),
            self.numbered(2)
        )
    }

    /// The namespace and collection a query over a collection's documents
    /// filters on. SQLite gets them as literals in the text, as the
    /// collection's partial indexes name them (`WHERE namespace = '...' AND
    /// collection = '...'`): the indexes match when the statement is
    /// prepared, once. Bound, they make SQLite weigh the indexes against the
    /// values and prepare the statement again at every call, a find's
    /// largest cost. PostgreSQL binds them.
    ///
    /// # Errors
    ///
    /// When the backend's literal quoting fails.
    pub(super) fn scope(
        &self,
        namespace: &str,
        collection: &str,
        p: &mut Params,
    ) -> Result<(String, String), DocumentError> {
        if self.pg() {
            Ok((p.bind(text(namespace)), p.bind(text(collection))))
        } else {
            Ok((self.literal(namespace)?, self.literal(collection)?))
        }
    }

    /// The `n`th numbered placeholder of this dialect.
    fn numbered(&self, n: usize) -> String {
        if self.pg() {
            format!("${n}")
        } else {
            format!("?{n}")
        }
    }

    /// `columns` of one document.
    fn select_one(&self, columns: &str, namespace: &str, collection: &str, id: &str) -> Statement {
        let mut p = self.params();
        let (a, b, c) = (
            p.bind(text(namespace)),
            p.bind(text(collection)),
            p.bind(text(id)),
        );
        Statement::new(
            format!(
                "SELECT {columns} FROM {} WHERE namespace = {a} AND collection = {b} AND id = {c}",
                self.documents
            ),
            p,
        )
    }

    /// Deletes one document, only at `if_version` when given (no row
    /// deleted then means a version conflict).
    pub fn delete(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        if_version: Option<i64>,
    ) -> Statement {
        let mut p = self.params();
        let (a, b, c) = (
            p.bind(text(namespace)),
            p.bind(text(collection)),
            p.bind(text(id)),
        );
        let condition = match if_version {
            Some(version) => format!(" AND version = {}", p.bind(SqlParam::Int(version))),
            None => String::new(),
        };
        Statement::new(
            format!(
                "DELETE FROM {} WHERE namespace = {a} AND collection = {b} AND id = {c}{condition}",
                self.documents
            ),
            p,
        )
    }

    /// How many documents of a collection match validated predicates.
    ///
    /// # Errors
    ///
    /// When the backend's literal quoting fails.
    pub fn count(
        &self,
        namespace: &str,
        collection: &str,
        where_: &[Predicate],
    ) -> Result<Statement, DocumentError> {
        let mut p = self.params();
        let (a, b) = self.scope(namespace, collection, &mut p)?;
        let condition = self.predicates(where_, &mut p)?;
        Ok(Statement::new(
            format!(
                "SELECT COUNT(*) FROM {} WHERE namespace = {a} AND collection = {b} AND ({condition})",
                self.documents
            ),
            p,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{Dialect, QuoteLiteral};

    struct NoQuote;

    impl QuoteLiteral for NoQuote {
        fn quote_literal(&self, value: &str) -> Result<String, DocumentError> {
            Ok(format!("'{value}'"))
        }
    }

    /// A kept template, bound from a row by its slots, is the statement
    /// [`Compiler::put`] builds for that row: same text, same values in the
    /// same order, for every shape of `if_version` and both dialects.
    #[test]
    fn a_put_template_bound_from_a_row_is_the_put() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres] {
            let compiler = Compiler::new(dialect, &NoQuote, "docs", "cols");
            for (if_version, shape) in [
                (None, PutShape::Upsert),
                (Some(-3), PutShape::Upsert),
                (Some(0), PutShape::Create),
                (Some(1), PutShape::Update),
                (Some(42), PutShape::Update),
            ] {
                assert_eq!(PutShape::of(if_version), shape);
                assert_eq!(PutShape::ALL[shape.index()], shape);
                let row = PutRow {
                    namespace: "ns",
                    collection: "runs",
                    id: "r1",
                    raw: r#"{"a":1}"#,
                    now: "2026-12-07T11:00:00.000000+00:00",
                    if_version,
                };
                let built = compiler.put(&row);
                let template = compiler.put_template(shape);
                assert_eq!(template.sql, built.sql, "{dialect:?} {if_version:?}");
                let bound: Vec<PutValue<'_>> =
                    template.slots.iter().map(|slot| row.value(*slot)).collect();
                let expected: Vec<PutValue<'_>> = built
                    .params
                    .iter()
                    .map(|param| match param {
                        SqlParam::Int(n) => PutValue::Int(*n),
                        SqlParam::Text(s) | SqlParam::Json(s) | SqlParam::Numeric(s) => {
                            PutValue::Text(s)
                        }
                    })
                    .collect();
                assert_eq!(bound, expected, "{dialect:?} {if_version:?}");
            }
        }
    }
}
