//! What the agent tests share: a world (nats-server, discovery) with our
//! document service, providers running our `AgentHost` in process under the
//! runner, callers with module keys, and a test agent driven by its prompt.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use abi_sdk::agents::AgentsExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use abi_sdk::agents::{
    AgentClient, AgentEvent, AgentHandler, AgentHost, AgentHostOptions, AgentSpec, BoundAgentHost,
    EventStream, HandlerError, InvocationContext, InvokeFuture,
};
use abi_sdk::documents::{Document, FindQuery};
use abi_sdk::{Config, DiscoveryClient, DocumentClient, Module, ModuleSpec, Runner, TokenSource};
use abi_sdk_e2e::{SECRET, World};
use tokio_util::sync::CancellationToken;

use super::jobs_fixture::Documents;

/// Generous for one step on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(60);
pub const MODULE: &str = "acme.agents";

/// A world with the document service.
pub struct Setup {
    pub world: World,
    documents: Option<Documents>,
    /// The reference's document service instead of ours, with its folder.
    reference: Option<(tokio::process::Child, tempfile::TempDir)>,
}

impl Setup {
    pub async fn start(lease_seconds: f64) -> Self {
        let world = World::start(lease_seconds).await;
        let documents = Documents::start(&world.nats.url(), &world.project, SECRET).await;
        Self {
            world,
            documents: Some(documents),
            reference: None,
        }
    }

    /// A world whose document service is the reference's
    /// (`tests/interop/document_peer.py serve`), which serves no batches.
    pub async fn with_reference_documents(lease_seconds: f64) -> Self {
        use tokio::io::AsyncBufReadExt as _;
        let world = World::start(lease_seconds).await;
        let dir = tempfile::tempdir().unwrap();
        let mut child = tokio::process::Command::new(abi_test_support::python())
            .arg(abi_test_support::workspace_root().join("tests/interop/document_peer.py"))
            .args(["serve", &world.nats.url(), SECRET])
            .arg(dir.path().join("reference.sqlite"))
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the reference document server");
        let stdout = child.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .expect("the reference document server starts in time")
            .unwrap();
        assert_eq!(ready.as_deref(), Some("ready"));
        Self {
            world,
            documents: None,
            reference: Some((child, dir)),
        }
    }

    /// The agent `name` of [`MODULE`], called as module `identity`.
    pub async fn agent(&self, identity: &str, name: &str) -> AgentClient {
        caller(&self.world, identity)
            .await
            .module(MODULE, 1)
            .agent_client(name)
    }

    /// The provider module's documents (as the platform reads them).
    pub async fn documents(&self) -> DocumentClient {
        let nats = async_nats::connect(self.world.nats.url()).await.unwrap();
        let token = abi_test_support::requests::service_token(SECRET, "api");
        DocumentClient::new(nats, TokenSource::issued(token), MODULE)
    }

    /// Every document of one of the agent collections (`runs`, `events`, `claims`).
    pub async fn all(&self, kind: &str) -> Vec<Document> {
        let collection = format!(
            "agent_{kind}_{}",
            &abi_wire::agents::hash(&[&self.world.project])[..16]
        );
        let docs = self.documents().await;
        docs.find(
            &collection,
            FindQuery {
                limit: 1000,
                ..Default::default()
            },
        )
        .await
        .map(|p| p.items)
        .unwrap_or_default()
    }

    pub async fn stop(mut self) {
        if let Some(d) = self.documents.take() {
            d.stop().await;
        }
        if let Some((mut child, _dir)) = self.reference.take() {
            let _ = child.kill().await;
        }
    }
}

/// A discovery client for the module `identity` (its module key signs the
/// instance-bound tokens agent calls need).
pub async fn caller(world: &World, identity: &str) -> DiscoveryClient {
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    let key = abi_auth::module_key(SECRET, identity).unwrap();
    DiscoveryClient::new(
        nats,
        world.project.clone(),
        TokenSource::module_key(identity, key),
    )
}

/// How often the test agent started.
#[derive(Clone, Default)]
pub struct Started(pub Arc<AtomicUsize>);

