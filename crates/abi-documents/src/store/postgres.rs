//! The PostgreSQL adapter: the reference's
//! `DocumentSecondaryAdapterPostgreSQL` over the shared SQL compiler.
//!
//! JSONB documents partitioned logically by namespace in one schema
//! (`abi_document` by default): `abi_document_collections` (the catalog) and
//! `abi_documents`, text columns `COLLATE "C"`, a GIN index on the data, and
//! per-collection expression indexes for declared fields.
//!
//! **Several processes, one database.** Everything the reference relies on
//! is kept: first-boot DDL is serialized by a transaction-scoped advisory
//! lock derived from the schema name; every operation on a collection takes
//! its catalog row `FOR SHARE` (documents) or `FOR UPDATE` (declaring,
//! dropping), so a declaration, its index DDL and the documents it checks
//! are never interleaved with a write; a compare-and-swap put is one
//! `UPDATE ... WHERE version = n` (PostgreSQL re-checks the condition on the
//! row a concurrent writer left, so exactly one writer wins each version);
//! a create-only put is `INSERT ... ON CONFLICT DO NOTHING`.
//!
//! **Connections.** A `deadpool-postgres` pool (`pool_max_size`,
//! `pool_timeout`) of `tokio-postgres` connections, each set up once with
//! `statement_timeout`, `TimeZone = UTC` and `standard_conforming_strings`.
//! A connection the server dropped (restart, crash, network) is discarded
//! when it is next taken from the pool and a new one is opened, so the store
//! recovers without being reopened; the operation that met the loss fails
//! with `STORAGE_ERROR` (its outcome unknown for a write, as in the
//! reference).
//!
//! **Errors.** `unique_violation` is `UNIQUE_VIOLATION`; malformed-query
//! classes are `ADAPTER_ERROR`; the rest `STORAGE_ERROR`, with fixed
//! messages: neither replies nor logs carry the connection string.

mod error;
mod schema;
mod wire;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use abi_document_model::validate::{
    validate_data, validate_name, validate_query, validate_spec, validate_version,
};
use abi_document_model::{
    BatchFailure, CollectionSpec, Data, Datetime, Document, DocumentError, DocumentStore,
    FindQuery, Page, Predicate, Write,
};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::codec::{decode_data, parse, stored_text};
use crate::sql::{
    CatalogLock, Compiler, Dialect, PutRow, QuoteLiteral, Statement, merge_spec, parse_spec,
    spec_json, within_budget,
};

pub use error::{ADAPTER_MESSAGE, INIT_MESSAGE, STORAGE_MESSAGE, UNIQUE_MESSAGE, translate};

use error::{Translate, pool_error};
use wire::{JsonText, TextParam, Timestamp};

/// The schema holding the tables, as in the reference.
pub const DEFAULT_SCHEMA: &str = "abi_document";
/// How long opening one connection may take (the reference's 5 s).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one statement may run, lock waits included (the reference's
/// 30 s): a stuck lock fails the operation instead of hanging it.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How many connections one store holds at most: 32 (the reference has 10),
/// so 64 concurrent writers keep PostgreSQL committing several transactions
/// per WAL flush instead of queueing for a connection.
pub const DEFAULT_POOL_MAX_SIZE: usize = 32;
/// How long an operation waits for a connection from the pool (the
/// reference's 5 s).
pub const DEFAULT_POOL_TIMEOUT: Duration = Duration::from_secs(5);

/// How to reach and lay out the database.
///
/// `Debug` shows no part of the URL: it may hold a password.
#[derive(Clone)]
pub struct PostgresConfig {
    /// A libpq URL (`postgres://user:pass@host:port/db?...`) or key/value
    /// connection string.
    pub url: String,
    /// The schema holding the tables: `[a-z_][a-z0-9_]{0,62}`.
    pub schema: String,
    /// See [`DEFAULT_CONNECT_TIMEOUT`].
    pub connect_timeout: Duration,
    /// See [`DEFAULT_STATEMENT_TIMEOUT`]; sent in whole milliseconds.
    pub statement_timeout: Duration,
    /// See [`DEFAULT_POOL_MAX_SIZE`].
    pub pool_max_size: usize,
    /// See [`DEFAULT_POOL_TIMEOUT`].
    pub pool_timeout: Duration,
}

