//! The registrations on a real SQLite file: arguments, answers, errors,
//! panics, and a collation ordering an index.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::cmp::Ordering;

use abi_sqlite_functions::{NotText, register_collation, register_text_function};
use rusqlite::Connection;

fn connection() -> (tempfile::TempDir, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let connection = Connection::open(dir.path().join("functions.sqlite")).unwrap();
    (dir, connection)
}

/// `describe(x)`: "null", "text:<x>", or an error for another type; an
/// error when the text is "fail"; a panic when it is "panic"; NULL when it
/// is "nothing".
fn register_describe(connection: &Connection) {
    register_text_function(connection, "describe", 1, |args| {
        assert_eq!(args.len(), 1);
        match args.text(0) {
            Err(NotText) => Err("describe: expected a text argument".to_owned()),
            Ok(None) => Ok(Some("null".to_owned())),
            Ok(Some(b"fail")) => Err("describe: asked to fail".to_owned()),
            Ok(Some(b"panic")) => panic!("asked to panic"),
            Ok(Some(b"nothing")) => Ok(None),
            Ok(Some(bytes)) => Ok(Some(format!("text:{}", String::from_utf8_lossy(bytes)))),
        }
    })
    .unwrap();
}

fn describe(connection: &Connection, sql_argument: &str) -> rusqlite::Result<Option<String>> {
    connection.query_row(&format!("SELECT describe({sql_argument})"), [], |row| {
        row.get(0)
    })
}

#[test]
fn a_function_sees_text_and_null_and_answers_text_or_null() {
    let (_dir, connection) = connection();
    register_describe(&connection);
    assert_eq!(
        describe(&connection, "'abc'").unwrap().as_deref(),
        Some("text:abc")
    );
    assert_eq!(
        describe(&connection, "''").unwrap().as_deref(),
        Some("text:")
    );
    assert_eq!(
        describe(&connection, "'né ✓'").unwrap().as_deref(),
        Some("text:né ✓")
    );
    assert_eq!(
        describe(&connection, "NULL").unwrap().as_deref(),
        Some("null")
    );
    assert_eq!(describe(&connection, "'nothing'").unwrap(), None);
}

/// A text read from a stored row (not NUL-terminated in SQLite's record)
/// and a text of a UTF-16 database both reach the function as their UTF-8
/// bytes.
#[test]
fn texts_of_stored_rows_reach_the_function_as_utf8_in_either_encoding() {
    for encoding in ["UTF-8", "UTF-16le", "UTF-16be"] {
        let (_dir, connection) = connection();
        connection
            .execute_batch(&format!("PRAGMA encoding = '{encoding}';"))
            .unwrap();
        register_describe(&connection);
        let long = "é".repeat(300);
        connection
            .execute_batch(&format!(
                "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT, w TEXT);
                 INSERT INTO t VALUES (1, 'abc', 'né ✓'), (2, '{long}', ''), (3, NULL, 'x');"
            ))
            .unwrap();
        let mut statement = connection
            .prepare("SELECT describe(v), describe(w) FROM t ORDER BY k")
            .unwrap();
        let rows: Vec<(String, String)> = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            rows,
            [
                ("text:abc".to_owned(), "text:né ✓".to_owned()),
                (format!("text:{long}"), "text:".to_owned()),
                ("null".to_owned(), "text:x".to_owned()),
            ],
            "{encoding}"
        );
    }
}

#[test]
fn another_type_an_error_and_a_panic_are_sql_errors_with_their_message() {
    let (_dir, connection) = connection();
    register_describe(&connection);
    for (argument, message) in [
        ("1", "describe: expected a text argument"),
        ("x'00'", "describe: expected a text argument"),
        ("'fail'", "describe: asked to fail"),
        ("'panic'", "a SQL function panicked"),
    ] {
        match describe(&connection, argument) {
            Err(rusqlite::Error::SqliteFailure(error, Some(text))) => {
                assert_eq!(
                    error.extended_code,
                    rusqlite::ffi::SQLITE_ERROR,
                    "{argument}"
                );
                assert_eq!(text, message, "{argument}");
            }
            other => panic!("{argument}: expected an SQL error, got {other:?}"),
        }
    }
    // The connection is still usable after a panic was caught.
    assert_eq!(
        describe(&connection, "'ok'").unwrap().as_deref(),
        Some("text:ok")
    );
}

#[test]
fn two_arguments_and_a_missing_index_is_not_text() {
    let (_dir, connection) = connection();
    register_text_function(&connection, "pair", 2, |args| {
        let first = args
            .text(0)
            .map_err(|_| "first".to_owned())?
            .unwrap_or_default();
        let second = args
            .text(1)
            .map_err(|_| "second".to_owned())?
            .unwrap_or_default();
        assert_eq!(args.text(2), Err(NotText));
        Ok(Some(format!(
            "{}|{}",
            String::from_utf8_lossy(first),
            String::from_utf8_lossy(second)
        )))
    })
    .unwrap();
    let answer: String = connection
        .query_row("SELECT pair('a', 'b')", [], |row| row.get(0))
        .unwrap();
    assert_eq!(answer, "a|b");
}

#[test]
fn a_deterministic_function_serves_an_index_expression() {
    let (_dir, connection) = connection();
    register_text_function(&connection, "upper_ascii", 1, |args| {
        Ok(args
            .text(0)
            .map_err(|_| "not text".to_owned())?
            .map(|bytes| String::from_utf8_lossy(bytes).to_ascii_uppercase()))
    })
    .unwrap();
    connection
        .execute_batch(
            "CREATE TABLE t (v TEXT); CREATE INDEX t_upper ON t (upper_ascii(v));
             INSERT INTO t VALUES ('b'), ('a'), ('c');",
        )
        .unwrap();
    let found: String = connection
        .query_row("SELECT v FROM t WHERE upper_ascii(v) = 'B'", [], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(found, "b");
}

#[test]
fn a_collation_orders_by_its_comparison_of_the_bytes() {
    let (_dir, connection) = connection();
    // By length, then bytes: "10" after "9".
    register_collation(&connection, "by_length", |left, right| {
        left.len().cmp(&right.len()).then_with(|| left.cmp(right))
    })
    .unwrap();
    connection
        .execute_batch(
            "CREATE TABLE n (v TEXT); CREATE INDEX n_v ON n (v COLLATE by_length);
             INSERT INTO n VALUES ('10'), ('9'), ('100'), (''), ('2');",
        )
        .unwrap();
    let mut statement = connection
        .prepare("SELECT v FROM n ORDER BY v COLLATE by_length")
        .unwrap();
    let ordered: Vec<String> = statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ordered, ["", "2", "9", "10", "100"]);
}

#[test]
fn a_collation_that_panics_sorts_left_first_and_does_not_unwind() {
    let (_dir, connection) = connection();
    register_collation(&connection, "broken", |_: &[u8], _: &[u8]| -> Ordering {
        panic!("asked to panic")
    })
    .unwrap();
    let less: bool = connection
        .query_row("SELECT 'b' < 'a' COLLATE broken", [], |row| row.get(0))
        .unwrap();
    assert!(less);
}

#[test]
fn a_name_with_a_nul_byte_is_refused() {
    let (_dir, connection) = connection();
    assert!(register_text_function(&connection, "a\0b", 1, |_| Ok(None::<String>)).is_err());
    assert!(register_collation(&connection, "a\0b", |l: &[u8], r: &[u8]| l.cmp(r)).is_err());
}
