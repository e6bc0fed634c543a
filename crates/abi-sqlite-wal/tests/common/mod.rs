//! What the VFS's tests share: a connection through it, set up as the
//! document service sets its own (WAL, `synchronous=FULL`).

use std::ops::Range;
use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};

/// A connection to `path` through the VFS, in WAL mode with
/// `synchronous=FULL`, with `schema` created.
pub fn open_coalescing(path: &Path, schema: &str) -> Connection {
    let vfs = abi_sqlite_wal::register().expect("registered");
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
    let conn = Connection::open_with_flags_and_vfs(path, flags, vfs).expect("opened");
    conn.pragma_update(None, "journal_mode", "WAL")
        .expect("WAL");
    conn.pragma_update(None, "synchronous", "FULL")
        .expect("FULL");
    conn.execute_batch(schema).expect("schema");
    conn
}

/// Inserts a row of `t (id, body)` for each id, `body(id)` its body.
pub fn insert<B: rusqlite::ToSql>(conn: &Connection, ids: Range<i64>, body: impl Fn(i64) -> B) {
    let mut statement = conn
        .prepare_cached("INSERT INTO t (id, body) VALUES (?1, ?2)")
        .expect("insert prepared");
    for id in ids {
        statement.execute(params![id, body(id)]).expect("insert");
    }
}
