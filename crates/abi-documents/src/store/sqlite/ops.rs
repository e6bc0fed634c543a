//! The operations on one connection, inside a transaction the caller opened
//! (the writer's savepoint, or a reader's read transaction).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use abi_document_model::datetime::python_str_repr;
use abi_document_model::validate::{validate_data, validate_name, validate_spec};
use abi_document_model::{CollectionSpec, Data, Datetime, Document, DocumentError, Predicate};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row, ToSql};

use super::connection::{COLLECTIONS_TABLE, DOCUMENTS_TABLE, SqliteQuote};
use super::error::Translate;
use super::told::Told;
use crate::codec::{as_stored, decode_data, parse, write_stored_data};
use crate::sql::{
    CatalogLock, Compiler, Dialect, FindPlan, PutRow, PutShape, PutTemplate, PutValue, SqlParam,
    Statement, merge_spec, parse_spec, spec_json, within_budget,
};
use abi_document_model::encode::{encode_data_body, encode_document_field_with_body};

/// What every connection of one store shares: the literal quoting and the
/// parsed catalog specs.
#[derive(Debug)]
pub struct Shared {
    quote: SqliteQuote,
    /// A put's SQL text per [`PutShape`] (in [`PutShape::ALL`] order),
    /// built once: a put binds its row's values to it by reference.
    put_templates: [PutTemplate; 3],
    /// [`Compiler::get_with_catalog`], built once.
    get_sql: String,
    /// [`Compiler::declared`], built once.
    declared_sql: String,
    /// The writer's early words not yet committed, which reads wait for.
    told: Told,
    /// Parsed specs by their stored text, shared (a put only reads one).
    specs: Mutex<HashMap<String, Arc<CollectionSpec>>>,
}

/// The specs the writer read from the catalog in its current transaction,
/// so a batch of puts to one collection reads its catalog row once. The
/// writer holds SQLite's write lock from `BEGIN IMMEDIATE` to `COMMIT`, so
/// no other process changes the catalog meanwhile; the writer's own declares
/// and drops do, and clear it, as does every new transaction.
#[derive(Debug, Default)]
pub struct TransactionSpecs(Vec<(String, String, Arc<CollectionSpec>)>);

impl TransactionSpecs {
    /// Forgets every spec (a new transaction, or the catalog changed).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// The collection's declaration: remembered, or read as
    /// [`Shared::require_collection`] reads it.
    fn require(
        &mut self,
        shared: &Shared,
        conn: &Connection,
        namespace: &str,
        collection: &str,
    ) -> Result<Arc<CollectionSpec>, DocumentError> {
        let known = self
            .0
            .iter()
            .find(|(n, c, _)| n == namespace && c == collection);
        if let Some((_, _, spec)) = known {
            return Ok(Arc::clone(spec));
        }
        let spec = shared.require_collection(conn, namespace, collection)?;
        self.0.push((
            namespace.to_owned(),
            collection.to_owned(),
            Arc::clone(&spec),
        ));
        Ok(spec)
    }
}

/// Parsed specs kept at most (the reference keeps 128).
const SPEC_CACHE_LIMIT: usize = 128;

struct Param<'a>(&'a SqlParam);

impl ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            SqlParam::Int(n) => ToSqlOutput::Borrowed(ValueRef::Integer(*n)),
            SqlParam::Text(s) | SqlParam::Json(s) | SqlParam::Numeric(s) => {
                ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes()))
            }
        })
    }
}

/// A put row's value, bound by reference.
struct RowValue<'a>(PutValue<'a>);

impl ToSql for RowValue<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            PutValue::Int(n) => ToSqlOutput::Borrowed(ValueRef::Integer(n)),
            PutValue::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

fn bound(statement: &Statement) -> impl rusqlite::Params + '_ {
    rusqlite::params_from_iter(statement.params.iter().map(Param))
}

fn stored_error() -> DocumentError {
    DocumentError::Storage("Stored document row is malformed".to_owned())
}

/// A document from a row of [`crate::sql::DOCUMENT_COLUMNS`].
fn document(row: &Row<'_>) -> rusqlite::Result<Result<Document, DocumentError>> {
    document_at(row, 0)
}

