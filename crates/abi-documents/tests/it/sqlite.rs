//! The SQLite adapter: the conformance suite on real files, 64 concurrent
//! writers, and durability across `kill -9`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use abi_document_model::{CollectionSpec, DocumentError, DocumentStore, FieldSpec, Value, Write};
use abi_documents::store::{SqliteConfig, SqliteStore};

use crate::conformance::{self, Backend, data};

/// SQLite files in temp dirs.
pub struct Sqlite;

impl Backend for Sqlite {
    type Db = tempfile::TempDir;
    type Store = SqliteStore;

    async fn database(&self) -> tempfile::TempDir {
        tempfile::tempdir().expect("temp dir")
    }

    async fn open(&self, db: &tempfile::TempDir) -> SqliteStore {
        SqliteStore::open(SqliteConfig::new(db.path().join("documents.sqlite")))
            .await
            .expect("open sqlite store")
    }
}

conformance::conformance_tests!(&Sqlite);

/// 64 concurrent writers: every put answered correctly, none "database is
/// locked"; prints throughput and latency percentiles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_writers_all_succeed() {
    let (_db, store) = conformance::docs(&Sqlite).await;
    let store = Arc::new(store);
    const WRITERS: usize = 64;
    const PUTS: usize = 50;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..WRITERS {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(PUTS);
            for i in 0..PUTS {
                let t = Instant::now();
                let id = format!("w{w}-{i}");
                let doc = store
                    .put(
                        "module",
                        "records",
                        &id,
                        data([("n", Value::Int(i as i64))]),
                        None,
                    )
                    .await
                    .expect("every put succeeds");
                assert_eq!(doc.version, 1);
                latencies.push(t.elapsed());
            }
            latencies
        });
    }
    let mut latencies: Vec<Duration> = tasks.join_all().await.concat();
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize];
    eprintln!(
        "sqlite: {} puts by {WRITERS} writers in {elapsed:?}: {:.0} puts/s, p50 {:?}, p99 {:?}",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.99)
    );
    assert_eq!(
        store.count("module", "records", vec![]).await,
        Ok((WRITERS * PUTS) as i64)
    );
}

/// `count` puts to `module.records`, ids `<prefix>-<i>`, each a `body` of
/// `body_len` bytes.
fn puts_of(prefix: &str, count: usize, body_len: usize) -> Vec<Write> {
    let body = "x".repeat(body_len);
    (0..count)
        .map(|i| Write::Put {
            namespace: "module".into(),
            collection: "records".into(),
            id: format!("{prefix}-{i}"),
            data: data([("body", Value::String(body.clone()))]),
            if_version: None,
        })
        .collect()
}

/// The store writes through `abi-sqlite-wal`: a commit's WAL frames, two
/// writes each as SQLite asks, reach the file in a write or two. (The
/// counters are the test process's; every store in it coalesces.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commits_wal_frames_reach_the_file_together() {
    let (_db, store) = conformance::docs(&Sqlite).await;
    let writes = puts_of("together", 300, 1024);
    let before = abi_sqlite_wal::wal_writes();
    store.batch(writes).await.expect("batch stored");
    let after = abi_sqlite_wal::wal_writes();
    let (asked, written) = (after.asked - before.asked, after.written - before.written);
    // ~100 frames asked as ~200 writes; 31 frames fit in one write.
    assert!(asked >= 150, "{asked} WAL writes went through the VFS");
    assert!(
        written * 4 <= asked,
        "{written} of {asked} WAL writes reached the file one by one"
    );
}

/// Pages in the WAL of the store at `path` (its file's size over a
/// frame's: a 24-byte header and a 4 KiB page).
fn wal_pages(path: &std::path::Path) -> u64 {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let len = std::fs::metadata(&wal).map_or(0, |m| m.len());
    len / (24 + 4096)
}

