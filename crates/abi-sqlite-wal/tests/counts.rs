//! How many WAL writes reach the file: alone in its process, since the
//! counters are the process's.

// Tests fail loudly on purpose: an unexpected error is the test failing.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

#[test]
fn a_commits_frames_reach_the_file_in_one_write() {
    let dir = tempfile::tempdir().expect("temp dir");
    let conn = common::open_coalescing(
        &dir.path().join("counted.db"),
        "CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL); CREATE INDEX t_body ON t (body)",
    );

    let before = abi_sqlite_wal::wal_writes();
    for commit in 0..20_i64 {
        let tx = conn.unchecked_transaction().expect("begin");
        common::insert(&tx, commit * 10..(commit + 1) * 10, |id| {
            format!("{:0>200}", id * 7919 % 1000)
        });
        tx.commit().expect("commit");
    }
    let after = abi_sqlite_wal::wal_writes();
    let asked = after.asked - before.asked;
    let written = after.written - before.written;
    // Each commit's frames, a header and a page each, two pages or more per
    // commit (the table's and the index's), leave as one write.
    assert!(asked >= 20 * 4, "SQLite asked for {asked} writes");
    assert_eq!(
        written, 20,
        "{written} writes reached the file for {asked} asked"
    );
}