/// A document from [`crate::sql::DOCUMENT_COLUMNS`] starting at column `first`.
fn document_at(row: &Row<'_>, first: usize) -> rusqlite::Result<Result<Document, DocumentError>> {
    let stored = StoredRow::at(row, first)?;
    Ok((|| {
        let data = decode_data(parse(stored.data).map_err(|_| stored_error())?)?;
        let [created_at, updated_at] = stored.stamps()?;
        Ok(Document {
            id: stored.id.to_owned(),
            data,
            created_at,
            updated_at,
            version: stored.version,
        })
    })())
}

/// A document's columns as the row holds them (from `first`: id, data,
/// created, updated, version); the texts only parsed are borrowed, not
/// copied.
struct StoredRow<'r> {
    id: &'r str,
    data: &'r str,
    created: &'r str,
    updated: &'r str,
    version: i64,
}

impl<'r> StoredRow<'r> {
    fn at(row: &'r Row<'_>, first: usize) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get_ref(first)?.as_str()?,
            data: row.get_ref(first + 1)?.as_str()?,
            created: row.get_ref(first + 2)?.as_str()?,
            updated: row.get_ref(first + 3)?.as_str()?,
            version: row.get(first + 4)?,
        })
    }

    /// The created and updated stamps.
    fn stamps(&self) -> Result<[Datetime; 2], DocumentError> {
        let stamp = |text| Datetime::parse_iso(text).map_err(|_| stored_error());
        Ok([stamp(self.created)?, stamp(self.updated)?])
    }
}

/// [`document_at`]'s document as field `tag` of a protobuf reply, its data
/// written from the stored text when [`write_stored_data`] takes it, else
/// through the document's values (which also gives any error).
fn reply_at(
    row: &Row<'_>,
    first: usize,
    tag: u32,
) -> rusqlite::Result<Result<Vec<u8>, DocumentError>> {
    let stored = StoredRow::at(row, first)?;
    Ok((|| {
        let mut body = Vec::with_capacity(stored.data.len());
        if !write_stored_data(stored.data, &mut body) {
            let data = decode_data(parse(stored.data).map_err(|_| stored_error())?)?;
            encode_data_body(&data, &mut body);
        }
        let [created, updated] = stored.stamps()?;
        let mut reply = Vec::with_capacity(body.len() + REPLY_ROOM);
        encode_document_field_with_body(
            tag,
            stored.id,
            &body,
            [&created, &updated],
            stored.version,
            &mut reply,
        );
        Ok(reply)
    })())
}

/// Bytes of a reply beside its data: the id, two stamps, the version and
/// the fields' headers.
const REPLY_ROOM: usize = 128;

/// A put's stamps from a row of [`crate::sql::statements::PUT_STAMP_COLUMNS`].
fn put_stamps(row: &Row<'_>) -> rusqlite::Result<(String, String, i64)> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
}

impl Shared {
    /// A fresh quoter and an empty cache.
    ///
    /// # Errors
    ///
    /// When SQLite cannot open the quoter's connection.
    pub fn new() -> Result<Self, DocumentError> {
        let quote = SqliteQuote::new()?;
        let put_templates = PutShape::ALL.map(|shape| {
            Compiler::new(Dialect::Sqlite, &quote, DOCUMENTS_TABLE, COLLECTIONS_TABLE)
                .put_template(shape)
        });
        let compiler = Compiler::new(Dialect::Sqlite, &quote, DOCUMENTS_TABLE, COLLECTIONS_TABLE);
        let (get_sql, declared_sql) = (compiler.get_with_catalog(), compiler.declared());
        Ok(Self {
            quote,
            put_templates,
            get_sql,
            declared_sql,
            told: Told::default(),
            specs: Mutex::new(HashMap::new()),
        })
    }

    /// The writer's early words, which reads wait for ([`Told`]).
    pub fn told(&self) -> &Told {
        &self.told
    }

