//! The PostgreSQL adapter's own guarantees, against a real server: several
//! stores (as several server processes) on one database, a server crash
//! under writes, and 64 concurrent writers.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use abi_document_model::{CollectionSpec, Data, DocumentError, DocumentStore, FieldSpec, Value};
use abi_documents::store::postgres::{PostgresConfig, PostgresStore};
use abi_test_support::postgres::PostgresServer;
use abi_test_support::unique_name;

/// A schema no other test uses.
pub fn schema() -> String {
    unique_name("t").to_lowercase()
}

/// A store on `server` in `schema`, with the defaults otherwise.
pub async fn open(server: &PostgresServer, schema: &str) -> PostgresStore {
    let mut config = PostgresConfig::new(server.url());
    config.schema = schema.to_owned();
    PostgresStore::open(config)
        .await
        .expect("open the PostgreSQL store")
}

fn counter(n: i64) -> Data {
    Data::from([("n".to_owned(), Value::Int(n))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_booting_together_on_a_fresh_schema_all_open() {
    let server = PostgresServer::start().await;
    let schema = schema();
    // The advisory lock serializes CREATE SCHEMA/TABLE IF NOT EXISTS, which
    // race into unique violations on the system catalogs without it.
    let opened = futures::future::join_all((0..6).map(|_| open(&server, &schema))).await;
    for store in &opened {
        assert_eq!(
            store.collections("module").await.unwrap(),
            Vec::<String>::new()
        );
    }
}

/// A put checks its data against the spec it last saw and writes in one
/// statement only if the catalog still holds that spec: a spec changed or
/// a collection dropped by another store (another server process) is
/// found by the write itself, which then checks against the new spec or
/// refuses, and writes nothing either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_checks_against_the_spec_another_store_just_declared() {
    let server = PostgresServer::start().await;
    let schema = schema();
    let (a, b) = (open(&server, &schema).await, open(&server, &schema).await);
    a.ensure_collection("module", CollectionSpec::new("records"))
        .await
        .unwrap();
    let first = a.put("module", "records", "one", counter(1), Some(0)).await;
    assert_eq!(first.unwrap().version, 1, "a knows the spec now");
    b.ensure_collection(
        "module",
        CollectionSpec::new("records").field(FieldSpec::new("n", "int").indexed()),
    )
    .await
    .unwrap();
    let text = Data::from([("n".to_owned(), Value::from("not a number"))]);
    let refused = a.put("module", "records", "two", text, Some(0)).await;
    assert!(
        matches!(refused, Err(DocumentError::InvalidArgument(_))),
        "checked against b's spec: {refused:?}"
    );
    assert!(
        matches!(
            b.get("module", "records", "two").await,
            Err(DocumentError::DocumentNotFound(_))
        ),
        "nothing written"
    );
    let updated = a.put("module", "records", "one", counter(2), Some(1)).await;
    assert_eq!(updated.unwrap().version, 2);
    let conflict = a.put("module", "records", "one", counter(3), Some(1)).await;
    assert!(
        matches!(conflict, Err(DocumentError::VersionConflict(_))),
        "{conflict:?}"
    );
    b.drop_collection("module", "records").await.unwrap();
    let gone = a.put("module", "records", "three", counter(3), None).await;
    assert!(
        matches!(gone, Err(DocumentError::CollectionNotFound(_))),
        "{gone:?}"
    );
    assert_eq!(b.collections("module").await.unwrap(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_racing_compare_and_swap_have_one_winner_per_version() {
    const WRITERS: usize = 8;
    const WINS_EACH: usize = 25;
    let server = PostgresServer::start().await;
    let schema = schema();
    let stores = [
        Arc::new(open(&server, &schema).await),
        Arc::new(open(&server, &schema).await),
    ];
    stores[0]
        .ensure_collection("module", CollectionSpec::new("records"))
        .await
        .unwrap();
    let first = stores[1]
        .put("module", "records", "doc", counter(0), Some(0))
        .await
        .unwrap();
    assert_eq!(first.version, 1);

    let tasks = (0..WRITERS).map(|w| {
        let store = stores[w % 2].clone();
        tokio::spawn(async move {
            let mut won = Vec::new();
            let mut conflicts = 0usize;
            while won.len() < WINS_EACH {
                let current = store.get("module", "records", "doc").await.unwrap();
                let Some(Value::Int(n)) = current.data.get("n") else {
                    panic!("counter missing: {current:?}");
                };
                match store
                    .put(
                        "module",
                        "records",
                        "doc",
                        counter(n + 1),
                        Some(current.version),
                    )
                    .await
                {
                    Ok(doc) => {
                        assert_eq!(doc.version, current.version + 1);
                        won.push(doc.version);
                    }
                    Err(DocumentError::VersionConflict(_)) => conflicts += 1,
                    Err(e) => panic!("put failed: {e:?}"),
                }
            }
            (won, conflicts)
        })
    });
    let mut versions = BTreeSet::new();
    let mut conflicts = 0;
    for result in futures::future::join_all(tasks).await {
        let (won, lost) = result.unwrap();
        conflicts += lost;
        for version in won {
            assert!(versions.insert(version), "version {version} won twice");
        }
    }
    let total = (WRITERS * WINS_EACH) as i64;
    // Every version from 2 to total + 1 was won exactly once, and no
    // increment was lost.
    assert_eq!(versions, (2..=total + 1).collect::<BTreeSet<i64>>());
    let last = stores[0].get("module", "records", "doc").await.unwrap();
    assert_eq!(last.version, total + 1);
    assert_eq!(last.data.get("n"), Some(&Value::Int(total)));
    assert!(conflicts > 0, "the writers never raced");
    eprintln!("cas race: {total} wins, {conflicts} conflicts, across two pools");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_ensured_concurrently_by_two_stores_is_declared_once() {
    let server = PostgresServer::start().await;
    let schema = schema();
    let stores = [
        Arc::new(open(&server, &schema).await),
        Arc::new(open(&server, &schema).await),
    ];
    let specs = [
        CollectionSpec::new("records").field(FieldSpec::new("email", "string").unique()),
        CollectionSpec::new("records").field(FieldSpec::new("age", "int").indexed()),
        CollectionSpec::new("records").unique_together(["team", "rank"]),
    ];
    let tasks = (0..12).map(|i| {
        let store = stores[i % 2].clone();
        let spec = specs[i % 3].clone();
        tokio::spawn(async move { store.ensure_collection("module", spec).await })
    });
    for result in futures::future::join_all(tasks).await {
        result
            .unwrap()
            .expect("a concurrent ensure_collection failed");
    }
    for store in &stores {
        assert_eq!(
            store.collections("module").await.unwrap(),
            vec!["records".to_owned()]
        );
        let spec = store.collection_spec("module", "records").await.unwrap();
        let mut names: Vec<&str> = spec.fields.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["age", "email"]);
        assert_eq!(
            spec.unique_together,
            vec![vec!["team".to_owned(), "rank".to_owned()]]
        );
    }
    let email = |e: &str| Data::from([("email".to_owned(), Value::String(e.to_owned()))]);
    stores[0]
        .put("module", "records", "a", email("x@y"), None)
        .await
        .unwrap();
    let refused = stores[1]
        .put("module", "records", "b", email("x@y"), None)
        .await;
    assert!(
        matches!(refused, Err(DocumentError::UniqueViolation(_))),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_puts_survive_kill9_and_the_pool_recovers() {
    const WRITERS: usize = 8;
    let mut server = PostgresServer::start().await;
    let schema = schema();
    let store = Arc::new(open(&server, &schema).await);
    store
        .ensure_collection("module", CollectionSpec::new("records"))
        .await
        .unwrap();

    // Phase 1: write until the crash; every Ok is recorded.
    let (crashed_tx, crashed_rx) = tokio::sync::watch::channel(false);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            let mut crashed = crashed_rx.clone();
            tokio::spawn(async move {
                let mut acked = Vec::new();
                let mut failed = 0usize;
                for i in 0.. {
                    let id = format!("w{w}-{i}");
                    match store.put("module", "records", &id, counter(i), None).await {
                        Ok(doc) => acked.push((id, doc.version)),
                        Err(DocumentError::Storage(_)) => {
                            failed += 1;
                            // Stop at the first failure once the server is
                            // down; before the crash a failure is a bug.
                            assert!(*crashed.borrow_and_update(), "put failed before the crash");
                            break;
                        }
                        Err(e) => panic!("put failed: {e:?}"),
                    }
                }
                (acked, failed)
            })
        })
        .collect();
    let target = 400;
    abi_test_support::wait_until(Duration::from_secs(60), || async {
        store
            .count("module", "records", Vec::new())
            .await
            .unwrap_or(0)
            >= target
    })
    .await
    .expect("writers made progress");
    crashed_tx.send(true).unwrap();
    let killed_at = Instant::now();
    server.kill9();
    let mut acked = Vec::new();
    for writer in writers {
        let (a, _) = writer.await.unwrap();
        acked.extend(a);
    }
    let down = store.get("module", "records", &acked[0].0).await;
    assert!(matches!(down, Err(DocumentError::Storage(_))), "{down:?}");

    // Phase 2: the same store, no reopening, once the server is back.
    server.restart().await;
    let restarted_at = Instant::now();
    let mut failures_after_restart = 0;
    let first_ok = loop {
        match store
            .put("module", "records", "after-restart", counter(0), None)
            .await
        {
            Ok(_) => break Instant::now(),
            Err(DocumentError::Storage(_)) if restarted_at.elapsed() < Duration::from_secs(10) => {
                failures_after_restart += 1;
            }
            Err(e) => panic!("the pool did not recover: {e:?}"),
        }
    };
    for (id, version) in &acked {
        let doc = store
            .get("module", "records", id)
            .await
            .unwrap_or_else(|e| panic!("acknowledged put {id} lost after kill -9: {e:?}"));
        assert_eq!(doc.version, *version);
    }
    // Writes work from every pooled connection again.
    let burst = futures::future::join_all((0..20).map(|i| {
        let store = store.clone();
        async move {
            store
                .put("module", "records", &format!("burst-{i}"), counter(i), None)
                .await
        }
    }))
    .await;
    assert!(burst.iter().all(Result::is_ok), "{burst:?}");
    eprintln!(
        "kill -9: {} acknowledged puts all present; restart to first put {:?} ({} failed attempts), kill to first put {:?}",
        acked.len(),
        first_ok - restarted_at,
        failures_after_restart,
        first_ok - killed_at
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_writers_all_succeed() {
    const WRITERS: usize = 64;
    const PUTS_EACH: usize = 40;
    let server = PostgresServer::start().await;
    let schema = schema();
    let store = Arc::new(open(&server, &schema).await);
    store
        .ensure_collection("module", CollectionSpec::new("records"))
        .await
        .unwrap();
    let started = Instant::now();
    let tasks = (0..WRITERS).map(|w| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(PUTS_EACH);
            for i in 0..PUTS_EACH {
                let at = Instant::now();
                store
                    .put(
                        "module",
                        "records",
                        &format!("w{w}-{i}"),
                        counter(i as i64),
                        None,
                    )
                    .await
                    .expect("every put under 64 writers succeeds");
                latencies.push(at.elapsed());
            }
            latencies
        })
    });
    let mut latencies: Vec<Duration> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect();
    let elapsed = started.elapsed();
    let total = WRITERS * PUTS_EACH;
    assert_eq!(
        store.count("module", "records", Vec::new()).await.unwrap(),
        total as i64
    );
    latencies.sort_unstable();
    let p = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    eprintln!(
        "64 writers: {total} puts in {elapsed:?}: {:.0} puts/s, p50 {:?}, p99 {:?}",
        total as f64 / elapsed.as_secs_f64(),
        p(0.5),
        p(0.99)
    );
}

/// A plain connection beside the stores, for locks and DDL they never take.
async fn raw(server: &PostgresServer) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&server.url(), tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_boot_lock_wait_is_bounded_and_reported_as_a_storage_error() {
    let server = PostgresServer::start().await;
    let schema = schema();
    let first = open(&server, &schema).await;
    let mut holder = raw(&server).await;
    let tx = holder.transaction().await.unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&abi_documents_lock_id(&schema)],
    )
    .await
    .unwrap();
    let mut config = PostgresConfig::new(server.url());
    config.schema = schema.clone();
    config.statement_timeout = Duration::from_millis(100);
    let started = Instant::now();
    // Without a statement timeout the open would wait for the lock forever.
    let refused = tokio::time::timeout(Duration::from_secs(10), PostgresStore::open(config))
        .await
        .expect("the boot lock wait is bounded");
    assert!(
        matches!(&refused, Err(DocumentError::Storage(m)) if m == "Cannot initialize PostgreSQL document storage"),
        "{refused:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    tx.rollback().await.unwrap();
    assert_eq!(
        first.collections("module").await.unwrap(),
        Vec::<String>::new()
    );
    open(&server, &schema).await;
}

/// The reference's advisory lock key (see the adapter's schema module).
fn abi_documents_lock_id(schema: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(schema.as_bytes());
    i64::from_be_bytes(digest[..8].try_into().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_and_statement_waits_are_bounded() {
    let server = PostgresServer::start().await;
    let schema = schema();
    let mut config = PostgresConfig::new(server.url());
    config.schema = schema.clone();
    config.pool_max_size = 1;
    config.pool_timeout = Duration::from_millis(200);
    config.statement_timeout = Duration::from_secs(2);
    let store = Arc::new(PostgresStore::open(config).await.unwrap());
    store
        .ensure_collection("module", CollectionSpec::new("records"))
        .await
        .unwrap();
    // Hold the catalog row for update: a put waits for its FOR SHARE lock,
    // on the store's only connection.
    let mut holder = raw(&server).await;
    let tx = holder.transaction().await.unwrap();
    tx.query(
        &format!("SELECT spec FROM \"{schema}\".abi_document_collections WHERE namespace = 'module' AND name = 'records' FOR UPDATE"),
        &[],
    )
    .await
    .unwrap();
    let blocked = {
        let store = store.clone();
        tokio::spawn(async move { store.put("module", "records", "a", counter(1), None).await })
    };
    // The put holds the only connection: another operation waits for the
    // pool no longer than pool_timeout.
    abi_test_support::wait_until(Duration::from_secs(10), || async {
        store.pool_status().available == 0
    })
    .await
    .unwrap();
    let started = Instant::now();
    let starved = store.collections("module").await;
    assert!(
        matches!(starved, Err(DocumentError::Storage(_))),
        "{starved:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The lock wait itself ends at statement_timeout.
    let timed_out = tokio::time::timeout(Duration::from_secs(10), blocked)
        .await
        .expect("the lock wait is bounded by statement_timeout")
        .unwrap();
    assert!(
        matches!(timed_out, Err(DocumentError::Storage(_))),
        "{timed_out:?}"
    );
    tx.rollback().await.unwrap();
    store
        .put("module", "records", "a", counter(1), None)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_index_is_repaired_atomically_and_an_unchanged_one_is_kept() {
    let server = PostgresServer::start().await;
    let schema = schema();
    let store = open(&server, &schema).await;
    let spec = CollectionSpec::new("records").field(FieldSpec::new("x", "string").unique());
    store
        .ensure_collection("module", spec.clone())
        .await
        .unwrap();
    let client = raw(&server).await;
    let name: String = client
        .query_one(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = $1 AND indexname ~ '^abi_doc_[0-9a-f]{40}$'",
            &[&schema],
        )
        .await
        .unwrap()
        .get(0);
    let qualified = format!("\"{schema}\".{name}");
    // An index of an older definition, without our fingerprint: it
    // constrains nothing.
    client
        .batch_execute(&format!(
            "DROP INDEX {qualified}; CREATE UNIQUE INDEX {name} ON \"{schema}\".abi_documents ((NULL::text)) WHERE namespace = 'module' AND collection = 'records'"
        ))
        .await
        .unwrap();
    let x = |v: &str| Data::from([("x".to_owned(), Value::String(v.to_owned()))]);
    store
        .put("module", "records", "one", x("value"), None)
        .await
        .unwrap();
    store
        .put("module", "records", "two", x("value"), None)
        .await
        .unwrap();
    // The replacement fails on the duplicates and rolls back whole.
    let refused = store.ensure_collection("module", spec.clone()).await;
    assert!(
        matches!(refused, Err(DocumentError::UniqueViolation(_))),
        "{refused:?}"
    );
    let definition: String = client
        .query_one("SELECT pg_get_indexdef(to_regclass($1))", &[&qualified])
        .await
        .unwrap()
        .get(0);
    assert!(definition.contains("NULL::text"), "{definition}");
    store
        .delete("module", "records", "two", None)
        .await
        .unwrap();
    store
        .ensure_collection("module", spec.clone())
        .await
        .unwrap();
    let duplicate = store
        .put("module", "records", "dup", x("value"), None)
        .await;
    assert!(
        matches!(duplicate, Err(DocumentError::UniqueViolation(_))),
        "{duplicate:?}"
    );
    let oid_query = "SELECT to_regclass($1)::oid";
    let oid = |row: tokio_postgres::Row| row.get::<_, u32>(0);
    let before = oid(client.query_one(oid_query, &[&qualified]).await.unwrap());
    store.ensure_collection("module", spec).await.unwrap();
    let after = oid(client.query_one(oid_query, &[&qualified]).await.unwrap());
    assert_eq!(after, before, "an unchanged index was rebuilt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_strings_never_reach_errors() {
    // A closed port: the connection is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = PostgresConfig::new(format!("postgres://someone:hunter2@127.0.0.1:{port}/db"));
    config.pool_timeout = Duration::from_millis(500);
    assert!(!format!("{config:?}").contains("hunter2"));
    let refused = PostgresStore::open(config).await.unwrap_err();
    assert_eq!(
        refused,
        DocumentError::Storage("Cannot initialize PostgreSQL document storage".to_owned())
    );
    let malformed = PostgresStore::open(PostgresConfig::new("postgres://someone:hunter2@[::1"))
        .await
        .unwrap_err();
    assert!(
        matches!(&malformed, DocumentError::InvalidArgument(m) if !m.contains("hunter2")),
        "{malformed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_and_cancelled_operations_leave_the_connection_clean() {
    let server = PostgresServer::start().await;
    let schema = schema();
    let mut config = PostgresConfig::new(server.url());
    config.schema = schema.clone();
    // One connection: every operation below reuses the one before's.
    config.pool_max_size = 1;
    let store = PostgresStore::open(config).await.unwrap();
    store
        .ensure_collection("module", CollectionSpec::new("records"))
        .await
        .unwrap();
    store
        .put("module", "records", "a", counter(1), None)
        .await
        .unwrap();
    // A refused write rolls back its transaction.
    let conflict = store
        .put("module", "records", "a", counter(2), Some(7))
        .await;
    assert!(
        matches!(conflict, Err(DocumentError::VersionConflict(_))),
        "{conflict:?}"
    );
    assert_eq!(
        store.get("module", "records", "a").await.unwrap().version,
        1
    );

    // A put dropped while it waits for a row lock: it is one statement,
    // already with the server, so it lands whole once the lock is released
    // (as a put whose reply was lost would), and the connection serves the
    // next operation, queued behind it.
    let mut holder = raw(&server).await;
    let tx = holder.transaction().await.unwrap();
    tx.execute(
        &format!("SELECT 1 FROM \"{schema}\".abi_documents WHERE id = 'a' FOR UPDATE"),
        &[],
    )
    .await
    .unwrap();
    let cancelled = tokio::time::timeout(
        Duration::from_millis(200),
        store.put("module", "records", "a", counter(99), None),
    )
    .await;
    assert!(
        cancelled.is_err(),
        "the put should still be waiting: {cancelled:?}"
    );
    tx.rollback().await.unwrap();
    let doc = store.get("module", "records", "a").await.unwrap();
    assert_eq!((doc.version, doc.data.get("n")), (2, Some(&Value::Int(99))));
    store
        .put("module", "records", "b", counter(1), None)
        .await
        .unwrap();
    assert_eq!(store.pool_status().size, 1);

    // A closed store refuses everything as a storage error.
    store.close();
    store.close();
    let closed = store.collections("module").await;
    assert!(
        matches!(closed, Err(DocumentError::Storage(_))),
        "{closed:?}"
    );
}
