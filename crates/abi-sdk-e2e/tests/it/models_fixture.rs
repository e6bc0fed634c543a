//! What the chat model tests share: our providers in process (a runner
//! with a [`ModelHost`] whose handlers record what they got), real module
//! processes (`model-module`, and the reference's `tests/interop/model_peer.py`),
//! callers, and raw chats for the differential.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use abi_sdk::models::ModelsExt as _;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_proto::Message as _;
use abi_proto::model_registry::v1 as mpb;
use abi_sdk::models::{ChatInput, ChatMessage, ChatModel, ChatModelSpec, Json, ModelHost, json};
use abi_sdk::{Config, DiscoveryClient, Module, ModuleSpec, Runner, TokenSource};
use abi_sdk_e2e::{SECRET, World};
use abi_test_support::{python, requests, workspace_root};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Generous for one step on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The chats a provider's handlers received.
#[derive(Clone, Default)]
pub struct Seen(pub Arc<Mutex<Vec<ChatInput>>>);

impl Seen {
    pub fn all(&self) -> Vec<ChatInput> {
        self.0.lock().unwrap().clone()
    }
}

/// The answer of our test models: `{"echo", "types", "tools", "stop",
/// "options", "tag"}` as JSON text (same shape as `model-module`).
pub fn echo_content(input: &ChatInput, tag: &str) -> String {
    let last = input
        .messages
        .last()
        .map(ChatMessage::content_text)
        .unwrap_or_default();
    let content = BTreeMap::from([
        ("echo".to_owned(), Json::Str(last)),
        (
            "types".to_owned(),
            Json::Array(
                input
                    .messages
                    .iter()
                    .map(|m| Json::Str(m.kind().as_str().to_owned()))
                    .collect(),
            ),
        ),
        ("tools".to_owned(), Json::Int(input.tools.len() as i64)),
        (
            "stop".to_owned(),
            Json::Array(input.stop.iter().cloned().map(Json::Str).collect()),
        ),
        ("options".to_owned(), Json::Object(input.options.clone())),
        ("tag".to_owned(), Json::Str(tag.to_owned())),
    ]);
    json::dumps(&Json::Object(content))
}

/// The host our in-process providers serve: `echo` (no tools) and `tools`.
pub fn test_host(tag: &str, seen: &Seen) -> ModelHost {
    let handler = |tag: String, seen: Seen| {
        move |input: ChatInput| {
            let (tag, seen) = (tag.clone(), seen.clone());
            async move {
                seen.0.lock().unwrap().push(input.clone());
                let last = input.messages.last().map(ChatMessage::content_text);
                if last.as_deref() == Some("slow") {
                    tokio::time::sleep(Duration::from_millis(1500)).await;
                }
                if last.as_deref() == Some("fail") {
                    return Err("asked to fail".into());
                }
                Ok(ChatMessage::ai(echo_content(&input, &tag)))
            }
        }
    };
    ModelHost::new()
        .model(
            ChatModelSpec::new("echo")
                .unwrap()
                .description("says it back"),
            handler(tag.to_owned(), seen.clone()),
        )
        .unwrap()
        .model(
            ChatModelSpec::new("tools")
                .unwrap()
                .description("says it back, takes tools")
                .accepts_tools(true),
            handler(tag.to_owned(), seen.clone()),
        )
        .unwrap()
}

struct Quiet;
impl Module for Quiet {}

/// One of our providers, running in this process.
pub struct Provider {
    pub seen: Seen,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), abi_sdk::RunError>>,
}

