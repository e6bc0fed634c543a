//! The caller side of jobs (`abi_sdk::jobs`) against the Python reference's
//! `JobHost`: a real nats-server with the jobs stream discovery prepares, our
//! document service in process, the reference host in a child process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use abi_documents::config::{Storage, Valid};
use abi_documents::store::{SqliteConfig, SqliteStore};
use abi_process::{NatsSettings, Secret};
use abi_sdk::TokenSource;
use abi_sdk::jobs::{JobClient, WaitErrorKind};
use abi_test_support::{NatsServer, python, requests, unique_name, workspace_root};
use abi_wire::ServerList;
use abi_wire::jobs;
use serde_json::json;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "jobs-caller-test-secret-0123456789abcdef";
/// Generous for one step on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// nats-server, the jobs stream, our document service, and (on demand) the
/// reference's job host.
struct Setup {
    server: NatsServer,
    project: String,
    nats: async_nats::Client,
    _dir: tempfile::TempDir,
    stop: CancellationToken,
    documents: tokio::task::JoinHandle<Result<(), abi_documents::run::RunError>>,
}

impl Setup {
    async fn start() -> Self {
        let server = NatsServer::start().await;
        let project = unique_name("jobs");
        let nats = async_nats::connect(server.url()).await.unwrap();
        abi_discovery::platform::prepare_module_streams(
            &async_nats::jetstream::new(nats.clone()),
            &project,
            1,
        )
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(SqliteConfig::new(dir.path().join("docs.sqlite")))
            .await
            .unwrap();
        let config = Valid {
            nats: NatsSettings::plain(ServerList::parse(&server.url()).unwrap()),
            storage: Storage::Sqlite(dir.path().join("docs.sqlite")),
            secret: Secret::new(SECRET),
            admin_identities: vec!["api".into()],
            strict_namespaces: false,
            shutdown_grace: Duration::from_secs(5),
            max_concurrent_requests: std::num::NonZeroUsize::new(64).unwrap(),
            metrics_addr: None,
        };
        let stop = CancellationToken::new();
        let documents = tokio::spawn(abi_documents::run::run_with(config, store, stop.clone()));
        let setup = Self {
            server,
            project,
            nats,
            _dir: dir,
            stop,
            documents,
        };
        super::jobs_fixture::wait_documents_serve(&setup.job("probe", "none")).await;
        setup
    }

    fn token(&self, identity: &str) -> String {
        requests::service_token(SECRET, identity)
    }

    fn job(&self, module: &str, job: &str) -> JobClient {
        JobClient::new(
            self.nats.clone(),
            TokenSource::issued(self.token("api")),
            &self.project,
            module,
            job,
        )
    }

    /// The reference `JobHost` serving `jobs` of `module`, once its consumers exist.
    async fn python_host(&self, module: &str, jobs: &[&str]) -> Child {
        super::jobs_fixture::reference_job_host(
            &self.server.url(),
            &self.token(module),
            &self.project,
            module,
            jobs,
        )
        .await
    }

    /// A trigger through the reference's `JobProxy`: (run id, duplicate).
    async fn python_trigger(
        &self,
        module: &str,
        job: &str,
        payload: &str,
        key: &str,
    ) -> (String, bool) {
        let out = Command::new(python())
            .arg(workspace_root().join("tests/interop/job_peer.py"))
            .args([
                "trigger",
                &self.server.url(),
                &self.token("api"),
                &self.project,
                module,
                job,
                payload,
                key,
            ])
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["run_id"].as_str().unwrap().to_owned(),
            v["duplicate"].as_bool().unwrap(),
        )
    }

    /// The trigger stored at `sequence`: its headers (name → values) and body.
    async fn stored(&self, sequence: u64) -> (BTreeMap<String, Vec<String>>, Vec<u8>) {
        let js = async_nats::jetstream::new(self.nats.clone());
        let stream = js.get_stream(jobs::stream(&self.project)).await.unwrap();
        let msg = stream.get_raw_message(sequence).await.unwrap();
        let headers = msg
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.iter().map(|x| x.as_str().to_owned()).collect(),
                )
            })
            .collect();
        (headers, msg.payload.to_vec())
    }

    async fn stop(self) {
        self.stop.cancel();
        self.documents.await.unwrap().unwrap();
    }
}

fn sequence(run_id: &str) -> u64 {
    jobs::parse_run_id(run_id).unwrap().1
}

