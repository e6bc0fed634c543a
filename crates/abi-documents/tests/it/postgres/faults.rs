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
