//! `demo-provider`: a module that serves jobs, an agent and a chat model, and
//! does a little periodic work. Copy it (with `src/bin/provider.rs`) to start
//! your own module.

use std::sync::Arc;
use std::time::Duration;

use abi_sdk::agents::{
    AgentEvent, AgentHandler, AgentHost, AgentSpec, EventStream, InvocationContext, InvokeFuture,
};
use abi_sdk::documents::{CollectionSpec, Data, DocumentClient, FieldSpec, Value};
use abi_sdk::jobs::{JobContext, JobError, JobHost, JobResult, JobSpec, Trigger};
use abi_sdk::models::{ChatInput, ChatMessage, ChatModelSpec, ModelHost};
use abi_sdk::workflows::{FlowContext, TypedWorkflow as _, workflow_fn};
use abi_sdk::{Context, HookResult, Module, ModuleSpec};
use tracing::{info, warn};

/// The module id other modules use to find this one.
pub const MODULE_ID: &str = "demo-provider";
/// The collection (in the module's document namespace) where each instance
/// records its progress: one document per instance.
pub const WORK_COLLECTION: &str = "work";

/// The module's state: here only how often it works.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Time between two pieces of work.
    pub work_interval: Duration,
}

impl Module for Provider {
    /// Called once every dependency is READY (this module has none), before
    /// the instance tells discovery it is initialized. Open connections,
    /// warm caches, ... here.
    async fn on_initialized(&self, cx: &Context) -> HookResult {
        let instance = cx.session().map(|s| s.instance_id()).unwrap_or("-");
        info!(module_id = MODULE_ID, instance, "provider initialized");
        Ok(())
    }

    /// The module's work, until it is asked to stop (SIGTERM, Ctrl-C, or a
    /// newer rollout generation took over and discovery asked it to drain).
    async fn run(&self, cx: Context) -> HookResult {
        let mut ticks = tokio::time::interval(self.work_interval);
        let mut done: u64 = 0;
        let records = progress_records(&cx).await;
        loop {
            tokio::select! {
                () = cx.stopping().cancelled() => break,
                _ = ticks.tick() => {}
            }
            // A work guard makes a draining module wait for this piece of
            // work before it unregisters; `None` means stop taking work.
            let Some(_guard) = cx.begin_work() else { break };
            done += 1;
            info!(done, status = %cx.status(), "provider did a piece of work");
            if let Some((docs, id)) = &records {
                record_progress(docs, id, done).await;
            }
        }
        info!(done, "provider stopping");
        Ok(())
    }
}

/// The document client and this instance's record id, when a document
/// service answers (the module works without one).
async fn progress_records(cx: &Context) -> Option<(DocumentClient, String)> {
    // A short deadline: a missing document service must not slow the work.
    let docs = cx.documents()?.request_timeout(Duration::from_secs(1));
    let id = cx.session()?.instance_id().to_owned();
    let spec = CollectionSpec::new(WORK_COLLECTION).field(FieldSpec::new("done", "int").indexed());
    match docs.ensure_collection(spec).await {
        Ok(()) => Some((docs, id)),
        Err(error) => {
            warn!(%error, "no document service: progress is not recorded");
            None
        }
    }
}

async fn record_progress(docs: &DocumentClient, id: &str, done: u64) {
    let mut data = Data::new();
    data.insert(
        "done".into(),
        Value::Int(i64::try_from(done).unwrap_or(i64::MAX)),
    );
    data.insert(
        "at".into(),
        Value::Datetime(abi_sdk::documents::Datetime::now()),
    );
    if let Err(error) = docs.put(WORK_COLLECTION, id, data, None).await {
        warn!(%error, "could not record progress");
    }
}

/// What the module declares to discovery: identity, contract, what it serves.
///
/// # Panics
///
/// Never: the declarations are constants within the reference's limits (a
/// test builds them).
#[allow(clippy::expect_used)]
pub fn spec(package_version: &str) -> ModuleSpec {
    let summarizer = AgentSpec::new("summarizer", "Summarizes a text").capability("summarize");
    let nightly = JobSpec::new("nightly-report")
        .map(|j| j.description("Builds the nightly report"))
        .and_then(|j| j.trigger(Trigger::cron("0 0 2 * * *", "UTC", None)?))
        .and_then(|j| j.max_attempts(3))
        .and_then(|j| j.timeout(Duration::from_secs(600)))
        .expect("a valid job declaration");
    ModuleSpec::new(MODULE_ID)
        .package_version(package_version)
        .contract_major(1)
        .agent(summarizer.to_descriptor())
        .job(nightly.to_descriptor())
}