    /// The compiler for this store's tables.
    pub fn compiler(&self) -> Compiler<'_> {
        Compiler::new(
            Dialect::Sqlite,
            &self.quote,
            DOCUMENTS_TABLE,
            COLLECTIONS_TABLE,
        )
    }

    fn parse_spec_cached(&self, text: &str) -> Result<Arc<CollectionSpec>, DocumentError> {
        if let Ok(cache) = self.specs.lock()
            && let Some(spec) = cache.get(text)
        {
            return Ok(spec.clone());
        }
        let spec = Arc::new(parse_spec(text)?);
        if let Ok(mut cache) = self.specs.lock() {
            if cache.len() >= SPEC_CACHE_LIMIT {
                cache.clear();
            }
            cache.insert(text.to_owned(), spec.clone());
        }
        Ok(spec)
    }

    /// The collection's declaration, with the names checked first.
    ///
    /// # Errors
    ///
    /// `INVALID_ARGUMENT` for a bad name, `COLLECTION_NOT_FOUND`.
    pub fn require_collection(
        &self,
        conn: &Connection,
        namespace: &str,
        collection: &str,
    ) -> Result<Arc<CollectionSpec>, DocumentError> {
        validate_name(namespace)?;
        validate_name(collection)?;
        let statement = self
            .compiler()
            .select_spec(namespace, collection, CatalogLock::Share);
        let text: Option<String> = conn
            .prepare_cached(&statement.sql)
            .and_then(|mut s| s.query_row(bound(&statement), |row| row.get(0)).optional())
            .translated()?;
        match text {
            Some(text) => self.parse_spec_cached(&text),
            None => Err(DocumentError::CollectionNotFound(format!(
                "Collection {namespace}.{collection} does not exist"
            ))),
        }
    }

    /// Declares or merges a collection (see `DocumentSQL.ensure_collection`).
    ///
    /// # Errors
    ///
    /// `INVALID_ARGUMENT` (bad spec, type change, existing data of another
    /// type), `UNIQUE_VIOLATION` (existing duplicates), storage errors.
    pub fn ensure_collection(
        &self,
        conn: &Connection,
        namespace: &str,
        spec: &CollectionSpec,
    ) -> Result<(), DocumentError> {
        validate_spec(spec)?;
        validate_name(namespace)?;
        let sql = self.compiler();
        let insert = sql.insert_collection(
            namespace,
            &spec.name,
            &spec_json(&CollectionSpec::new(spec.name.clone())),
        );
        conn.execute(&insert.sql, bound(&insert)).translated()?;
        let old = self.require_collection(conn, namespace, &spec.name)?;
        let merged = merge_spec(&old, spec)?;
        let types = |s: &CollectionSpec| -> HashMap<String, String> {
            s.fields
                .iter()
                .map(|f| (f.name.clone(), f.field_type.clone()))
                .collect()
        };
        if types(&merged) != types(old.as_ref()) {
            self.check_existing_data(conn, namespace, &merged)?;
        }
        for (name, statement) in sql.index_statements(namespace, &merged)? {
            ensure_index(conn, &name, &statement)?;
        }
        if merged != *old {
            let update = sql.update_spec(&spec_json(&merged), namespace, &spec.name);
            conn.execute(&update.sql, bound(&update)).translated()?;
        }
        Ok(())
    }

    fn check_existing_data(
        &self,
        conn: &Connection,
        namespace: &str,
        merged: &CollectionSpec,
    ) -> Result<(), DocumentError> {
        let select = self
            .compiler()
            .select_collection_data(namespace, &merged.name);
        let mut statement = conn.prepare(&select.sql).translated()?;
        let mut rows = statement.query(bound(&select)).translated()?;
        while let Some(row) = rows.next().translated()? {
            let id: String = row.get(0).translated()?;
            let raw: String = row.get(1).translated()?;
            let data = decode_data(parse(&raw).map_err(|_| stored_error())?)?;
            if let Err(e) = validate_data(&data, Some(merged)) {
                return Err(DocumentError::InvalidArgument(format!(
                    "Cannot declare {namespace}.{}: document {}: {e}. Migrate existing data before adding this declaration.",
                    merged.name,
                    python_str_repr(&id)
                )));
            }
        }
        Ok(())
    }

    /// Drops a collection, its documents and its indexes.
    ///
    /// # Errors
    ///
    /// `COLLECTION_NOT_FOUND`, storage errors.
    pub fn drop_collection(
        &self,
        conn: &Connection,
        namespace: &str,
        collection: &str,
    ) -> Result<(), DocumentError> {
        let spec = self.require_collection(conn, namespace, collection)?;
        let sql = self.compiler();
        let delete = sql.delete_collection_documents(namespace, collection);
        conn.execute(&delete.sql, bound(&delete)).translated()?;
        for (name, _) in sql.index_statements(namespace, &spec)? {
            conn.execute(&sql.drop_index(&name).sql, []).translated()?;
        }
        let row = sql.delete_collection(namespace, collection);
        conn.execute(&row.sql, bound(&row)).translated()?;
        Ok(())
    }

    /// Writes a document (names and version already checked) whose stored
    /// JSON, [`crate::codec::stored_text`] of `data`, is `raw`.
    ///
    /// # Errors
    ///
    /// `COLLECTION_NOT_FOUND`, `INVALID_ARGUMENT` (data), `VERSION_CONFLICT`,
    /// `UNIQUE_VIOLATION`, storage errors.
    #[allow(clippy::too_many_arguments)] // a put's fields, as the writer holds them
    pub fn put(
        &self,
        conn: &Connection,
        specs: &mut TransactionSpecs,
        namespace: &str,
        collection: &str,
        id: &str,
        data: Data,
        raw: &str,
        if_version: Option<i64>,
    ) -> Result<Document, DocumentError> {
        let spec = specs.require(self, conn, namespace, collection)?;
        validate_data(&data, Some(&spec))?;
        let now = Datetime::now();
        let stamp = now.isoformat_micros();
        let row = PutRow {
            namespace,
            collection,
            id,
            raw,
            now: &stamp,
            if_version,
        };
        let template = &self.put_templates[PutShape::of(if_version).index()];
        let values = template.slots.iter().map(|slot| RowValue(row.value(*slot)));
        let written = conn
            .prepare_cached(&template.sql)
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(values)))
            .translated()?;
        if written == 0 {
            return Err(DocumentError::VersionConflict(format!(
                "Document {collection}/{id} does not have version {}",
                if_version.map_or_else(|| "None".to_owned(), |v| v.to_string())
            )));
        }
        let (created_at, updated_at, version) = if if_version == Some(0) {
            // A create: the stamps are the ones just written.
            (now, now, 1)
        } else {
            let select = self.compiler().select_stamps(namespace, collection, id);
            let (created, updated, version) = conn
                .prepare_cached(&select.sql)
                .and_then(|mut s| s.query_row(bound(&select), put_stamps))
                .translated()?;
            let parse = |text: &str| Datetime::parse_iso(text).map_err(|_| stored_error());
            (parse(&created)?, parse(&updated)?, version)
        };
        Ok(Document {
            id: id.to_owned(),
            data: as_stored(data),
            created_at,
            updated_at,
            version,
        })
    }

    /// Deletes a document (names and version already checked).
    ///
    /// # Errors
    ///
    /// `COLLECTION_NOT_FOUND`, `VERSION_CONFLICT`, storage errors.
    pub fn delete(
        &self,
        conn: &Connection,
        specs: &mut TransactionSpecs,
        namespace: &str,
        collection: &str,
        id: &str,
        if_version: Option<i64>,
    ) -> Result<(), DocumentError> {
        specs.require(self, conn, namespace, collection)?;
        let statement = self
            .compiler()
            .delete(namespace, collection, id, if_version);
        let deleted = conn
            .prepare_cached(&statement.sql)
            .and_then(|mut s| s.execute(bound(&statement)))
            .translated()?;
        if let Some(version) = if_version
            && deleted == 0
        {
            return Err(DocumentError::VersionConflict(format!(
                "Document {collection}/{id} does not have version {version}"
            )));
        }
        Ok(())
    }

    /// Reads a document (id already checked) in one statement, which needs
    /// no transaction around it for one snapshot of the catalog and the
    /// document ([`super::readers::Readers::read_now`]). When there is no
    /// such document a second statement tells whether the collection is
    /// declared: a drop or declare in between makes either answer possible,
    /// as it would a moment earlier or later.
    ///
    /// # Errors
    ///
    /// `COLLECTION_NOT_FOUND`, `DOCUMENT_NOT_FOUND`, storage errors.
    pub fn get(
        &self,
        conn: &Connection,
        namespace: &str,
        collection: &str,
        id: &str,
    ) -> Result<Document, DocumentError> {
        self.get_with(conn, namespace, collection, id, |row| document_at(row, 1))
    }

    /// [`Shared::get`]'s answer as field `tag` of a protobuf reply, written
    /// from the stored text (see [`write_stored_data`]).
    ///
    /// # Errors
    ///
    /// As [`Shared::get`].
    pub fn get_encoded(
        &self,
        conn: &Connection,
        namespace: &str,
        collection: &str,
        id: &str,
        tag: u32,
    ) -> Result<Vec<u8>, DocumentError> {
        self.get_with(conn, namespace, collection, id, |row| reply_at(row, 1, tag))
    }

    /// Runs the kept get statement, `read` making the answer of the row
    /// found; tells a missing document from a missing collection.
    fn get_with<T>(
        &self,
        conn: &Connection,
        namespace: &str,
        collection: &str,
        id: &str,
        read: impl FnOnce(&Row<'_>) -> rusqlite::Result<Result<T, DocumentError>>,
    ) -> Result<T, DocumentError> {
        validate_name(namespace)?;
        validate_name(collection)?;
        let undeclared = || {
            DocumentError::CollectionNotFound(format!(
                "Collection {namespace}.{collection} does not exist"
            ))
        };
        let found = conn
            .prepare_cached(&self.get_sql)
            .and_then(|mut s| {
                s.query_row(rusqlite::params![namespace, collection, id], |row| {
                    if row.get_ref(0)? == ValueRef::Null {
                        return Ok(Err(undeclared()));
                    }
                    read(row)
                })
                .optional()
            })
            .translated()?;
        if let Some(found) = found {
            return found;
        }
        let declared = conn
            .prepare_cached(&self.declared_sql)
            .and_then(|mut s| s.exists(rusqlite::params![namespace, collection]))
            .translated()?;
        if declared {
            Err(DocumentError::DocumentNotFound(format!(
                "Document {collection}/{id} does not exist"
            )))
        } else {
            Err(undeclared())
        }
    }

    /// The sorted names of a namespace's collections (namespace checked).
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn collections(
        &self,
        conn: &Connection,
        namespace: &str,
    ) -> Result<Vec<String>, DocumentError> {
        let statement = self.compiler().select_collections(namespace);
        sorted_names(conn, &statement)
    }

    /// The sorted namespaces holding a collection.
    ///
    /// # Errors
    ///
    /// Storage errors.
    pub fn namespaces(&self, conn: &Connection) -> Result<Vec<String>, DocumentError> {
        sorted_names(conn, &self.compiler().select_namespaces())
    }

    /// How many documents match (predicates already checked).
    ///
    /// # Errors
    ///
    /// `COLLECTION_NOT_FOUND`, storage errors.
    pub fn count(
        &self,
        conn: &Connection,
        namespace: &str,
        collection: &str,
        statement: &Statement,
    ) -> Result<i64, DocumentError> {
        self.require_collection(conn, namespace, collection)?;
        conn.prepare_cached(&statement.sql)
            .and_then(|mut s| s.query_row(bound(statement), |row| row.get(0)))
            .translated()
    }

    /// One attempt at a page of `plan`: the items and whether more follow.
    ///
    /// # Errors
    ///
    /// `COLLECTION_NOT_FOUND`, storage errors.
    pub fn find_once(
        &self,
        conn: &Connection,
        namespace: &str,
        collection: &str,
        plan: &FindPlan,
    ) -> Result<(Vec<Document>, bool), DocumentError> {
        self.require_collection(conn, namespace, collection)?;
        let limit = usize::try_from(plan.limit()).unwrap_or(usize::MAX);
        let Some(max_bytes) = plan.max_bytes() else {
            let mut statement = conn.prepare_cached(&plan.rows.sql).translated()?;
            let mut rows = statement.query(bound(&plan.rows)).translated()?;
            let mut items = Vec::new();
            let mut more = false;
            while let Some(row) = rows.next().translated()? {
                if items.len() == limit {
                    more = true;
                    break;
                }
                items.push(document(row).translated()??);
            }
            return Ok((items, more));
        };
        // Sizes first, then the kept documents only: memory follows the byte
        // budget, not the page size. Stored JSON is ASCII, so its length in
        // characters is its size in bytes.
        let sized: Vec<(String, i64)> = conn
            .prepare_cached(&plan.sizes.sql)
            .and_then(|mut s| {
                s.query_map(bound(&plan.sizes), |row| Ok((row.get(0)?, row.get(1)?)))?
                    .collect()
            })
            .translated()?;
        let (kept, more) = within_budget(&sized, plan.limit(), max_bytes);
        if kept.is_empty() {
            return Ok((Vec::new(), more));
        }
        let by_ids = self.compiler().by_ids(namespace, collection, &kept);
        let mut found: HashMap<String, Document> = HashMap::new();
        {
            let mut statement = conn.prepare(&by_ids.sql).translated()?;
            let mut rows = statement.query(bound(&by_ids)).translated()?;
            while let Some(row) = rows.next().translated()? {
                let doc = document(row).translated()??;
                found.insert(doc.id.clone(), doc);
            }
        }
        // A document deleted between the two reads is left out.
        let items = kept.iter().filter_map(|id| found.remove(id)).collect();
        Ok((items, more))
    }
}

