//! The VFS against real SQLite files: what other connections read, what a
//! large transaction does, what a killed process leaves.

// Tests fail loudly on purpose: an unexpected error is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use rusqlite::Connection;

use common::insert;

/// The child process's role: set to a database path, `child_writer` commits
/// rows until it is killed.
const CHILD_DB: &str = "ABI_SQLITE_WAL_CHILD_DB";

fn open_coalescing(path: &Path) -> Connection {
    common::open_coalescing(
        path,
        "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)",
    )
}

/// A connection through SQLite's own VFS, as another process would read.
fn open_plain(path: &Path) -> Connection {
    Connection::open(path).expect("opened plain")
}

fn body(id: i64) -> Vec<u8> {
    (0..700).map(|k| (id * 31 + k) as u8).collect()
}

fn check_rows(conn: &Connection, count: i64) {
    let stored: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .expect("count");
    assert_eq!(stored, count);
    let mut statement = conn
        .prepare("SELECT id, body FROM t ORDER BY id")
        .expect("select");
    let rows = statement
        .query_map([], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, Vec<u8>>(1)?))
        })
        .expect("rows");
    for row in rows {
        let (id, stored) = row.expect("row");
        assert_eq!(stored, body(id), "row {id}");
    }
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity check");
    assert_eq!(check, "ok");
}

#[test]
fn other_connections_read_every_commit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("coalesced.db");
    let writer = open_coalescing(&path);
    // A reader through SQLite's own VFS, open before the writes.
    let reader = open_plain(&path);
    check_rows(&reader, 0);

    for commit in 0..20_i64 {
        let tx = writer.unchecked_transaction().expect("begin");
        insert(&tx, commit * 25..(commit + 1) * 25, body);
        tx.commit().expect("commit");
        check_rows(&reader, (commit + 1) * 25);
    }
    drop(writer);
    check_rows(&open_plain(&path), 500);
}

#[test]
fn a_transaction_larger_than_the_cache_spills_reads_back_and_rolls_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("spilled.db");
    let writer = open_coalescing(&path);
    // A few pages of cache: a big transaction spills frames to the WAL before
    // its commit and reads them back.
    writer
        .pragma_update(None, "cache_size", 8)
        .expect("cache size");
    let tx = writer.unchecked_transaction().expect("begin");
    insert(&tx, 0..3_000, body);
    tx.rollback().expect("rollback");
    check_rows(&open_plain(&path), 0);

    // The same rows committed: more than the hold limit in one commit.
    let tx = writer.unchecked_transaction().expect("begin");
    insert(&tx, 0..3_000, body);
    tx.commit().expect("commit");
    check_rows(&writer, 3_000);
    check_rows(&open_plain(&path), 3_000);
    writer
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .expect("checkpoint");
    drop(writer);
    check_rows(&open_plain(&path), 3_000);
}

/// Not a test on its own: the child process of the next test, run when
/// [`CHILD_DB`] names a database. Commits one row at a time and reports each
/// commit on stdout.
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD_DB) else {
        return;
    };
    let conn = open_coalescing(Path::new(&path));
    for id in 0.. {
        let tx = conn.unchecked_transaction().expect("begin");
        insert(&tx, id..id + 1, body);
        tx.commit().expect("commit");
        println!("committed {id}");
    }
}

#[test]
fn every_commit_a_killed_process_reported_is_in_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("killed.db");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "child_writer",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DB, &path)
        .stdout(Stdio::piped())
        .spawn()
        .expect("child");
    let stdout = child.stdout.take().expect("child's stdout");
    let mut reported = -1_i64;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("line");
        if let Some(id) = line.strip_prefix("committed ") {
            reported = id.parse().expect("id");
            if reported >= 200 {
                break;
            }
        }
    }
    // SIGKILL mid-stream: nothing held in the process's memory survives it.
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    assert!(reported >= 200, "the child reported {reported}");
    let conn = open_plain(&path);
    let stored: i64 = conn
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .expect("count");
    assert!(
        stored > reported,
        "{stored} rows, commit {reported} reported"
    );
    check_rows(&conn, stored);
}