impl Provider {
    /// Runs module `module` serving the test host, its answers tagged
    /// `tag`, with `(max_concurrency, queue)` when given.
    pub async fn start(
        world: &World,
        module: &str,
        tag: &str,
        limits: Option<(usize, usize)>,
    ) -> Self {
        let seen = Seen::default();
        let mut host = test_host(tag, &seen);
        if let Some((running, waiting)) = limits {
            host = host.max_concurrency(running).queue(waiting);
        }
        let env = world.module_env(module);
        let lookup = move |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let config = Config::from_lookup(module, &lookup).unwrap();
        let spec = ModuleSpec::new(module).serve(Arc::new(host));
        let stop = CancellationToken::new();
        let runner = Runner::new(spec)
            .config(config)
            .handle_signals(false)
            .stop_on(stop.clone());
        let task = tokio::spawn(runner.run(Quiet));
        Self { seen, stop, task }
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

/// A discovery client for the module `identity` (its module key signs the
/// instance-bound tokens chats need).
pub async fn caller(world: &World, identity: &str) -> DiscoveryClient {
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    let key = abi_auth::module_key(SECRET, identity).unwrap();
    DiscoveryClient::new(
        nats,
        world.project.clone(),
        TokenSource::module_key(identity, key),
    )
}

/// The chat model `name` of `module`, for the caller module `caller`.
pub async fn chat_model(world: &World, module: &str, name: &str) -> ChatModel {
    caller(world, "caller")
        .await
        .module(module, 1)
        .chat_model(name)
}

/// The READY instance ids of `module`, once there are `count`.
pub async fn ready_instances(world: &World, module: &str, count: usize) -> Vec<String> {
    abi_test_support::wait_until(DEADLINE, || async {
        world
            .statuses(module)
            .await
            .iter()
            .filter(|(_, s)| s == "READY")
            .count()
            >= count
    })
    .await
    .expect("the instances turn READY");
    world
        .statuses(module)
        .await
        .into_iter()
        .filter(|(_, s)| s == "READY")
        .map(|(id, _)| id)
        .collect()
}

/// A module process and the `EVENT` lines it prints.
pub struct Process {
    pub child: Child,
    events: mpsc::UnboundedReceiver<String>,
}

impl Process {
    /// Our `model-module` as module `module`, answers tagged `tag`, a
    /// `slow` chat taking 3 s.
    pub fn ours(world: &World, module: &str, tag: &str) -> Self {
        Self::ours_with(world, module, tag, &[])
    }

    /// [`Process::ours`] with `env` added (`E2E_SLOW_MS`, `E2E_DRAIN_MS`).
    pub fn ours_with(world: &World, module: &str, tag: &str, env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_model-module"));
        command
            .env_remove("ABI_ROLLOUT_ID")
            .env_remove("ABI_ROLLOUT_MODULES")
            .envs(world.module_env(module))
            .env("E2E_TAG", tag)
            .env("E2E_SLOW_MS", "3000")
            .env("ABI_SHUTDOWN_GRACE_SECS", "20")
            .envs(env.iter().copied());
        Self::spawn(command)
    }

    /// The reference's module (`model_peer.py serve`) as module `module`.
    pub fn reference(world: &World, module: &str) -> Self {
        let mut command = Command::new(python());
        command
            .arg(workspace_root().join("tests/interop/model_peer.py"))
            .arg("serve")
            .envs(world.module_env(module))
            .env("PYTHONUNBUFFERED", "1");
        Self::spawn(command)
    }

    /// The reference's app module (`app_peer.py serve <folder>`) as module
    /// `module`.
    pub fn reference_app(world: &World, module: &str, folder: &std::path::Path) -> Self {
        let mut command = Command::new(python());
        command
            .arg(workspace_root().join("tests/interop/app_peer.py"))
            .arg("serve")
            .arg(folder)
            .envs(world.module_env(module))
            .env("PYTHONUNBUFFERED", "1");
        Self::spawn(command)
    }

    fn spawn(mut command: Command) -> Self {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("spawn the module process");
        let stdout = child.stdout.take().unwrap();
        let (tx, events) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(event) = line.strip_prefix("EVENT ")
                    && tx.send(event.to_owned()).is_err()
                {
                    break;
                }
            }
        });
        Self { child, events }
    }

    /// Waits for the next event starting with `what`; returns it.
    pub async fn expect(&mut self, what: &str) -> String {
        tokio::time::timeout(DEADLINE, async {
            loop {
                let event = self
                    .events
                    .recv()
                    .await
                    .expect("the module's stdout closed");
                if event.starts_with(what) {
                    return event;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no event {what:?} in time"))
    }

    /// The instance id of its `ready instance=<id>` event.
    pub async fn instance_id(&mut self) -> String {
        let event = self.expect("ready").await;
        event.trim_start_matches("ready instance=").to_owned()
    }

    pub fn sigterm(&self) {
        let pid = self.child.id().unwrap();
        std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
    }

    pub async fn exits_ok(&mut self) {
        let status = tokio::time::timeout(DEADLINE, self.child.wait())
            .await
            .expect("the module exits in time")
            .unwrap();
        assert!(status.success(), "the module exited with {status}");
    }
}

/// The reference caller (`model_peer.py chat`) as module `caller`: its
/// answer, `{"type", "content"}` or `{"error", "message"}`.
pub async fn reference_chat(
    world: &World,
    module: &str,
    model: &str,
    text: &str,
    stop: &str,
    options: &str,
) -> serde_json::Value {
    let out = Command::new(python())
        .arg(workspace_root().join("tests/interop/model_peer.py"))
        .args(["chat", module, model, text, stop, options])
        .envs(world.module_env("caller"))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output();
    let out = tokio::time::timeout(DEADLINE, out).await.unwrap().unwrap();
    assert!(out.status.success(), "model_peer.py chat failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A chat to `instance_id`'s `model` with `request` as raw bytes, the
/// caller's token bound to it (or `token` as given): the answer's
/// `(code, message)`, or `("", <message type>)` for a message.
pub async fn raw_chat(
    world: &World,
    instance_id: &str,
    model: &str,
    payload: Vec<u8>,
    headers: &[(&str, String)],
) -> (String, String) {
    let subject = abi_wire::models::chat_subject(&world.project, instance_id, model);
    let reply = raw_request(world, subject, payload, headers).await;
    let response = mpb::ChatResponse::decode(reply.payload.as_ref()).unwrap();
    match (response.error, response.message) {
        (Some(e), _) if !e.code.is_empty() => (e.code, e.message),
        (_, Some(m)) => (String::new(), m.r#type),
        _ => ("?".into(), "?".into()),
    }
}

/// One raw request to `subject` with `headers`, its reply whole.
pub async fn raw_request(
    world: &World,
    subject: String,
    payload: Vec<u8>,
    headers: &[(&str, String)],
) -> async_nats::Message {
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    let mut map = async_nats::HeaderMap::new();
    for (k, v) in headers {
        map.insert(*k, v.as_str());
    }
    let request = async_nats::Request::new()
        .headers(map)
        .payload(payload.into())
        .timeout(Some(DEADLINE));
    nats.send_request(subject, request).await.unwrap()
}

/// The caller's token bound to `instance_id`.
pub fn bound_token(instance_id: &str) -> String {
    requests::bound_module_token(SECRET, "caller", instance_id)
}