impl Started {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// The test agent. Prompts: `block` waits until cancelled; `sleep:<ms>`
/// answers `slept` after that long; `fail` fails with `AGENT_FAILED`;
/// `big:<n>` answers n bytes; anything else is echoed with the instance's
/// tag. Streamed: `token` events `a`, `b`, `c`, then a message of the
/// prompt (`big:<n>` streams one n-byte event; `block` streams one event
/// then waits).
pub struct TestAgent {
    pub tag: String,
    pub started: Started,
}

fn answer(tag: &str, prompt: &str) -> String {
    format!("{tag}:{prompt}")
}

impl AgentHandler for TestAgent {
    fn invoke(&self, prompt: String, _cx: InvocationContext) -> InvokeFuture {
        self.started.0.fetch_add(1, Ordering::SeqCst);
        let tag = self.tag.clone();
        Box::pin(async move {
            if prompt == "block" {
                futures::future::pending::<()>().await;
            }
            if let Some(ms) = prompt.strip_prefix("sleep:") {
                tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
                return Ok(format!("{tag}:slept"));
            }
            if prompt == "fail" {
                return Err(HandlerError::new("asked to fail"));
            }
            if let Some(n) = prompt.strip_prefix("big:") {
                return Ok("x".repeat(n.parse().unwrap()));
            }
            Ok(answer(&tag, &prompt))
        })
    }

    fn stream(&self, prompt: String, _cx: InvocationContext) -> Option<EventStream> {
        self.started.0.fetch_add(1, Ordering::SeqCst);
        let tag = self.tag.clone();
        let events: Vec<Result<AgentEvent, HandlerError>> =
            if let Some(n) = prompt.strip_prefix("big:") {
                vec![Ok(AgentEvent::message("y".repeat(n.parse().unwrap())))]
            } else {
                ["a", "b", "c"]
                    .iter()
                    .map(|d| Ok(AgentEvent::new("token", *d)))
                    .chain([Ok(AgentEvent::message(answer(&tag, &prompt)))])
                    .collect()
            };
        let block = prompt == "block";
        let stream = futures::stream::iter(events).chain(futures::stream::once(async move {
            if block {
                futures::future::pending::<()>().await;
            }
            Ok(AgentEvent::new("done", "[DONE]"))
        }));
        Some(Box::pin(stream))
    }
}

use futures::StreamExt as _;

struct Quiet;
impl Module for Quiet {}

/// Options for tests: the defaults, with the upkeep off unless asked.
pub fn options() -> AgentHostOptions {
    AgentHostOptions {
        upkeep_interval: Duration::from_secs(3600),
        ..AgentHostOptions::default()
    }
}

/// One of our providers, running in this process.
pub struct Provider {
    bound: tokio::sync::watch::Receiver<Option<Arc<BoundAgentHost>>>,
    pub started: Started,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), abi_sdk::RunError>>,
}

impl Provider {
    /// Runs [`MODULE`] serving the test agent `echo` tagged `tag`.
    pub async fn start(world: &World, tag: &str, options: AgentHostOptions) -> Self {
        let started = Started::default();
        let (bound_tx, bound) = tokio::sync::watch::channel(None);
        let host = Arc::new(
            AgentHost::new()
                .agent(
                    AgentSpec::new("echo", "says it back"),
                    Arc::new(TestAgent {
                        tag: tag.to_owned(),
                        started: started.clone(),
                    }),
                )
                .options(options)
                .on_bind(move |host| {
                    bound_tx.send_replace(Some(host.clone()));
                }),
        );
        let env = world.module_env(MODULE);
        let lookup = move |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let config = Config::from_lookup(MODULE, &lookup).unwrap();
        let spec = ModuleSpec::new(MODULE).serve(host);
        let stop = CancellationToken::new();
        let runner = Runner::new(spec)
            .config(config)
            .handle_signals(false)
            .stop_on(stop.clone());
        let task = tokio::spawn(runner.run(Quiet));
        Self {
            bound,
            started,
            stop,
            task,
        }
    }

    /// The running agent host, once the runner bound it.
    pub async fn host(&self) -> Arc<BoundAgentHost> {
        let mut bound = self.bound.clone();
        let host = tokio::time::timeout(DEADLINE, bound.wait_for(Option::is_some))
            .await
            .expect("the runner binds the agent host in time")
            .expect("the provider is running");
        host.clone().expect("waited for a bound host")
    }

    /// Asks the module to drain and stop.
    pub fn request_stop(&self) {
        self.stop.cancel();
    }

    /// Drains the module and waits for it to end.
    pub async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("the provider stops in time")
            .unwrap()
            .unwrap();
    }
}

/// Waits until `MODULE` has `count` READY instances; returns their ids.
pub async fn ready(world: &World, count: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let ids: Vec<String> = world
            .statuses(MODULE)
            .await
            .into_iter()
            .filter(|(_, s)| s == "READY")
            .map(|(i, _)| i)
            .collect();
        if ids.len() >= count {
            return ids;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{count} providers never READY"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
