//! The `abi-documents` binary as an operator runs it: a bad configuration
//! exits 2 with one line per problem; `$SRV` discovery and Prometheus metrics
//! answer; SIGTERM under load answers what was received and exits 0; and two
//! servers on one PostgreSQL database survive a kill -9 of one of them
//! without losing an acknowledged write.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use abi_document_model::{CollectionSpec, Data, Value};
use abi_sdk::{CallErrorKind, DocumentClient, TokenSource};
use abi_test_support::NatsServer;
use abi_test_support::postgres::PostgresServer;
use tokio::process::{Child, Command};

use crate::common::{SECRET, token};

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_abi-documents")
}

/// The binary with a clean environment (no inherited ABI_/NATS_ settings).
fn command() -> Command {
    clean(Command::new(binary()))
}

/// The binary started through `sh` with SIGXFSZ ignored, so that a write
/// past a file-size limit fails (`EFBIG`) rather than kills it.
fn command_ignoring_file_size_signals() -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "trap '' XFSZ; exec \"$0\"", binary()]);
    clean(cmd)
}

/// `cmd` without inherited ABI_/NATS_ settings, logging warnings.
fn clean(mut cmd: Command) -> Command {
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("ABI_") || key.starts_with("NATS_") || key == "RUST_LOG" {
            cmd.env_remove(key);
        }
    }
    cmd.env("ABI_LOG", "warn").kill_on_drop(true);
    cmd
}

/// Starts the binary and waits until it answers a read.
async fn start(nats_url: &str, env: &[(&str, &str)]) -> Child {
    start_as(command(), nats_url, env).await
}

/// Starts `cmd` (the binary) and waits until it answers a read.
async fn start_as(mut cmd: Command, nats_url: &str, env: &[(&str, &str)]) -> Child {
    cmd.env("NATS_URL", nats_url)
        .env("ABI_JWT_SECRET", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("start abi-documents");
    let client = async_nats::connect(nats_url).await.expect("connect");
    let docs = DocumentClient::new(client, TokenSource::issued(token("api")), "probe")
        .request_timeout(Duration::from_secs(1));
    for _ in 0..200 {
        if docs.collections().await.is_ok() {
            return child;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("abi-documents never answered");
}

fn module(nats: async_nats::Client, namespace: &str) -> DocumentClient {
    let key = abi_auth::module_key(SECRET, namespace).expect("key");
    DocumentClient::new(nats, TokenSource::module_key(namespace, key), namespace)
        .request_timeout(Duration::from_secs(5))
}

fn signal(child: &Child, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(child.id().expect("running") as i32).expect("pid");
    rustix::process::kill_process(pid, sig).expect("signal");
}

#[tokio::test]
async fn a_bad_configuration_exits_2_naming_every_problem() {
    let out = command()
        .args(["--url", "mysql://x", "--max-concurrent-requests", "0"])
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    for setting in [
        "ABI_JWT_SECRET",
        "ABI_DOCUMENTS_URL",
        "ABI_MAX_CONCURRENT_REQUESTS",
    ] {
        assert!(stderr.contains(setting), "{setting} not named: {stderr}");
    }
}

/// `$SRV.PING`/`INFO` name the service as the reference's `nats.micro`
/// service does, metrics count what was answered, and SIGTERM with puts in
/// flight answers them and exits 0: every put acknowledged is stored.
#[tokio::test]
async fn serves_discovery_and_metrics_and_drains_on_sigterm() {
    let nats = NatsServer::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        probe.local_addr().expect("addr").port()
    };
    let metrics_addr = format!("127.0.0.1:{port}");
    let data_dir = dir.path().display().to_string();
    let child = start(
        &nats.url(),
        &[
            ("ABI_DOCUMENTS_DATA_DIR", &data_dir),
            ("ABI_METRICS_ADDR", &metrics_addr),
        ],
    )
    .await;
    let client = async_nats::connect(nats.url()).await.expect("connect");

    let ping = client
        .request("$SRV.PING.document", "".into())
        .await
        .expect("$SRV.PING");
    let ping: serde_json::Value = serde_json::from_slice(&ping.payload).expect("json");
    assert_eq!(ping["name"], "document");
    let info = client
        .request("$SRV.INFO.document", "".into())
        .await
        .expect("$SRV.INFO");
    let info: serde_json::Value = serde_json::from_slice(&info.payload).expect("json");
    let endpoints: Vec<&str> = info["endpoints"]
        .as_array()
        .expect("endpoints")
        .iter()
        .map(|e| e["subject"].as_str().unwrap_or(""))
        .collect();
    // The reference's ten, and our batch and put_many.
    assert_eq!(endpoints.len(), 12, "{endpoints:?}");
    assert!(endpoints.contains(&"abi.svc.document.v1.put"));
    assert!(endpoints.contains(&"abi.svc.document.v1.batch"));
    assert!(endpoints.contains(&"abi.svc.document.v1.put_many"));
    assert!(info["endpoints"][0]["queue_group"] == "q", "{info}");

    let docs = Arc::new(module(client.clone(), "m"));
    docs.ensure_collection(CollectionSpec::new("c"))
        .await
        .expect("ensure");
    // A refused put too: `$SRV.STATS` counts every answer, as the
    // Prometheus counters do.
    let refused = docs.put("c", "x", Data::new(), Some(7)).await;
    assert!(refused.is_err());
    let body = reqwest_free_get(&metrics_addr).await;
    assert!(
        body.contains(
            "abi_documents_requests_total{operation=\"ensure_collection\",code=\"OK\"} 1"
        ),
        "{body}"
    );
    assert!(
        body.contains(
            "abi_documents_requests_total{operation=\"put\",code=\"VERSION_CONFLICT\"} 1"
        ),
        "{body}"
    );
    let stats = client
        .request("$SRV.STATS.document", "".into())
        .await
        .expect("$SRV.STATS");
    let stats: serde_json::Value = serde_json::from_slice(&stats.payload).expect("json");
    let requests = |name: &str| {
        stats["endpoints"]
            .as_array()
            .expect("endpoints")
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["num_requests"].clone())
    };
    assert_eq!(requests("ensure_collection"), Some(1.into()), "{stats}");
    assert_eq!(requests("put"), Some(1.into()), "{stats}");
    assert_eq!(requests("get"), Some(0.into()), "{stats}");

    let mut tasks = Vec::new();
    for i in 0..300 {
        let docs = docs.clone();
        tasks.push(tokio::spawn(async move {
            docs.put("c", &format!("d{i}"), Data::new(), Some(0)).await
        }));
    }
    tokio::task::yield_now().await;
    signal(&child, rustix::process::Signal::TERM);
    let mut child = child;
    let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("exits within its grace period")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    let mut acknowledged = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await.expect("task") {
            Ok(_) => acknowledged.push(i),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    CallErrorKind::NoResponders | CallErrorKind::TimedOut
                ),
                "a wrong answer: {e}"
            ),
        }
    }
    // Start it again on the same file: every acknowledged put is there.
    let _again = start(&nats.url(), &[("ABI_DOCUMENTS_DATA_DIR", &data_dir)]).await;
    for i in acknowledged {
        docs.get("c", &format!("d{i}"))
            .await
            .expect("an acknowledged put is stored");
    }
}