fn sorted_names(conn: &Connection, statement: &Statement) -> Result<Vec<String>, DocumentError> {
    let mut names: Vec<String> = conn
        .prepare_cached(&statement.sql)
        .and_then(|mut s| s.query_map(bound(statement), |row| row.get(0))?.collect())
        .translated()?;
    names.sort();
    Ok(names)
}

/// Creates an index, first dropping one of the same name whose definition
/// differs (an older release's accessor), all inside the caller's
/// transaction. Definitions are compared without `IF NOT EXISTS` (SQLite
/// does not keep it) and with whitespace runs collapsed (SQLite versions
/// reprint differently).
fn ensure_index(conn: &Connection, name: &str, statement: &str) -> Result<(), DocumentError> {
    let existing: Option<Option<String>> = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?",
            [name],
            |row| row.get(0),
        )
        .optional()
        .translated()?;
    if let Some(existing) = existing
        && normalized_ddl(existing.as_deref().unwrap_or("")) != normalized_ddl(statement)
    {
        conn.execute(&format!("DROP INDEX {name}"), [])
            .translated()?;
    }
    conn.execute(statement, []).translated()?;
    Ok(())
}

/// A DDL text without `IF NOT EXISTS`, whitespace runs collapsed.
pub fn normalized_ddl(statement: &str) -> String {
    statement
        .replace(" IF NOT EXISTS", "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Checked predicates' count statement (`validate_query` with the default
/// page size, as the reference's count does).
///
/// # Errors
///
/// `INVALID_ARGUMENT` for bad predicates.
pub fn count_statement(
    shared: &Shared,
    namespace: &str,
    collection: &str,
    where_: &[Predicate],
) -> Result<Statement, DocumentError> {
    abi_document_model::validate::validate_query(
        where_,
        None,
        abi_document_model::query::DEFAULT_FIND_LIMIT,
    )?;
    shared.compiler().count(namespace, collection, where_)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use abi_document_model::{FieldSpec, Value};
    use rusqlite::StatementStatus;

    use super::*;
    use crate::codec::stored_text;
    use crate::store::sqlite::connection;

    /// A get's reply written from the stored text is the reply encoded from
    /// the document `get` reads, for stored texts the direct writer takes
    /// and for one it leaves to the general path (keys out of order, as no
    /// service writes them); errors are `get`'s.
    #[test]
    fn encoded_gets_are_the_encoded_documents() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connection::open(&dir.path().join("d.sqlite"), Duration::from_secs(1)).unwrap();
        connection::initialize(&conn).unwrap();
        let shared = Shared::new().unwrap();
        shared
            .ensure_collection(&conn, "ns", &CollectionSpec::new("docs"))
            .unwrap();
        let mut specs = TransactionSpecs::default();
        let values = crate::codec::sample_values();
        for (n, value) in values.into_iter().enumerate() {
            let data = Data::from([("v".to_owned(), value), ("$k".to_owned(), Value::Int(1))]);
            let raw = stored_text(&data);
            let id = format!("d{n}");
            shared
                .put(&conn, &mut specs, "ns", "docs", &id, data, &raw, None)
                .unwrap();
        }
        conn.execute(
            "UPDATE abi_documents SET data = '{\"z\": 1, \"a\": [true]}' WHERE id = 'd0'",
            [],
        )
        .unwrap();
        for id in (0..15)
            .map(|n| format!("d{n}"))
            .chain(["missing".to_owned()])
        {
            let expected = shared.get(&conn, "ns", "docs", &id).map(|document| {
                let mut reply = Vec::new();
                abi_document_model::encode::encode_document_field(2, &document, &mut reply);
                reply
            });
            let encoded = shared.get_encoded(&conn, "ns", "docs", &id, 2);
            assert_eq!(format!("{encoded:?}"), format!("{expected:?}"), "{id}");
        }
        let mut direct = Vec::new();
        assert!(!write_stored_data(r#"{"z": 1, "a": [true]}"#, &mut direct));
    }

    /// The kept statements of a get and of each put shape, and a find's and
    /// a count's, run as prepared: binding other values does not make
    /// SQLite prepare them again, though the collections have partial
    /// indexes on the namespace (a get written as a join, and finds and
    /// counts that bound the namespace, were prepared anew on every call).
    #[test]
    fn reads_and_writes_are_not_prepared_again_for_new_values() {
        let dir = tempfile::tempdir().unwrap();
        let conn = connection::open(&dir.path().join("d.sqlite"), Duration::from_secs(1)).unwrap();
        connection::initialize(&conn).unwrap();
        let shared = Shared::new().unwrap();
        let spec = CollectionSpec::new("runs")
            .field(FieldSpec::new("state", "string").indexed())
            .field(FieldSpec::new("n", "int").indexed());
        for namespace in ["one", "two"] {
            shared.ensure_collection(&conn, namespace, &spec).unwrap();
        }
        let mut specs = TransactionSpecs::default();
        for (n, namespace) in ["one", "two", "one", "two"].into_iter().enumerate() {
            let id = format!("r{n}");
            let data = Data::from([
                ("state".to_owned(), Value::from("open")),
                ("n".to_owned(), Value::Int(i64::try_from(n).unwrap())),
            ]);
            let raw = stored_text(&data);
            for if_version in [Some(0), Some(1), None] {
                shared
                    .put(
                        &conn,
                        &mut specs,
                        namespace,
                        "runs",
                        &id,
                        data.clone(),
                        &raw,
                        if_version,
                    )
                    .unwrap();
            }
            assert_eq!(
                shared.get(&conn, namespace, "runs", &id).unwrap().version,
                3
            );
            assert!(matches!(
                shared.get(&conn, namespace, "runs", "missing"),
                Err(DocumentError::DocumentNotFound(_))
            ));
            assert!(matches!(
                shared.get(&conn, namespace, "other", &id),
                Err(DocumentError::CollectionNotFound(_))
            ));
        }
        let mut queried = Vec::new();
        for state in ["open", "shut", "open", "gone"] {
            let where_ = vec![Predicate::new("state", "eq", state)];
            let query = abi_document_model::FindQuery {
                where_: where_.clone(),
                order_by: Some(abi_document_model::OrderBy::desc("n")),
                limit: 10,
                ..abi_document_model::FindQuery::default()
            };
            let plan = shared.compiler().plan_find("one", "runs", query).unwrap();
            let (items, _) = shared.find_once(&conn, "one", "runs", &plan).unwrap();
            let count = count_statement(&shared, "one", "runs", &where_).unwrap();
            let counted = shared.count(&conn, "one", "runs", &count).unwrap();
            assert_eq!(i64::try_from(items.len()).unwrap(), counted, "{state}");
            assert_eq!(counted, if state == "open" { 2 } else { 0 });
            queried = vec![plan.rows.sql, count.sql];
        }
        let kept = shared
            .put_templates
            .iter()
            .map(|template| template.sql.clone())
            .chain([shared.get_sql.clone(), shared.declared_sql.clone()])
            .chain(queried);
        for sql in kept {
            let sql = sql.as_str();
            let statement = conn.prepare_cached(sql).unwrap();
            assert!(statement.get_status(StatementStatus::Run) >= 4, "{sql}");
            assert_eq!(statement.get_status(StatementStatus::RePrepare), 0, "{sql}");
        }
    }
}
