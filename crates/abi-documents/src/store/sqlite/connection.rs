//! Opening a connection: pragmas, the reference's schema, and the custom
//! functions and collation its SQL and indexes use.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use abi_document_model::DocumentError;
use abi_sqlite_functions::{Args, NotText, register_collation, register_text_function};
use rusqlite::{Connection, OpenFlags};

use super::error::Translate;
use crate::codec::{
    compare_numeric_text, sqlite_bytes_key, sqlite_field_bytes, sqlite_json_key,
    sqlite_legacy_json_key, sqlite_numeric_text,
};
use crate::sql::QuoteLiteral;

/// The catalog table (the reference's name and columns).
pub const COLLECTIONS_TABLE: &str = "abi_document_collections";
/// The documents table (the reference's name and columns).
pub const DOCUMENTS_TABLE: &str = "abi_documents";

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS abi_document_collections (namespace TEXT NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL, PRIMARY KEY (namespace, name));
CREATE TABLE IF NOT EXISTS abi_documents (namespace TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (namespace, collection, id));";

/// The oldest SQLite whose JSON functions the SQL needs (`->`, RETURNING).
const MIN_SQLITE_VERSION: i32 = 3_038_000;

/// Opens a connection to `path` with the functions and collation
/// registered, `busy_timeout` set and `synchronous=FULL`.
///
/// # Errors
///
/// [`DocumentError::Storage`] when the file cannot be opened.
pub fn open(path: &Path, busy_timeout: Duration) -> Result<Connection, DocumentError> {
    if rusqlite::version_number() < MIN_SQLITE_VERSION {
        return Err(DocumentError::Storage(
            "Document storage requires SQLite >= 3.38 with JSON support".to_owned(),
        ));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // The platform's VFS, but a commit's WAL frames reach the file in one
    // write instead of two per frame (`abi-sqlite-wal`); it relies on the
    // `synchronous=FULL` set below.
    let vfs = abi_sqlite_wal::register()
        .map_err(|error| DocumentError::Storage(format!("Document storage: {error}")))?;
    let connection = Connection::open_with_flags_and_vfs(path, flags, vfs).translated()?;
    connection.busy_timeout(busy_timeout).translated()?;
    // FULL: in WAL mode every COMMIT syncs the WAL, so an acknowledged write
    // survives a power loss too, not only a killed process (NORMAL would
    // already survive kill -9, since the WAL is in the OS's cache, but not
    // an OS crash). Group commit pays one sync per batch, not per put.
    connection
        .pragma_update(None, "synchronous", "FULL")
        .translated()?;
    connection.set_prepared_statement_cache_capacity(128);
    register(&connection).translated()?;
    Ok(connection)
}

/// Runs a statement without parameters or rows (transaction control),
/// prepared once per connection: parsing `BEGIN`, `COMMIT` and the like for
/// every command was a fifth of the writer's time.
///
/// # Errors
///
/// As SQLite refuses, translated.
pub fn run_cached(conn: &Connection, sql: &str) -> Result<(), DocumentError> {
    conn.prepare_cached(sql)
        .and_then(|mut statement| statement.execute([]))
        .map(drop)
        .translated()
}

/// Puts the file in WAL mode and creates the tables when missing.
///
/// # Errors
///
/// [`DocumentError::Storage`] when SQLite refuses.
pub fn initialize(connection: &Connection) -> Result<(), DocumentError> {
    let mode: String = connection
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .translated()?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(DocumentError::Storage(format!(
            "Cannot initialize SQLite document storage: journal mode {mode}, not WAL"
        )));
    }
    connection
        .execute_batch(&format!("BEGIN IMMEDIATE; {SCHEMA} COMMIT;"))
        .translated()
}

/// Makes the commits of `connection` checkpoint the WAL once it holds
/// `pages` pages (see [`super::DEFAULT_CHECKPOINT_PAGES`]).
///
/// # Errors
///
/// [`DocumentError::Storage`] when SQLite refuses.
pub fn checkpoint_after(connection: &Connection, pages: u32) -> Result<(), DocumentError> {
    connection
        .pragma_update(None, "wal_autocheckpoint", pages)
        .translated()
}