/// A put told decided whose commit then fails (the WAL cannot grow past the
/// process's file-size limit): its durable answer is the failure, nothing
/// is stored, the service goes on answering reads, and stores the put once
/// the file can grow again.
#[tokio::test]
async fn a_put_decided_whose_commit_fails_answers_the_failure_and_stores_nothing() {
    let nats = NatsServer::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().to_string_lossy().into_owned();
    let env = [("ABI_DOCUMENTS_DATA_DIR", data_dir.as_str())];
    let child = start_as(command_ignoring_file_size_signals(), &nats.url(), &env).await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let docs = module(client, "billing");
    docs.ensure_collection(CollectionSpec::new("runs"))
        .await
        .expect("ensure");
    // Room for a few commits more than the files hold now.
    let largest = std::fs::read_dir(dir.path())
        .expect("the data dir")
        .map(|entry| entry.expect("an entry").metadata().expect("metadata").len())
        .max()
        .unwrap_or(0);
    let limit = largest + 256 * 1024;
    let pid = rustix::process::Pid::from_raw(child.id().expect("running") as i32).expect("pid");
    // The soft limit only, so that it can be lifted again.
    let fsize = rustix::process::Rlimit {
        current: Some(limit),
        maximum: None,
    };
    rustix::process::prlimit(Some(pid), rustix::process::Resource::Fsize, fsize)
        .expect("limit the service's file size");

    let mut data = Data::new();
    data.insert("text".into(), Value::from("x".repeat(32 * 1024)));
    let mut failed = None;
    for i in 0..100 {
        let id = format!("d{i}");
        let deciding = docs
            .put_deciding("runs", &id, &data, Some(0))
            .await
            .unwrap_or_else(|e| panic!("put {i} refused before it was decided: {e}"));
        assert_eq!(deciding.written.version, 1);
        if let Err(e) = deciding.stored.await {
            failed = Some((id, e));
            break;
        }
    }
    let (id, error) = failed.expect("a commit past the file-size limit fails");
    assert_eq!(
        error.code(),
        Some(abi_wire::ErrorCode::StorageError.as_str()),
        "{error}"
    );
    let missing = docs.get("runs", &id).await.expect_err("not stored");
    assert_eq!(missing.kind(), CallErrorKind::DocumentNotFound);
    docs.get("runs", "d0")
        .await
        .expect("an earlier put is stored");
    // Room again: the same put is stored.
    let unlimited = rustix::process::Rlimit {
        current: None,
        maximum: None,
    };
    rustix::process::prlimit(Some(pid), rustix::process::Resource::Fsize, unlimited)
        .expect("lift the limit");
    let written = docs
        .put_ref("runs", &id, &data, Some(0))
        .await
        .expect("stored once the file can grow");
    assert_eq!(written.version, 1);
}