/// Writes ~3,000 pages through a store whose writer checkpoints after
/// `checkpoint_pages` (the store's default when `None`): twelve batches of
/// fifty 16 KiB documents. Answers the WAL's size in pages, which a
/// checkpoint does not shrink (the next commit writes over it from the
/// start), so it tells the most the WAL held.
async fn wal_pages_after_writes(checkpoint_pages: Option<u32>) -> u64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("documents.sqlite");
    let mut config = SqliteConfig::new(&path);
    if let Some(pages) = checkpoint_pages {
        config.checkpoint_pages = pages;
    }
    let store = SqliteStore::open(config).await.expect("open");
    store
        .ensure_collection("module", CollectionSpec::new("records"))
        .await
        .expect("declare");
    for b in 0..12 {
        let writes = puts_of(&format!("b{b}"), 50, 16 * 1024);
        store.batch(writes).await.expect("batch stored");
    }
    wal_pages(&path)
}

/// The writer checkpoints when the WAL reaches its configured size, not at
/// SQLite's 1,000 pages: with the default the ~3,000 pages written all stay
/// in the WAL; with 500 the WAL is copied back and reused, never holding
/// much more than 500 pages and one batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_checkpoints_at_its_configured_wal_size() {
    const { assert!(abi_documents::store::sqlite::DEFAULT_CHECKPOINT_PAGES > 3_000) };
    let default = wal_pages_after_writes(None).await;
    assert!(
        default > 2_500,
        "no checkpoint before the default size: {default} pages"
    );
    let small = wal_pages_after_writes(Some(500)).await;
    assert!(
        small < 1_000,
        "checkpointed at 500 pages: the WAL held {small} pages at most"
    );
}

/// Puts that fail inside a shared commit are undone alone: 64 concurrent
/// updates, half of them taking an email another document holds (a unique
/// violation raised by the write itself, after the row was found), half
/// succeeding. The failed ones leave their document as it was, the others
/// commit; the writer groups them into common transactions, where a single
/// put runs without a savepoint of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_puts_in_a_shared_commit_are_undone_alone() {
    let db = Sqlite.database().await;
    let store = Arc::new(Sqlite.open(&db).await);
    let spec = CollectionSpec::new("people").field(FieldSpec::new("email", "string").unique());
    store.ensure_collection("module", spec).await.unwrap();
    let person =
        |email: String, n: i64| data([("email", Value::String(email)), ("n", Value::Int(n))]);
    const PEOPLE: usize = 64;
    store
        .put(
            "module",
            "people",
            "holder",
            person("taken".into(), 0),
            None,
        )
        .await
        .unwrap();
    for i in 0..PEOPLE {
        let id = format!("p{i}");
        store
            .put("module", "people", &id, person(format!("e{i}"), 1), None)
            .await
            .unwrap();
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..PEOPLE {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let email = if i % 2 == 0 {
                format!("new{i}")
            } else {
                "taken".to_owned()
            };
            let id = format!("p{i}");
            let outcome = store
                .put("module", "people", &id, person(email, 2), Some(1))
                .await;
            (i, outcome)
        });
    }
    for (i, outcome) in tasks.join_all().await {
        if i % 2 == 0 {
            assert_eq!(outcome.map(|d| d.version), Ok(2), "p{i} is updated");
        } else {
            assert!(
                matches!(outcome, Err(DocumentError::UniqueViolation(_))),
                "p{i}: {outcome:?}"
            );
        }
    }
    for i in 0..PEOPLE {
        let id = format!("p{i}");
        let doc = store.get("module", "people", &id).await.unwrap();
        let (version, email, n) = if i % 2 == 0 {
            (2, format!("new{i}"), 2)
        } else {
            (1, format!("e{i}"), 1)
        };
        assert_eq!(doc.version, version, "{id}");
        assert_eq!(doc.data, person(email, n), "{id}");
    }
}

const CHILD_ENV: &str = "ABI_DOCUMENTS_DURABILITY_CHILD";