/// A text argument as `str`, `None` for NULL.
fn text_arg<'a>(args: &'a Args<'_>, index: usize) -> Result<Option<&'a str>, String> {
    text_bytes_arg(args, index)?
        .map(std::str::from_utf8)
        .transpose()
        .map_err(|e| e.to_string())
}

/// A text argument's bytes, its UTF-8 not checked yet.
fn text_bytes_arg<'a>(args: &'a Args<'_>, index: usize) -> Result<Option<&'a [u8]>, String> {
    args.text(index)
        .map_err(|NotText| "expected a text argument".to_owned())
}

/// Registers `document_field`, `document_json_key_v2`, `document_json_key`
/// (older releases' indexes), `document_numeric_text`, `document_bytes_key`
/// and the `document_numeric` collation, with the reference's semantics.
/// Through SQLite's C interface (`abi-sqlite-functions`): a put calls them
/// ~40 times from its index expressions and B-tree steps, and `rusqlite`'s
/// wrapping of each call cost more than the call's own work.
fn register(connection: &Connection) -> rusqlite::Result<()> {
    // Each is deterministic (SQLite allows it in index expressions) and
    // innocuous (a pure function of its arguments).
    register_text_function(connection, "document_field", 2, |args| {
        match (text_bytes_arg(args, 0)?, text_arg(args, 1)?) {
            (Some(raw), Some(key)) => sqlite_field_bytes(raw, key),
            _ => Err("document_field: expected text arguments".to_owned()),
        }
    })?;
    register_text_function(connection, "document_json_key_v2", 1, |args| {
        sqlite_json_key(text_arg(args, 0)?)
    })?;
    register_text_function(connection, "document_json_key", 1, |args| {
        sqlite_legacy_json_key(text_arg(args, 0)?)
    })?;
    register_text_function(
        connection,
        "document_numeric_text",
        1,
        |args| match text_arg(args, 0)? {
            Some(raw) => sqlite_numeric_text(raw).map(Some),
            None => Err("document_numeric_text: expected a text argument".to_owned()),
        },
    )?;
    register_text_function(connection, "document_bytes_key", 1, |args| {
        sqlite_bytes_key(text_arg(args, 0)?).map(Some)
    })?;
    register_collation(connection, "document_numeric", compare_numeric_text)?;
    Ok(())
}

/// Field-name literals quoted by SQLite itself (`SELECT quote(?1)`), cached:
/// the compiler's [`QuoteLiteral`] for SQLite.
pub struct SqliteQuote {
    state: Mutex<QuoteState>,
}

struct QuoteState {
    connection: Connection,
    cache: HashMap<String, String>,
}

/// Quoted names kept at most; past it the cache starts again (names are few
/// in practice: fields, namespaces, collections).
const QUOTE_CACHE_LIMIT: usize = 4096;

impl std::fmt::Debug for SqliteQuote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteQuote").finish_non_exhaustive()
    }
}

impl SqliteQuote {
    /// A quoter on its own in-memory connection.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Storage`] when SQLite cannot open one.
    pub fn new() -> Result<Self, DocumentError> {
        Ok(Self {
            state: Mutex::new(QuoteState {
                connection: Connection::open_in_memory().translated()?,
                cache: HashMap::new(),
            }),
        })
    }
}

impl QuoteLiteral for SqliteQuote {
    fn quote_literal(&self, value: &str) -> Result<String, DocumentError> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| DocumentError::Storage("SQLite literal quoting failed".to_owned()))?;
        if let Some(quoted) = state.cache.get(value) {
            return Ok(quoted.clone());
        }
        let quoted: String = state
            .connection
            .query_row("SELECT quote(?1)", [value], |row| row.get(0))
            .translated()?;
        if state.cache.len() >= QUOTE_CACHE_LIMIT {
            state.cache.clear();
        }
        state.cache.insert(value.to_owned(), quoted.clone());
        Ok(quoted)
    }
}