/// The workflow [`with_jobs`] serves: three journaled steps, the second a
/// call of the consumer's job `shout`.
pub const DIGEST_WORKFLOW: &str = "digest";
/// The consumer's module and job the digest calls.
pub const SHOUT: (&str, &str) = ("demo-consumer", "shout");

/// The digest's input: some words.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct DigestInput {
    /// The words to digest.
    pub words: Vec<String>,
}

/// The digest's output.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct DigestOutput {
    /// `<count> words: <the words in capitals>`.
    pub summary: String,
}

/// The digest workflow: `count` the words (a step), have the consumer
/// `shout` them (a call: a job run of another module, journaled before the
/// wait), then `summarize` (a step). A retried or resumed run replays the
/// steps that finished instead of running them again.
async fn digest(cx: FlowContext, input: DigestInput) -> Result<DigestOutput, JobError> {
    let words = input.words;
    let count: usize = cx
        .step("count", || {
            let n = words.len();
            async move { Ok(n) }
        })
        .await?;
    let shouted: serde_json::Value = cx
        .call_keyed(
            "shout",
            SHOUT.0,
            SHOUT.1,
            &serde_json::json!({"text": words.join(" ")}),
        )
        .await?;
    let loud = shouted["text"].as_str().unwrap_or_default().to_owned();
    let summary: String = cx
        .step("summarize", || {
            let loud = loud.clone();
            async move { Ok(format!("{count} words: {loud}")) }
        })
        .await?;
    Ok(DigestOutput { summary })
}

/// The spec with the jobs the provider serves over NATS (the demo stack runs
/// them): `tick` every 2 s, `echo` (manual: returns its payload), `sleepy`
/// (manual: works until cancelled, at most a minute) and the workflow
/// [`DIGEST_WORKFLOW`]. Jobs need NATS and the document service, so the
/// in-process tests use [`spec`] alone.
///
/// # Panics
///
/// Never: the declarations are constants within the reference's limits (a
/// test builds them).
#[allow(clippy::expect_used)]
pub fn with_jobs(spec: ModuleSpec) -> ModuleSpec {
    let tick = JobSpec::new("tick")
        .and_then(|j| {
            j.description("Counts the provider's ticks")
                .trigger(Trigger::every("2s", None)?)
        })
        .expect("a valid job declaration");
    let echo = JobSpec::new("echo")
        .map(|j| j.description("Returns its payload"))
        .expect("a valid job declaration");
    let sleepy = JobSpec::new("sleepy")
        .map(|j| j.description("Works until cancelled"))
        .and_then(|j| j.timeout(Duration::from_secs(60)))
        .expect("a valid job declaration");
    let digest_spec = JobSpec::new(DIGEST_WORKFLOW)
        .map(|j| j.description("Counts words, has the consumer shout them, sums it up"))
        .and_then(|j| j.typed::<DigestInput, DigestOutput>())
        .and_then(|j| j.max_attempts(3))
        .expect("a valid workflow declaration");
    let jobs = JobHost::new()
        .job(digest_spec, workflow_fn(digest))
        .job(tick, |cx: JobContext| async move {
            cx.log("tick");
            JobResult::Ok(serde_json::json!({"run": cx.run_id()}))
        })
        .job(echo, |cx: JobContext| async move {
            JobResult::Ok(cx.payload().clone())
        })
        .job(sleepy, |cx: JobContext| async move {
            cx.log("sleeping until cancelled");
            cx.cancelled().cancelled().await;
            JobResult::Ok(serde_json::json!({"woke": true}))
        });
    spec.serve(Arc::new(jobs))
}

/// The echo agent's name.
pub const ECHO_AGENT: &str = "echo";
/// The agent that runs the digest workflow on its prompt's words.
pub const DISPATCH_AGENT: &str = "dispatch";
/// The echo chat model's name.
pub const ECHO_MODEL: &str = "echo-chat";