/// The child half of [`acknowledged_puts_survive_kill_9`]: writes puts
/// until killed, printing each id once its put was acknowledged. Without
/// the variable it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durability_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = Arc::new(
        SqliteStore::open(SqliteConfig::new(path))
            .await
            .expect("open"),
    );
    store
        .ensure_collection("module", CollectionSpec::new("records"))
        .await
        .expect("ensure");
    println!("ready");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    for w in 0..16 {
        let (store, tx) = (Arc::clone(&store), tx.clone());
        tokio::spawn(async move {
            for i in 0.. {
                let id = format!("w{w}-{i}");
                if store
                    .put("module", "records", &id, data([]), None)
                    .await
                    .is_ok()
                {
                    let _ = tx.send(id);
                }
            }
        });
    }
    while let Some(id) = rx.recv().await {
        println!("ack {id}");
    }
}

/// Every put the child acknowledged is there after `kill -9` and reopening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_puts_survive_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("documents.sqlite");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "sqlite::durability_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let acked = tokio::task::spawn_blocking(move || {
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(id) = line.strip_prefix("ack ") {
                acked.push(id.to_owned());
                if acked.len() == 2000 {
                    break;
                }
            }
        }
        acked
    })
    .await
    .expect("reader");
    // Child::kill sends SIGKILL: no destructor, no flush, no checkpoint.
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    assert_eq!(acked.len(), 2000, "the child acknowledged puts");
    let store = SqliteStore::open(SqliteConfig::new(&path))
        .await
        .expect("reopen");
    for id in &acked {
        store
            .get("module", "records", id)
            .await
            .expect("acknowledged put survived");
    }
}

/// A read that starts once a put's early word was heard sees that put,
/// though its commit and sync may still be under way: whoever heard the
/// word may already act on it (a job host starts the run), and an observer
/// must not then read the record from before. Twenty rounds, each word
/// answered by a get, a find and a count at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_after_an_early_word_see_the_decided_put() {
    use abi_document_model::{Decided, FindQuery, Predicate};

    let db = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(
        SqliteStore::open(SqliteConfig::new(db.path().join("documents.sqlite")))
            .await
            .expect("open"),
    );
    store
        .ensure_collection(
            "ns",
            CollectionSpec::new("runs").field(FieldSpec::new("status", "string").indexed()),
        )
        .await
        .expect("ensure");
    let running = || vec![Predicate::new("status", "eq", "RUNNING")];
    for round in 0..20_i64 {
        let id = format!("run{round}");
        store
            .put(
                "ns",
                "runs",
                &id,
                data([("status", Value::from("QUEUED"))]),
                Some(0),
            )
            .await
            .expect("queued");
        let (word, heard) = tokio::sync::oneshot::channel();
        let writing = tokio::spawn({
            let (store, id) = (Arc::clone(&store), id.clone());
            async move {
                let decided = Decided::new(move |document| {
                    let _ = word.send(document.version);
                });
                store
                    .put_deciding(
                        "ns",
                        "runs",
                        &id,
                        data([("status", Value::from("RUNNING"))]),
                        Some(1),
                        decided,
                    )
                    .await
            }
        });
        assert_eq!(heard.await.expect("the word"), 2);
        let (got, found, counted) = tokio::join!(
            store.get("ns", "runs", &id),
            store.find(
                "ns",
                "runs",
                FindQuery {
                    where_: running(),
                    limit: 100,
                    ..FindQuery::default()
                }
            ),
            store.count("ns", "runs", running()),
        );
        let got = got.expect("get");
        assert_eq!(
            (got.version, got.data.get("status")),
            (2, Some(&Value::from("RUNNING"))),
            "round {round}"
        );
        let found = found.expect("find");
        assert!(found.items.iter().any(|d| d.id == id), "round {round}");
        assert_eq!(counted.expect("count"), round + 1, "round {round}");
        writing.await.expect("task").expect("running");
    }
}