/// SIGTERM with nats-server gone (killed -9): the service stops within its
/// grace, exit 0, and every put it acknowledged before is on disk.
#[tokio::test]
async fn sigterm_with_nats_gone_exits_within_the_grace() {
    let mut nats = NatsServer::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().display().to_string();
    let grace_secs = 3;
    let grace = grace_secs.to_string();
    let mut child = start(
        &nats.url(),
        &[
            ("ABI_DOCUMENTS_DATA_DIR", &data_dir),
            ("ABI_SHUTDOWN_GRACE_SECS", &grace),
        ],
    )
    .await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let docs = module(client, "m");
    docs.ensure_collection(CollectionSpec::new("c"))
        .await
        .expect("ensure");
    for i in 0..20 {
        docs.put("c", &format!("d{i}"), Data::new(), Some(0))
            .await
            .expect("put");
    }
    nats.stop();
    let started = std::time::Instant::now();
    signal(&child, rustix::process::Signal::TERM);
    let status = tokio::time::timeout(Duration::from_secs(grace_secs + 5), child.wait())
        .await
        .unwrap_or_else(|_| panic!("still running {:?} after SIGTERM", started.elapsed()))
        .expect("wait");
    assert!(status.success(), "{status:?}");
    // The file holds every acknowledged put.
    let store = abi_documents::store::SqliteStore::open(abi_documents::store::SqliteConfig::new(
        dir.path().join("documents.sqlite"),
    ))
    .await
    .expect("open the file");
    let count = abi_document_model::DocumentStore::count(&store, "m", "c", Vec::new())
        .await
        .expect("count");
    assert_eq!(count, 20);
}

/// GET `/metrics` over a plain TCP socket (no HTTP client dependency).
async fn reqwest_free_get(addr: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("metrics listen");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut out = String::new();
    stream.read_to_string(&mut out).await.expect("read");
    out
}

/// Two servers on one PostgreSQL database, in the queue group: kill -9 one
/// under writes; the writes carry on through the other and no acknowledged
/// one is lost.
#[tokio::test]
async fn two_servers_on_postgres_survive_losing_one() {
    let nats = NatsServer::start().await;
    let pg = PostgresServer::start().await;
    let url = pg.url();
    let env = [("ABI_DOCUMENTS_URL", url.as_str())];
    let mut first = start(&nats.url(), &env).await;
    let _second = start(&nats.url(), &env).await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let docs = Arc::new(module(client, "m"));
    docs.ensure_collection(CollectionSpec::new("c"))
        .await
        .expect("ensure");

    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..8 {
        let docs = docs.clone();
        let stop = stop.clone();
        writers.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            let mut failed_after_kill = 0;
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let id = format!("w{w}-{i}");
                let mut data = Data::new();
                data.insert("i".into(), Value::Int(i));
                match docs.put("c", &id, data, Some(0)).await {
                    Ok(_) => acknowledged.push(id),
                    Err(e) => {
                        // Only the requests the dead server had taken are lost.
                        assert!(
                            matches!(
                                e.kind(),
                                CallErrorKind::TimedOut | CallErrorKind::NoResponders
                            ),
                            "{e}"
                        );
                        failed_after_kill += 1;
                    }
                }
                i += 1;
            }
            (acknowledged, failed_after_kill)
        }));
    }
    // Let some writes land on both, then kill -9 one server.
    wait_count(&docs, 200).await;
    signal(&first, rustix::process::Signal::KILL);
    first.wait().await.expect("reaped");
    // A request the broker routed to the killed server just before it went
    // is lost (a timeout); ask again until the survivor answers.
    let mut before = None;
    for _ in 0..20 {
        if let Ok(n) = docs.count("c", Vec::new()).await {
            before = Some(n);
            break;
        }
    }
    let before = before.expect("the survivor answers a count");
    wait_count(&docs, before + 200).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    let mut lost_in_flight = 0;
    for writer in writers {
        let (acknowledged, failed) = writer.await.expect("writer");
        all.extend(acknowledged);
        lost_in_flight += failed;
    }
    // The survivor took over: 200 more writes were acknowledged after the kill.
    println!(
        "acknowledged {}, lost in flight with the killed server {lost_in_flight}",
        all.len()
    );
    for id in &all {
        docs.get("c", id)
            .await
            .expect("every acknowledged write is stored");
    }
}

async fn wait_count(docs: &DocumentClient, at_least: i64) {
    for _ in 0..600 {
        if docs.count("c", Vec::new()).await.unwrap_or(0) >= at_least {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the writers never reached {at_least} documents");
}