/// The spec with what the provider serves over NATS besides jobs (the demo
/// stack runs them): the agent `echo` (answers `echo: <prompt>`; streamed,
/// one `message` event per word) and the chat model `echo-chat` (answers
/// with the last message's text). Both need NATS, discovery and the document
/// service, so the in-process tests use [`spec`] alone.
///
/// # Panics
///
/// Never: the model name is a valid constant (a test builds it).
#[allow(clippy::expect_used)]
pub fn with_agents_and_models(spec: ModuleSpec) -> ModuleSpec {
    let models = ModelHost::new()
        .model(
            ChatModelSpec::new(ECHO_MODEL)
                .expect("a valid model name")
                .description("Answers with the last message's text"),
            |input: ChatInput| async move {
                let last = input
                    .messages
                    .last()
                    .map(|m| m.content_text())
                    .unwrap_or_default();
                Ok(ChatMessage::ai(last))
            },
        )
        .expect("one model of that name");
    let agents = AgentHost::new()
        .agent(
            AgentSpec::new(ECHO_AGENT, "Says the prompt back"),
            Arc::new(EchoAgent),
        )
        .agent(
            AgentSpec::new(
                DISPATCH_AGENT,
                "Runs the digest workflow on the prompt's words",
            ),
            Arc::new(DispatchAgent::default()),
        );
    // Models before agents: hosts close in this order, as the reference's.
    spec.serve(Arc::new(models)).serve(Arc::new(agents))
}

/// The web app [`with_app`] serves.
pub const STATUS_APP: &str = "status";

/// Where the demo's app folders are by default: `examples/apps` of this
/// checkout (`DEMO_APPS_DIR` elsewhere, as in the Docker image).
pub fn default_apps_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("apps")
}

/// Serves the web app `status`: the page and stylesheet of
/// `<apps_dir>/status/` and, for every other path, an axum router
/// (`/api/hello` answers who called). Reached in a browser through
/// `abictl serve-apps` at `/apps/demo-provider/status/`.
///
/// # Errors
///
/// The folder's `manifest.json` is missing or malformed.
///
/// # Panics
///
/// Never: one app of that name.
#[allow(clippy::expect_used)]
pub fn with_app(
    spec: ModuleSpec,
    apps_dir: &std::path::Path,
) -> Result<ModuleSpec, abi_sdk::apps::ReadError> {
    use abi_sdk::apps::{AppCaller, AppHost, AppService, AppSpec};
    async fn hello(axum::Extension(who): axum::Extension<AppCaller>) -> String {
        serde_json::json!({"hello": "from demo-provider", "caller": who.caller}).to_string()
    }
    let router = axum::Router::new().route("/api/hello", axum::routing::get(hello));
    let app = AppSpec::read(apps_dir.join(STATUS_APP))?.service(AppService::new(router));
    let host = AppHost::new().app(app).expect("one app of that name");
    Ok(spec.serve(Arc::new(host)))
}

/// The echo agent: one answer, or one streamed event per word.
struct EchoAgent;

impl AgentHandler for EchoAgent {
    fn invoke(&self, prompt: String, _cx: InvocationContext) -> InvokeFuture {
        Box::pin(async move { Ok(format!("echo: {prompt}")) })
    }

    fn stream(&self, prompt: String, _cx: InvocationContext) -> Option<EventStream> {
        let words: Vec<_> = prompt
            .split_whitespace()
            .map(|w| Ok(AgentEvent::message(w.to_owned())))
            .collect();
        Some(Box::pin(futures::stream::iter(words)))
    }
}

/// The dispatch agent: triggers the `digest` workflow with the prompt's
/// words and answers its summary, so one `abictl invoke` goes through an
/// agent, a workflow, the consumer's job and the document service (one
/// trace, with `scripts/stack.sh --traces`). It calls as this module, from
/// the module's own settings (`NATS_URL`, `ABI_PROJECT`, `ABI_MODULE_KEY`).
#[derive(Default)]
struct DispatchAgent {
    digest: Arc<tokio::sync::OnceCell<abi_sdk::jobs::JobClient>>,
}

