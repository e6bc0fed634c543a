//! What the job host tests share: a nats-server with the jobs stream as
//! discovery prepares it, our document service in process, our job hosts
//! bound to both, and a test handler driven by its payload.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use abi_documents::config::{Storage, Valid};
use abi_documents::store::{SqliteConfig, SqliteStore};
use abi_process::{NatsSettings, Secret};
use abi_sdk::jobs::host::JobHostLinks;
use abi_sdk::jobs::{
    BoundJobHost, JobClient, JobContext, JobError, JobHost, JobHostOptions, JobSpec,
};
use abi_sdk::{DocumentClient, TokenSource};
use abi_test_support::{
    NatsServer, python, requests, spawn_until_ready, unique_name, workspace_root,
};
use abi_wire::ServerList;
use serde_json::json;
use tokio_util::sync::CancellationToken;

pub const SECRET: &str = "jobs-host-test-secret-0123456789abcdef!";
/// Generous for one step on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

pub struct Setup {
    pub server: NatsServer,
    pub project: String,
    pub nats: async_nats::Client,
    /// `None` when the test runs a document service of its own.
    documents: Option<Documents>,
}

/// Our document service in process over a SQLite file, checking tokens
/// with `secret`, after the jobs stream of `project` exists.
pub struct Documents {
    _dir: tempfile::TempDir,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), abi_documents::run::RunError>>,
}

impl Documents {
    pub async fn start(url: &str, project: &str, secret: &str) -> Self {
        let nats = async_nats::connect(url).await.unwrap();
        abi_discovery::platform::prepare_module_streams(
            &async_nats::jetstream::new(nats),
            project,
            1,
        )
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docs.sqlite");
        let store = SqliteStore::open(SqliteConfig::new(path.clone()))
            .await
            .unwrap();
        let config = Valid {
            nats: NatsSettings::plain(ServerList::parse(url).unwrap()),
            storage: Storage::Sqlite(path),
            secret: Secret::new(secret),
            admin_identities: vec!["api".into()],
            strict_namespaces: false,
            shutdown_grace: Duration::from_secs(5),
            max_concurrent_requests: std::num::NonZeroUsize::new(64).unwrap(),
            metrics_addr: None,
        };
        let stop = CancellationToken::new();
        let task = tokio::spawn(abi_documents::run::run_with(config, store, stop.clone()));
        Self {
            _dir: dir,
            stop,
            task,
        }
    }

    pub async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap().unwrap();
    }
}

impl Setup {
    pub async fn start() -> Self {
        let server = NatsServer::start().await;
        let project = unique_name("jobs");
        let documents = Documents::start(&server.url(), &project, SECRET).await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        let setup = Self {
            server,
            project,
            nats,
            documents: Some(documents),
        };
        wait_documents_serve(&setup.client("probe", "none")).await;
        setup
    }

    /// A nats-server and a fresh project's streams, without a document
    /// service: the test starts its own (checking tokens with [`SECRET`]).
    pub async fn start_without_documents() -> Self {
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
        Self {
            server,
            project,
            nats,
            documents: None,
        }
    }

    pub fn token(&self, identity: &str) -> String {
        requests::service_token(SECRET, identity)
    }

    pub fn client(&self, module: &str, job: &str) -> JobClient {
        JobClient::new(
            self.nats.clone(),
            TokenSource::issued(self.token("api")),
            &self.project,
            module,
            job,
        )
    }

    pub fn links(&self, module: &str, instance: &str) -> JobHostLinks {
        JobHostLinks {
            nats: self.nats.clone(),
            documents: DocumentClient::new(
                self.nats.clone(),
                TokenSource::issued(self.token(module)),
                module,
            ),
            project: self.project.clone(),
            module_id: module.to_owned(),
            instance_id: instance.to_owned(),
        }
    }

    /// Our host of `spec` (test handler named `instance`), started.
    pub async fn host(
        &self,
        module: &str,
        instance: &str,
        spec: JobSpec,
        options: JobHostOptions,
    ) -> (Arc<BoundJobHost>, Calls) {
        let calls = Calls::default();
        let host = JobHost::new()
            .options(options)
            .job(spec, handler(instance.to_owned(), calls.clone()))
            .bind(self.links(module, instance));
        host.prepare_consumers().await.unwrap();
        host.start_serving().await.unwrap();
        (Arc::new(host), calls)
    }

    /// Our host of `spec` with `handler` (the fast options), started.
    pub async fn serve_one(
        &self,
        module: &str,
        instance: &str,
        spec: JobSpec,
        handler: impl abi_sdk::jobs::JobHandler,
    ) -> BoundJobHost {
        let host = JobHost::new()
            .options(fast())
            .job(spec, handler)
            .bind(self.links(module, instance));
        host.prepare_consumers().await.unwrap();
        host.start_serving().await.unwrap();
        host
    }