impl PostgresConfig {
    /// The reference's defaults for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            schema: DEFAULT_SCHEMA.to_owned(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
            pool_max_size: DEFAULT_POOL_MAX_SIZE,
            pool_timeout: DEFAULT_POOL_TIMEOUT,
        }
    }

    /// Checks the settings as the reference does.
    ///
    /// # Errors
    ///
    /// `INVALID_ARGUMENT` naming the first bad setting.
    pub fn validate(&self) -> Result<(), DocumentError> {
        if !valid_schema(&self.schema) {
            return Err(DocumentError::invalid(
                "schema must be a lowercase PostgreSQL identifier (max 63 bytes)",
            ));
        }
        if self.url.is_empty()
            || self.connect_timeout.is_zero()
            || self.statement_timeout.as_millis() == 0
            || self.pool_max_size < 1
            || self.pool_timeout.is_zero()
        {
            return Err(DocumentError::invalid(
                "dsn must be nonempty and timeouts must be positive",
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for PostgresConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresConfig")
            .field("url", &"<redacted>")
            .field("schema", &self.schema)
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("pool_max_size", &self.pool_max_size)
            .field("pool_timeout", &self.pool_timeout)
            .finish()
    }
}

/// `[a-z_][a-z0-9_]{0,62}`.
fn valid_schema(schema: &str) -> bool {
    let bytes = schema.as_bytes();
    matches!(bytes.first(), Some(b'a'..=b'z' | b'_'))
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
}

/// String literals for the compiler, by `postgres-protocol`'s rules.
#[derive(Debug, Clone, Copy)]
struct PgQuote;

impl QuoteLiteral for PgQuote {
    fn quote_literal(&self, value: &str) -> Result<String, DocumentError> {
        Ok(postgres_protocol::escape::escape_literal(value))
    }
}

/// The document store on PostgreSQL. Cheap to share behind an `Arc`; every
/// operation takes a pooled connection for one transaction.
pub struct PostgresStore {
    pool: Pool,
    /// The collection specs last seen (one-statement puts).
    specs: KnownSpecs,
    /// `"<schema>".abi_documents`.
    documents: String,
    /// `"<schema>".abi_document_collections`.
    collections: String,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PostgresStore")
            .field("documents", &self.documents)
            .field("pool_size", &status.size)
            .field("pool_max_size", &status.max_size)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects and creates the schema, tables and GIN index if missing
    /// (serialized across processes by an advisory lock).
    ///
    /// # Errors
    ///
    /// `INVALID_ARGUMENT` for a bad configuration (see
    /// [`PostgresConfig::validate`]), `STORAGE_ERROR` ("Cannot initialize
    /// PostgreSQL document storage") when the database cannot be reached or
    /// set up within the timeouts.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the pool; a half-done
    /// initialization is rolled back by the server.
    pub async fn open(config: PostgresConfig) -> Result<Self, DocumentError> {
        config.validate()?;
        let mut pg = tokio_postgres::Config::from_str(&config.url).map_err(|_| {
            // The parser's message may quote a part of the URL.
            DocumentError::invalid("dsn is not a valid PostgreSQL connection string")
        })?;
        pg.connect_timeout(config.connect_timeout);
        let manager = Manager::from_config(
            pg,
            tokio_postgres::NoTls,
            ManagerConfig {
                // A dropped connection is seen closed (its task ended) and
                // replaced; a test query per checkout would cost a round
                // trip for what the next statement finds out anyway.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let statement_timeout_ms = config.statement_timeout.as_millis();
        let session = format!(
            "SET statement_timeout = {statement_timeout_ms}; SET TIME ZONE 'UTC'; \
             SET standard_conforming_strings = on"
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_max_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(config.pool_timeout))
            .create_timeout(Some(config.pool_timeout))
            .recycle_timeout(Some(config.pool_timeout))
            .post_create(deadpool_postgres::Hook::async_fn(move |client, _| {
                let session = session.clone();
                Box::pin(async move {
                    client
                        .batch_execute(&session)
                        .await
                        .map_err(deadpool_postgres::HookError::Backend)
                })
            }))
            .build()
            .map_err(|e| {
                tracing::error!(error = %e, "postgres pool not built");
                DocumentError::Storage(INIT_MESSAGE.to_owned())
            })?;
        let schema = postgres_protocol::escape::escape_identifier(&config.schema);
        let store = Self {
            pool,
            specs: KnownSpecs::default(),
            documents: format!("{schema}.abi_documents"),
            collections: format!("{schema}.abi_document_collections"),
        };
        if let Err(e) = schema::initialize(&store, &config.schema).await {
            tracing::error!(
                code = e.code().as_str(),
                "postgres document storage not initialized"
            );
            store.pool.close();
            return Err(DocumentError::Storage(INIT_MESSAGE.to_owned()));
        }
        Ok(store)
    }

    /// Closes the pool: connections are closed as they come back, and every
    /// later operation fails with `STORAGE_ERROR`. Idempotent.
    pub fn close(&self) {
        self.pool.close();
    }

    /// The pool's connections: open, idle (`available`), at most
    /// (`max_size`), and the operations waiting for one (`waiting`).
    pub fn pool_status(&self) -> deadpool_postgres::Status {
        self.pool.status()
    }

    /// The compiler for this store's tables.
    fn compiler(&self) -> Compiler<'_> {
        Compiler::new(
            Dialect::Postgres,
            &PgQuote,
            &self.documents,
            &self.collections,
        )
    }

    /// A pooled connection (a fresh one when the pooled one was lost).
    async fn connection(&self) -> Result<Object, DocumentError> {
        self.pool.get().await.map_err(|e| pool_error(&e))
    }
}

/// Runs a statement in `tx` (one round trip, no cached plan) and returns
/// its rows.
async fn query(
    tx: &deadpool_postgres::Transaction<'_>,
    statement: &Statement,
) -> Result<Vec<Row>, DocumentError> {
    let params: Vec<TextParam> = statement.params.iter().map(TextParam::new).collect();
    let typed: Vec<(&(dyn ToSql + Sync), tokio_postgres::types::Type)> = params
        .iter()
        .map(|p| (p as &(dyn ToSql + Sync), p.ty()))
        .collect();
    tx.query_typed(&statement.sql, &typed).await.translated()
}

/// Runs a statement of a fixed text through the connection's prepared
/// statement cache (the put, get, delete and catalog statements: a bounded
/// set) and returns its rows.
async fn query_cached(
    tx: &deadpool_postgres::Transaction<'_>,
    statement: &Statement,
) -> Result<Vec<Row>, DocumentError> {
    let prepared = tx.prepare_cached(&statement.sql).await.translated()?;
    let params: Vec<TextParam> = statement.params.iter().map(TextParam::new).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
    tx.query(&prepared, &refs).await.translated()
}

/// [`query_cached`] on a pooled connection outside a transaction.
async fn client_query_cached(
    conn: &Object,
    statement: &Statement,
) -> Result<Vec<Row>, DocumentError> {
    let prepared = conn.prepare_cached(&statement.sql).await.translated()?;
    let params: Vec<TextParam> = statement.params.iter().map(TextParam::new).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
    conn.query(&prepared, &refs).await.translated()
}

/// Runs a statement for its effect.
async fn execute(
    tx: &deadpool_postgres::Transaction<'_>,
    statement: &Statement,
) -> Result<u64, DocumentError> {
    let params: Vec<TextParam> = statement.params.iter().map(TextParam::new).collect();
    let typed: Vec<(&(dyn ToSql + Sync), tokio_postgres::types::Type)> = params
        .iter()
        .map(|p| (p as &(dyn ToSql + Sync), p.ty()))
        .collect();
    tx.execute_typed(&statement.sql, &typed).await.translated()
}

/// Column `index` of `row`, a decoding failure being a storage error.
fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    index: usize,
) -> Result<T, DocumentError> {
    row.try_get(index).translated()
}

/// A stored JSON text as document data, as the reference reads it back.
fn read_data(text: &str) -> Result<Data, DocumentError> {
    let json = parse(text)
        .map_err(|_| DocumentError::Storage("Stored document holds malformed JSON".to_owned()))?;
    decode_data(json)
}

/// A row of `id, data, created_at, updated_at, version`.
fn document(row: &Row) -> Result<Document, DocumentError> {
    document_at(row, 0)
}

/// A document from the [`crate::sql::DOCUMENT_COLUMNS`] of `row` starting
/// at column `first`.
fn document_at(row: &Row, first: usize) -> Result<Document, DocumentError> {
    let data: JsonText = column(row, first + 1)?;
    let created_at: Timestamp = column(row, first + 2)?;
    let updated_at: Timestamp = column(row, first + 3)?;
    Ok(Document {
        id: column(row, first)?,
        data: read_data(&data.0)?,
        created_at: created_at.0,
        updated_at: updated_at.0,
        version: column(row, first + 4)?,
    })
}

/// The answer for a collection that does not exist (the reference's).
fn collection_not_found(namespace: &str, collection: &str) -> DocumentError {
    DocumentError::CollectionNotFound(format!(
        "Collection {namespace}.{collection} does not exist"
    ))
}

/// How many specs a store remembers before it forgets them all.
const KNOWN_SPECS: usize = 1024;
/// How many times a put checks its data against a changed spec before it
/// takes the catalog lock for the whole transaction instead.
const PUT_SPEC_TRIES: usize = 3;

/// The specs a store last saw, by namespace and collection: their stored
/// text (what a one-statement put checks the catalog still holds) and its
/// parse. A stale entry costs a retry, never a wrong answer.
#[derive(Debug, Default)]
struct KnownSpecs(std::sync::Mutex<HashMap<(String, String), (String, CollectionSpec)>>);

impl KnownSpecs {
    fn get(&self, namespace: &str, collection: &str) -> Option<(String, CollectionSpec)> {
        let known = self.0.lock().ok()?;
        known
            .get(&(namespace.to_owned(), collection.to_owned()))
            .cloned()
    }

    fn remember(&self, namespace: &str, collection: &str, text: String, spec: CollectionSpec) {
        if let Ok(mut known) = self.0.lock() {
            if known.len() >= KNOWN_SPECS {
                known.clear();
            }
            known.insert((namespace.to_owned(), collection.to_owned()), (text, spec));
        }
    }

    fn forget(&self, namespace: &str, collection: &str) {
        if let Ok(mut known) = self.0.lock() {
            known.remove(&(namespace.to_owned(), collection.to_owned()));
        }
    }
}

impl PostgresStore {
    /// The collection's spec, its catalog row locked for the rest of the
    /// transaction (after the reference's name checks).
    async fn require_collection(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        namespace: &str,
        collection: &str,
        lock: CatalogLock,
    ) -> Result<CollectionSpec, DocumentError> {
        validate_name(namespace)?;
        validate_name(collection)?;
        let rows = query_cached(
            tx,
            &self.compiler().select_spec(namespace, collection, lock),
        )
        .await?;
        match rows.first() {
            Some(row) => parse_spec(&column::<String>(row, 0)?),
            None => Err(collection_not_found(namespace, collection)),
        }
    }

    /// One write of a batch inside its transaction, with the catalog row
    /// share-locked as the single operation's slow path holds it.
    async fn write_in(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        write: &Write,
    ) -> Result<Option<Document>, DocumentError> {
        match write {
            Write::Put {
                namespace,
                collection,
                id,
                data,
                if_version,
            } => {
                validate_name(id)?;
                validate_version(*if_version)?;
                let spec = self
                    .require_collection(tx, namespace, collection, CatalogLock::Share)
                    .await?;
                validate_data(data, Some(&spec))?;
                let raw = stored_text(data);
                let now = Datetime::now().isoformat_micros();
                let put = PutRow {
                    namespace,
                    collection,
                    id,
                    raw: &raw,
                    now: &now,
                    if_version: *if_version,
                };
                let rows = query_cached(tx, &self.compiler().put(&put)).await?;
                match rows.first() {
                    Some(row) => document(row).map(Some),
                    None => Err(version_conflict(collection, id, *if_version)),
                }
            }
            Write::Delete {
                namespace,
                collection,
                id,
                if_version,
            } => {
                validate_name(id)?;
                validate_version(*if_version)?;
                self.require_collection(tx, namespace, collection, CatalogLock::Share)
                    .await?;
                let statement = self
                    .compiler()
                    .delete(namespace, collection, id, *if_version);
                if execute(tx, &statement).await? == 0 && if_version.is_some() {
                    return Err(version_conflict(collection, id, *if_version));
                }
                Ok(None)
            }
        }
    }

    /// One attempt at a page; `None` when a byte-budgeted page lost every
    /// document it kept to concurrent deletes (read again rather than end
    /// the iteration early: no cursor means the end).
    async fn find_once(
        &self,
        namespace: &str,
        collection: &str,
        query_: &FindQuery,
    ) -> Result<Option<Page>, DocumentError> {
        let compiler = self.compiler();
        let plan = compiler.plan_find(namespace, collection, query_.clone())?;
        let mut conn = self.connection().await?;
        let tx = conn.transaction().await.translated()?;
        self.require_collection(&tx, namespace, collection, CatalogLock::Share)
            .await?;
        let limit = plan.limit();
        let (items, more) = match plan.max_bytes() {
            None => {
                let rows = query(&tx, &plan.rows).await?;
                let more = rows.len() as i64 > limit;
                let items = rows
                    .iter()
                    .take(limit as usize)
                    .map(document)
                    .collect::<Result<Vec<_>, _>>()?;
                (items, more)
            }
            Some(max_bytes) => {
                // Sizes first, documents for the kept ids only: memory
                // follows the byte budget, not the limit.
                let sized = query(&tx, &plan.sizes)
                    .await?
                    .iter()
                    .map(|row| Ok((column::<String>(row, 0)?, i64::from(column::<i32>(row, 1)?))))
                    .collect::<Result<Vec<_>, DocumentError>>()?;
                let (kept, more) = within_budget(&sized, limit, max_bytes);
                let mut items = Vec::with_capacity(kept.len());
                if !kept.is_empty() {
                    let rows = query(&tx, &compiler.by_ids(namespace, collection, &kept)).await?;
                    let mut found = std::collections::HashMap::with_capacity(rows.len());
                    for row in &rows {
                        let doc = document(row)?;
                        found.insert(doc.id.clone(), doc);
                    }
                    // A document deleted between the two reads is left out.
                    items.extend(kept.iter().filter_map(|id| found.remove(id)));
                }
                (items, more)
            }
        };
        tx.commit().await.translated()?;
        if more && items.is_empty() {
            return Ok(None);
        }
        Ok(Some(plan.page(items, more)))
    }
}

impl DocumentStore for PostgresStore {
    async fn ensure_collection(
        &self,
        namespace: &str,
        spec: CollectionSpec,
    ) -> Result<(), DocumentError> {
        validate_spec(&spec)?;
        validate_name(namespace)?;
        let compiler = self.compiler();
        let mut conn = self.connection().await?;
        let tx = conn.transaction().await.translated()?;
        let empty = spec_json(&CollectionSpec::new(spec.name.clone()));
        query_cached(
            &tx,
            &compiler.insert_collection(namespace, &spec.name, &empty),
        )
        .await?;
        let old = self
            .require_collection(&tx, namespace, &spec.name, CatalogLock::Exclusive)
            .await?;
        let merged = merge_spec(&old, &spec)?;
        // Declared types also apply to existing documents: check them all
        // before any DDL, so a refused declaration changes nothing. Only a
        // type change can refuse; index flags never rescan.
        let types = |s: &CollectionSpec| {
            s.fields
                .iter()
                .map(|f| (f.name.clone(), f.field_type.clone()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        if types(&old) != types(&merged) {
            let rows = query(&tx, &compiler.select_collection_data(namespace, &spec.name)).await?;
            for row in &rows {
                let id: String = column(row, 0)?;
                let data: JsonText = column(row, 1)?;
                if let Err(e) = validate_data(&read_data(&data.0)?, Some(&merged)) {
                    return Err(DocumentError::InvalidArgument(format!(
                        "Cannot declare {namespace}.{}: document {}: {e}. Migrate existing data before adding this declaration.",
                        spec.name,
                        abi_document_model::datetime::python_str_repr(&id)
                    )));
                }
            }
        }
        for (name, statement) in compiler.index_statements(namespace, &merged)? {
            schema::ensure_index(&tx, &compiler, &name, &statement).await?;
        }
        if merged != old {
            query_cached(
                &tx,
                &compiler.update_spec(&spec_json(&merged), namespace, &spec.name),
            )
            .await?;
        }
        tx.commit().await.translated()?;
        self.specs.forget(namespace, &spec.name);
        Ok(())
    }

    async fn drop_collection(
        &self,
        namespace: &str,
        collection: &str,
    ) -> Result<(), DocumentError> {
        let compiler = self.compiler();
        let mut conn = self.connection().await?;
        let tx = conn.transaction().await.translated()?;
        let spec = self
            .require_collection(&tx, namespace, collection, CatalogLock::Exclusive)
            .await?;
        execute(
            &tx,
            &compiler.delete_collection_documents(namespace, collection),
        )
        .await?;
        for (name, _) in compiler.index_statements(namespace, &spec)? {
            execute(&tx, &compiler.drop_index(&name)).await?;
        }
        execute(&tx, &compiler.delete_collection(namespace, collection)).await?;
        tx.commit().await.translated()?;
        self.specs.forget(namespace, collection);
        Ok(())
    }

    async fn collections(&self, namespace: &str) -> Result<Vec<String>, DocumentError> {
        validate_name(namespace)?;
        let mut conn = self.connection().await?;
        let tx = conn.transaction().await.translated()?;
        let rows = query_cached(&tx, &self.compiler().select_collections(namespace)).await?;
        let mut names = rows
            .iter()
            .map(|row| column::<String>(row, 0))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit().await.translated()?;
        // Python's sorted(): by code point, which is UTF-8 byte order.
        names.sort();
        Ok(names)
    }

    async fn collection_spec(
        &self,
        namespace: &str,
        collection: &str,
    ) -> Result<CollectionSpec, DocumentError> {
        let mut conn = self.connection().await?;
        let tx = conn.transaction().await.translated()?;
        let spec = self
            .require_collection(&tx, namespace, collection, CatalogLock::Share)
            .await?;
        tx.commit().await.translated()?;
        Ok(spec)
    }

    async fn namespaces(&self) -> Result<Vec<String>, DocumentError> {
        let mut conn = self.connection().await?;
        let tx = conn.transaction().await.translated()?;
        let rows = query_cached(&tx, &self.compiler().select_namespaces()).await?;
        let mut names = rows
            .iter()
            .map(|row| column::<String>(row, 0))
            .collect::<Result<Vec<_>, _>>()?;
        tx.commit().await.translated()?;
        names.sort();
        Ok(names)
    }

    async fn put(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        data: Data,
        if_version: Option<i64>,
    ) -> Result<Document, DocumentError> {
        validate_name(id)?;
        validate_version(if_version)?;
        validate_name(namespace)?;
        validate_name(collection)?;
        let raw = stored_text(&data);
        let now = Datetime::now().isoformat_micros();
        let put = PutRow {
            namespace,
            collection,
            id,
            raw: &raw,
            now: &now,
            if_version,
        };
        let mut conn = self.connection().await?;
        // One round trip when the spec is known: check the data against it,
        // then write only if the catalog still holds it.
        let mut known = self.specs.get(namespace, collection);
        for _ in 0..PUT_SPEC_TRIES {
            let (text, spec) = match known.take() {
                Some(known) => known,
                None => {
                    let lookup =
                        self.compiler()
                            .select_spec(namespace, collection, CatalogLock::None);
                    let rows = client_query_cached(&conn, &lookup).await?;
                    let Some(row) = rows.first() else {
                        return Err(collection_not_found(namespace, collection));
                    };
                    let text: String = column(row, 0)?;
                    let spec = parse_spec(&text)?;
                    self.specs
                        .remember(namespace, collection, text.clone(), spec.clone());
                    (text, spec)
                }
            };
            validate_data(&data, Some(&spec))?;
            let statement = self.compiler().put_if_spec(&put, &text);
            let rows = client_query_cached(&conn, &statement).await?;
            let Some(row) = rows.first() else {
                return Err(DocumentError::Storage(STORAGE_MESSAGE.to_owned()));
            };
            match column::<Option<String>>(row, 0)? {
                None => {
                    self.specs.forget(namespace, collection);
                    return Err(collection_not_found(namespace, collection));
                }
                Some(current) if current != text => {
                    let spec = parse_spec(&current)?;
                    self.specs
                        .remember(namespace, collection, current.clone(), spec.clone());
                    known = Some((current, spec));
                }
                Some(_) => {
                    if column::<Option<String>>(row, 1)?.is_none() {
                        return Err(version_conflict(collection, id, if_version));
                    }
                    return document_at(row, 1);
                }
            }
        }
        // The spec kept changing under the put: hold its catalog row for the
        // whole write instead.
        let tx = conn.transaction().await.translated()?;
        let write = Write::Put {
            namespace: namespace.to_owned(),
            collection: collection.to_owned(),
            id: id.to_owned(),
            data,
            if_version,
        };
        let doc = self.write_in(&tx, &write).await?;
        tx.commit().await.translated()?;
        doc.ok_or_else(|| DocumentError::Storage(STORAGE_MESSAGE.to_owned()))
    }

    async fn get(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
    ) -> Result<Document, DocumentError> {
        validate_name(id)?;
        validate_name(namespace)?;
        validate_name(collection)?;
        // A read takes no lock and writes nothing: the catalog check and the
        // document travel together on one connection (tokio-postgres
        // pipelines them: one round trip), each in its own implicit
        // transaction. A concurrent drop makes either answer possible, as it
        // would a moment earlier or later; a transaction with a row lock, as
        // the reference takes, would cost three more round trips and a WAL
        // flush on every read.
        let conn = self.connection().await?;
        let spec = self
            .compiler()
            .select_spec(namespace, collection, CatalogLock::None);
        let get = self.compiler().get(namespace, collection, id);
        let (catalog, rows) = futures::try_join!(
            client_query_cached(&conn, &spec),
            client_query_cached(&conn, &get)
        )?;
        if catalog.is_empty() {
            return Err(DocumentError::CollectionNotFound(format!(
                "Collection {namespace}.{collection} does not exist"
            )));
        }
        match rows.first() {
            Some(row) => document(row),
            None => Err(DocumentError::DocumentNotFound(format!(
                "Document {collection}/{id} does not exist"
            ))),
        }
    }

    async fn delete(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        if_version: Option<i64>,
    ) -> Result<(), DocumentError> {
        validate_name(id)?;
        validate_version(if_version)?;
        let mut conn = self.connection().await?;
        let tx = conn.transaction().await.translated()?;
        self.require_collection(&tx, namespace, collection, CatalogLock::Share)
            .await?;
        let statement = self
            .compiler()
            .delete(namespace, collection, id, if_version);
        let prepared = tx.prepare_cached(&statement.sql).await.translated()?;
        let params: Vec<TextParam> = statement.params.iter().map(TextParam::new).collect();
        let refs: Vec<&(dyn ToSql + Sync)> =
            params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let deleted = tx.execute(&prepared, &refs).await.translated()?;
        if if_version.is_some() && deleted == 0 {
            return Err(version_conflict(collection, id, if_version));
        }
        tx.commit().await.translated()
    }

    async fn batch(&self, writes: Vec<Write>) -> Result<Vec<Option<Document>>, BatchFailure> {
        let whole = |error| BatchFailure { index: None, error };
        let mut conn = self.connection().await.map_err(whole)?;
        let tx = conn.transaction().await.translated().map_err(whole)?;
        let mut answers = Vec::with_capacity(writes.len());
        for (index, write) in writes.iter().enumerate() {
            // A refused write ends the transaction unfinished: dropped, it
            // rolls back every earlier write of the batch.
            let answer = self
                .write_in(&tx, write)
                .await
                .map_err(|error| BatchFailure {
                    index: Some(index),
                    error,
                })?;
            answers.push(answer);
        }
        tx.commit().await.translated().map_err(whole)?;
        Ok(answers)
    }

    async fn find(
        &self,
        namespace: &str,
        collection: &str,
        query: FindQuery,
    ) -> Result<Page, DocumentError> {
        loop {
            if let Some(page) = self.find_once(namespace, collection, &query).await? {
                return Ok(page);
            }
        }
    }

    async fn count(
        &self,
        namespace: &str,
        collection: &str,
        where_: Vec<Predicate>,
    ) -> Result<i64, DocumentError> {
        validate_query(&where_, None, abi_document_model::query::DEFAULT_FIND_LIMIT)?;
        let statement = self.compiler().count(namespace, collection, &where_)?;
        let mut conn = self.connection().await?;
        let tx = conn.transaction().await.translated()?;
        self.require_collection(&tx, namespace, collection, CatalogLock::Share)
            .await?;
        let rows = query(&tx, &statement).await?;
        let count = match rows.first() {
            Some(row) => column::<i64>(row, 0)?,
            None => 0,
        };
        tx.commit().await.translated()?;
        Ok(count)
    }
}

/// The reference's `VersionConflict` message.
fn version_conflict(collection: &str, id: &str, if_version: Option<i64>) -> DocumentError {
    let version = if_version.map_or_else(|| "None".to_owned(), |v| v.to_string());
    DocumentError::VersionConflict(format!(
        "Document {collection}/{id} does not have version {version}"
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_follow_the_reference_pattern() {
        for ok in ["abi_document", "_", "a", &format!("a{}", "b".repeat(62))] {
            assert!(valid_schema(ok), "{ok}");
        }
        for bad in [
            "",
            "A",
            "1a",
            "a-b",
            "a\"b",
            &format!("a{}", "b".repeat(63)),
        ] {
            assert!(!valid_schema(bad), "{bad}");
        }
    }

    #[test]
    fn config_defaults_are_the_references_and_debug_hides_the_url() {
        let config = PostgresConfig::new("postgres://user:secret@db/x");
        assert_eq!(config.schema, "abi_document");
        assert_eq!(config.connect_timeout, Duration::from_secs(5));
        assert_eq!(config.statement_timeout, Duration::from_secs(30));
        assert_eq!(config.pool_max_size, 32);
        assert_eq!(config.pool_timeout, Duration::from_secs(5));
        assert!(config.validate().is_ok());
        assert!(!format!("{config:?}").contains("secret"));
        let mut bad = config.clone();
        bad.pool_max_size = 0;
        assert!(matches!(
            bad.validate(),
            Err(DocumentError::InvalidArgument(_))
        ));
        bad = config;
        bad.schema = "Bad".to_owned();
        assert!(matches!(
            bad.validate(),
            Err(DocumentError::InvalidArgument(_))
        ));
    }

    #[test]
    fn literals_are_quoted_by_postgres_protocol() {
        assert_eq!(PgQuote.quote_literal("it's").unwrap(), "'it''s'");
    }
}