/// How long a dispatched digest may take.
const DISPATCH_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The digest workflow's client, made once.
async fn digest_client(
    cell: &tokio::sync::OnceCell<abi_sdk::jobs::JobClient>,
) -> Result<&abi_sdk::jobs::JobClient, abi_sdk::BoxError> {
    cell.get_or_try_init(|| async {
        let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} is not set"));
        // The module's own NATS settings (NATS_URL, credentials, TLS).
        let settings = abi_process::NatsArgs::from_lookup(&|key| std::env::var(key).ok())
            .validate()
            .map_err(|errors| {
                format!(
                    "NATS settings: {}",
                    errors.first().map(ToString::to_string).unwrap_or_default()
                )
            })?;
        let nats = settings.connect("demo-provider dispatch").await?;
        let token = abi_sdk::TokenSource::module_key(MODULE_ID, var("ABI_MODULE_KEY")?);
        let client = abi_sdk::jobs::JobClient::new(
            nats,
            token,
            var("ABI_PROJECT")?,
            MODULE_ID,
            DIGEST_WORKFLOW,
        );
        Ok::<_, abi_sdk::BoxError>(client)
    })
    .await
}

/// Runs the digest on `prompt`'s words: `<run id> <status>: <summary>`.
async fn dispatch(
    cell: &tokio::sync::OnceCell<abi_sdk::jobs::JobClient>,
    prompt: String,
) -> Result<String, abi_sdk::BoxError> {
    let words: Vec<String> = prompt.split_whitespace().map(str::to_owned).collect();
    let run = digest_client(cell)
        .await?
        .trigger(serde_json::json!({ "words": words }), None)
        .await?;
    let record = run.wait(DISPATCH_WAIT).await?;
    let summary = record
        .result
        .as_ref()
        .and_then(|r| r.get("summary"))
        .and_then(|s| s.as_str())
        .unwrap_or_default()
        .to_owned();
    Ok(format!("{} {}: {summary}", run.run_id(), record.status))
}

impl AgentHandler for DispatchAgent {
    fn invoke(&self, prompt: String, _cx: InvocationContext) -> InvokeFuture {
        let cell = self.digest.clone();
        Box::pin(async move {
            dispatch(&cell, prompt)
                .await
                .map_err(|e| abi_sdk::agents::HandlerError::new(e.to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_job_declarations_are_valid() {
        let spec = super::with_jobs(super::spec("1.0.0"));
        let jobs = &spec.descriptor().jobs;
        assert_eq!(jobs.len(), 5);
        let digest = jobs.iter().find(|j| j.name == super::DIGEST_WORKFLOW);
        assert_eq!(digest.map(|j| j.kind.as_str()), Some("workflow"));
    }

    #[test]
    fn the_typed_declarations_give_the_descriptors_discovery_gets() {
        use abi_sdk::pb;
        let spec = super::spec("1.0.0");
        let nightly = pb::JobDescriptor {
            name: "nightly-report".into(),
            description: "Builds the nightly report".into(),
            contract_major: 1,
            kind: "job".into(),
            max_concurrency: 1,
            max_attempts: 3,
            timeout_seconds: 600.0,
            triggers: vec![pb::JobTrigger {
                kind: "cron".into(),
                spec: "0 0 2 * * *".into(),
                time_zone: "UTC".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(spec.descriptor().jobs, [nightly]);
        let summarizer = pb::AgentDescriptor {
            name: "summarizer".into(),
            description: "Summarizes a text".into(),
            contract_major: 1,
            // The typed spec declares the invoke capability every agent has.
            capabilities: vec!["agent.invoke.v1".into(), "summarize".into()],
        };
        assert_eq!(spec.descriptor().agents, [summarizer]);
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn the_app_declaration_is_read_from_its_folder() {
        let spec = super::with_app(super::spec("1.0.0"), &super::default_apps_dir()).unwrap();
        let app = &spec.descriptor().apps[0];
        assert_eq!(
            (app.name.as_str(), app.title.as_str()),
            (super::STATUS_APP, "Provider status")
        );
        assert_eq!(app.entry, "index.html");
    }

    #[test]
    fn the_agent_and_model_declarations_are_valid() {
        let spec = super::with_agents_and_models(super::spec("1.0.0"));
        let names: Vec<_> = spec.descriptor().agents.iter().map(|a| &a.name).collect();
        assert_eq!(
            names,
            ["summarizer", super::ECHO_AGENT, super::DISPATCH_AGENT]
        );
        assert_eq!(spec.descriptor().models[0].name, super::ECHO_MODEL);
        assert_eq!(spec.descriptor().models[0].kind, "chat");
    }
}