    pub async fn stop(self) {
        if let Some(documents) = self.documents {
            documents.stop().await;
        }
    }
}

/// Waits until the document service answers a read of `probe`'s records
/// (no such run: it answered that there is no record).
pub async fn wait_documents_serve(probe: &JobClient) {
    let run = probe.run("none:1");
    abi_test_support::wait_until(DEADLINE, || async {
        match run.status().await {
            Ok(_) => true,
            Err(e) => e.kind() == abi_sdk::CallErrorKind::RunNotFound,
        }
    })
    .await
    .expect("the document service serves");
}

/// Options for tests: the reference's, with short backoffs.
pub fn fast() -> JobHostOptions {
    JobHostOptions {
        backoff_base: Duration::from_millis(200),
        max_backoff: Duration::from_secs(2),
        ..JobHostOptions::default()
    }
}

/// How often the test handler started, and a gate it may wait on.
#[derive(Clone, Default)]
pub struct Calls {
    pub started: Arc<AtomicUsize>,
    pub release: Arc<tokio::sync::Notify>,
}

impl Calls {
    pub fn count(&self) -> usize {
        self.started.load(Ordering::SeqCst)
    }
}

/// The test handler. Payload: `{"fail": "why"}` fails (retryable);
/// `{"fail_attempts": n}` fails the first n attempts; `{"block": true}`
/// waits until cancelled then logs `stopped: <stop reason>` and fails (`{"block_on": instance}`: only on that
/// host); `{"ignore_cancel": true}` never ends; `{"gate": true}` waits for
/// [`Calls::release`] (`{"gate_first": true}`: on the first attempt only);
/// `{"sleep_ms": n}` works n ms; `{"skip": "why"}`; else
/// returns `{"echo": payload, "host": instance}`.
fn handler(
    instance: String,
    calls: Calls,
) -> impl Fn(JobContext) -> futures::future::BoxFuture<'static, abi_sdk::jobs::JobResult>
+ Send
+ Sync
+ 'static {
    move |cx: JobContext| {
        let instance = instance.clone();
        let calls = calls.clone();
        Box::pin(async move {
            calls.started.fetch_add(1, Ordering::SeqCst);
            let p = cx.payload().clone();
            cx.log(format!("attempt {} on {instance}", cx.attempt()));
            if let Some(why) = p["fail"].as_str() {
                return Err(JobError::new("RuntimeError", why));
            }
            if p["fail_attempts"]
                .as_u64()
                .is_some_and(|n| u64::from(cx.attempt()) <= n)
            {
                return Err(JobError::new("RuntimeError", "not yet"));
            }
            if p["non_retryable"].as_bool() == Some(true) {
                return Err(JobError::non_retryable("bad input"));
            }
            if p["block"].as_bool() == Some(true) {
                cx.cancelled().cancelled().await;
                cx.log(format!("stopped: {:?}", cx.stop_reason()));
                return Err(JobError::new("CancelledError", "stopped"));
            }
            if p["ignore_cancel"].as_bool() == Some(true) {
                futures::future::pending::<()>().await;
            }
            if p["block_on"].as_str() == Some(instance.as_str()) {
                cx.cancelled().cancelled().await;
                cx.log(format!("stopped: {:?}", cx.stop_reason()));
                return Err(JobError::new("CancelledError", "stopped"));
            }
            if p["gate_first"].as_bool() == Some(true) && cx.attempt() == 1 {
                calls.release.notified().await;
            }
            if p["gate"].as_bool() == Some(true) {
                calls.release.notified().await;
            }
            if let Some(ms) = p["sleep_ms"].as_u64() {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if let Some(why) = p["skip"].as_str() {
                cx.skip(why);
            }
            Ok(json!({"echo": p, "host": instance}))
        })
    }
}

/// The reference's `JobHost` serving `jobs` of `module` (`tests/interop/job_peer.py
/// serve`), once it printed that every consumer exists.
pub async fn reference_job_host(
    url: &str,
    token: &str,
    project: &str,
    module: &str,
    jobs: &[&str],
) -> tokio::process::Child {
    let mut command = tokio::process::Command::new(python());
    command
        .arg(workspace_root().join("tests/interop/job_peer.py"))
        .args(["serve", url, token, project, module])
        .args(jobs)
        .env("PYTHONUNBUFFERED", "1")
        .stdin(std::process::Stdio::null());
    spawn_until_ready(command, "ready", DEADLINE)
        .await
        .expect("the reference job host starts")
}

/// Stops a reference job host with SIGTERM; it must exit cleanly.
pub async fn stop_reference(mut host: tokio::process::Child) {
    let pid = host.id().expect("a running reference host");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = tokio::time::timeout(DEADLINE, host.wait())
        .await
        .expect("the reference host stops in time")
        .expect("its exit status");
    assert!(status.success(), "the reference host stopped with {status}");
}