async fn stop_host(mut host: Child) {
    let pid = host.id().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = tokio::time::timeout(DEADLINE, host.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "the reference host stopped with {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_trigger_runs_on_the_reference_host_and_wait_returns_its_result() {
    let setup = Setup::start().await;
    let host = setup.python_host("acme.billing", &["ingest"]).await;
    let job = setup.job("acme.billing", "ingest");

    let run = job.trigger(json!({"n": 1}), None).await.unwrap();
    assert!(run.run_id().starts_with("ingest:"), "{}", run.run_id());
    assert!(!run.duplicate());
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{record:?}");
    assert_eq!(record.result, Some(json!({"echo": {"n": 1}})));
    assert_eq!(record.logs, [r#"payload {"n": 1}"#]);
    assert_eq!(record.run_id, run.run_id());
    // The record is the host's: its fields are there for callers as JSON.
    assert_eq!(record.to_json()["module_id"], "acme.billing");

    // A failing handler ends FAILED (max_attempts 1), with its error.
    let failed = job.trigger(json!({"fail": "boom"}), None).await.unwrap();
    let record = failed.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "FAILED");
    assert!(record.error.contains("boom"), "{}", record.error);

    stop_host(host).await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_is_one_run_and_unhosted_runs_stay_queued_until_the_deadline() {
    let setup = Setup::start().await;
    // Nobody hosts this job.
    let job = setup.job("acme.billing", "nobody");
    let first = job.trigger(json!({}), Some("k1")).await.unwrap();
    let again = job
        .trigger(json!({"other": true}), Some("k1"))
        .await
        .unwrap();
    assert_eq!(again.run_id(), first.run_id());
    assert!(again.duplicate() && !first.duplicate());
    let other = job.trigger(json!({}), Some("k2")).await.unwrap();
    assert_ne!(other.run_id(), first.run_id());

    assert_eq!(first.status().await.unwrap().status, "QUEUED");
    // The reference waits forever by default; ours always has a deadline.
    let started = tokio::time::Instant::now();
    let err = first.wait(Duration::from_millis(300)).await.unwrap_err();
    assert_eq!(err.kind(), WaitErrorKind::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(10));
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_a_running_run_cancelled() {
    let setup = Setup::start().await;
    let host = setup.python_host("acme.billing", &["ingest"]).await;
    let job = setup.job("acme.billing", "ingest");
    let run = job.trigger(json!({"block": true}), None).await.unwrap();
    // Cancel acts only on a running run (the reference's hosts ignore others).
    abi_test_support::wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    run.cancel().await.unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "CANCELLED", "{record:?}");
    stop_host(host).await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_proxy_and_ours_store_the_same_trigger() {
    let setup = Setup::start().await;
    let job = setup.job("acme.billing", "ingest");
    let payload = r#"{"a": [1, 2.5, "\u00e9"], "b": {"c": null}}"#;
    for key in ["-", "same-key"] {
        let (py_run, py_duplicate) = setup
            .python_trigger("acme.billing", "ingest", payload, key)
            .await;
        assert!(!py_duplicate);
        // Ours goes to another key (or none): the same key would be a duplicate.
        let our_key = (key != "-").then_some("other-key");
        let ours = job
            .trigger(serde_json::from_str(payload).unwrap(), our_key)
            .await
            .unwrap();
        let (mut py_headers, py_body) = setup.stored(sequence(&py_run)).await;
        let (mut our_headers, our_body) = setup.stored(sequence(ours.run_id())).await;
        assert_eq!(
            String::from_utf8(our_body).unwrap(),
            String::from_utf8(py_body).unwrap()
        );
        if key != "-" {
            let subjects = job.subjects();
            assert_eq!(
                py_headers.remove("Nats-Msg-Id").unwrap(),
                [subjects.idempotency_id("same-key")]
            );
            assert_eq!(
                our_headers.remove("Nats-Msg-Id").unwrap(),
                [subjects.idempotency_id("other-key")]
            );
            // And the reference's key sent by us is the reference's run.
            let repeat = job
                .trigger(serde_json::from_str(payload).unwrap(), Some("same-key"))
                .await
                .unwrap();
            assert_eq!(repeat.run_id(), py_run);
            assert!(repeat.duplicate());
        }
        assert_eq!(our_headers, py_headers);
    }
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payload_above_max_payload_travels_as_a_claim_check() {
    use tokio::io::AsyncReadExt as _;
    let setup = Setup::start().await;
    let job = setup.job("acme.billing", "ingest");
    let max = setup.nats.server_info().max_payload;
    let payload = json!({ "blob": "x".repeat(max) });
    let run = job.trigger(payload.clone(), None).await.unwrap();
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let (_, sequence) = jobs::parse_run_id(run.run_id()).unwrap();
    let stored = stream.get_raw_message(sequence).await.unwrap();
    assert!(stored.payload.is_empty());
    let name = stored.headers.get(jobs::CLAIM_CHECK_HEADER).unwrap();
    let body = format!("{{\"blob\": \"{}\"}}", "x".repeat(max));
    assert_eq!(
        stored
            .headers
            .get(jobs::CLAIM_CHECK_SIZE_HEADER)
            .unwrap()
            .as_str(),
        body.len().to_string()
    );
    // The object holds the reference's `json.dumps(payload)`, in chunks
    // that each fit the broker.
    let store = js.get_object_store(jobs::CLAIM_CHECK_BUCKET).await.unwrap();
    let mut object = store.get(name.as_str()).await.unwrap();
    assert!(object.info().chunks > 1);
    let mut read = Vec::new();
    object.read_to_end(&mut read).await.unwrap();
    assert!(read == body.as_bytes());
    setup.stop().await;
}
