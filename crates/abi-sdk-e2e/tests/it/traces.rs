//! One trace per call chain, across Python and Rust processes: every
//! process exports its spans over OTLP to a real receiver (`abictl traces
//! --json`, a process), and the chain's spans share one trace id, each with
//! its parent among them.
//!
//! - Mixed: the reference's caller (`agent_peer.py call`, under a root span)
//!   invokes our agent host (`agent-module`), whose run records go to our
//!   document service (`abi-documents`, a process) and whose handler
//!   triggers a job the reference's `JobHost` runs (`job_peer.py serve`),
//!   which writes its records to our document service too.
//! - Rust only: `abictl invoke` calls the same agent, whose handler triggers
//!   a job our `job-module` runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, HashMap};
use std::process::Stdio;
use std::time::Duration;

use abi_sdk_e2e::{SECRET, World};
use abi_test_support::{python, workspace_root};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// Spans leave each process every second; this is for a loaded machine.
const DEADLINE: Duration = Duration::from_secs(90);
const AGENTS: &str = "rs.agents";
/// No span of a trace for this long after it is whole: every process has
/// sent what it had of it (they send every second).
const QUIET: Duration = Duration::from_millis(3000);

/// `abictl traces --json`: its address, and the spans it prints.
struct Receiver {
    endpoint: String,
    spans: mpsc::UnboundedReceiver<Value>,
    seen: Vec<Value>,
    _child: Child,
}

impl Receiver {
    async fn start() -> Self {
        let abictl = binary("abi-cli", "abictl");
        let mut child = Command::new(abictl)
            .args(["traces", "--listen", "127.0.0.1:0", "--json"])
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .expect("the receiver starts")
            .unwrap()
            .unwrap();
        let endpoint = first
            .split("OTEL_EXPORTER_OTLP_ENDPOINT=")
            .nth(1)
            .and_then(|rest| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        let (tx, spans) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(span) = serde_json::from_str::<Value>(&line)
                    && tx.send(span).is_err()
                {
                    break;
                }
            }
        });
        Self {
            endpoint,
            spans,
            seen: Vec::new(),
            _child: child,
        }
    }

    /// The environment a traced process gets, named `service`: the
    /// reference's optional tracing packages importable for a Python one
    /// (`scripts/setup.sh` keeps them apart, in `.venv/otel`).
    fn env(&self, service: &str) -> [(&'static str, String); 3] {
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.endpoint.clone()),
            ("OTEL_SERVICE_NAME", service.to_owned()),
            (
                "PYTHONPATH",
                workspace_root().join(".venv/otel").display().to_string(),
            ),
        ]
    }

    /// Spans until `done` says the trace it finds is whole; that trace.
    async fn until(&mut self, done: impl Fn(&[Value]) -> Option<String>) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            if let Some(trace) = done(&self.seen) {
                // The trace's spans still on their way (each process sends
                // every second) arrive before it has been quiet for QUIET.
                // Only its own spans count: the processes go on exporting
                // others (lease renewals, fetches), often enough that the
                // whole stream is never quiet for that long.
                let mut quiet = tokio::time::Instant::now() + QUIET;
                while let Ok(Some(span)) =
                    tokio::time::timeout_at(quiet.min(deadline), self.spans.recv()).await
                {
                    if span["trace_id"] == trace.as_str() {
                        quiet = tokio::time::Instant::now() + QUIET;
                    }
                    self.seen.push(span);
                }
                return self
                    .seen
                    .iter()
                    .filter(|s| s["trace_id"] == trace.as_str())
                    .cloned()
                    .collect();
            }
            match tokio::time::timeout_at(deadline, self.spans.recv()).await {
                Ok(Some(span)) => self.seen.push(span),
                _ => panic!("the trace never came whole; spans seen: {:#?}", self.seen),
            }
        }
    }
}

/// A workspace binary, beside this package's own (built by the workspace run).
fn binary(package: &str, bin: &str) -> std::path::PathBuf {
    let beside = std::path::Path::new(env!("CARGO_BIN_EXE_agent-module"));
    abi_test_support::workspace_binary(beside, package, bin)
}

fn field<'a>(span: &'a Value, key: &str) -> &'a str {
    span[key].as_str().unwrap_or("")
}

/// The spans of `trace` named `name` from `service` of `kind`.
fn find<'a>(trace: &'a [Value], service: &str, kind: &str, name: &str) -> Vec<&'a Value> {
    trace
        .iter()
        .filter(|s| {
            field(s, "service") == service && field(s, "kind") == kind && field(s, "name") == name
        })
        .collect()
}

/// Whether `trace` holds a span of `service`, `kind` and `name`.
fn holds(spans: &[Value], trace: &str, service: &str, kind: &str, name: &str) -> bool {
    spans.iter().any(|s| {
        field(s, "trace_id") == trace
            && field(s, "service") == service
            && field(s, "kind") == kind
            && field(s, "name") == name
    })
}

/// Runs `command` (a caller), checks it answered `relayed:SUCCEEDED`.
async fn relayed(command: &mut Command) {
    let out = tokio::time::timeout(DEADLINE, command.output())
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    assert!(
        answer.contains("relayed:SUCCEEDED"),
        "{answer}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The trace id of the first span `service` exported named `name`.
fn trace_of(spans: &[Value], service: &str, kind: &str, name: &str) -> Option<String> {
    spans
        .iter()
        .find(|s| {
            field(s, "service") == service && field(s, "kind") == kind && field(s, "name") == name
        })
        .map(|s| field(s, "trace_id").to_owned())
}

/// One root, every other span's parent in the trace, and `child`'s parent
/// a span of `parent_service` named `parent_name`.
fn parent_of<'a>(trace: &'a [Value], child: &Value) -> Option<&'a Value> {
    trace
        .iter()
        .find(|s| field(s, "span_id") == field(child, "parent_span_id"))
}

fn check_links(trace: &[Value]) {
    let ids: BTreeSet<&str> = trace.iter().map(|s| field(s, "span_id")).collect();
    let roots: Vec<&Value> = trace
        .iter()
        .filter(|s| field(s, "parent_span_id").is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "one root: {roots:#?}");
    for span in trace {
        let parent = field(span, "parent_span_id");
        assert!(
            parent.is_empty() || ids.contains(parent),
            "{} of {} has a parent no process exported: {trace:#?}",
            field(span, "name"),
            field(span, "service")
        );
    }
}

fn spawn_agents(world: &World, receiver: &Receiver, relay: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_agent-module"))
        .env_remove("ABI_ROLLOUT_ID")
        .env_remove("ABI_ROLLOUT_MODULES")
        .envs(world.module_env(AGENTS))
        .envs(receiver.env("rs-agents"))
        .env("E2E_RELAY", relay)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Our document service as a process, exporting its spans.
async fn documents(world: &World, receiver: &Receiver, dir: &std::path::Path) -> Child {
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    abi_discovery::platform::prepare_module_streams(
        &async_nats::jetstream::new(nats),
        &world.project,
        1,
    )
    .await
    .unwrap();
    let bin = binary("abi-documents", "abi-documents");
    Command::new(bin)
        .env("NATS_URL", world.nats.url())
        .env("ABI_JWT_SECRET", SECRET)
        .env("ABI_DOCUMENTS_URL", dir.join("docs.sqlite"))
        .env("ABI_LOG", "warn")
        .envs(receiver.env("abi-documents"))
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn stop(child: &mut Child) {
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_caller_our_agent_host_and_documents_and_a_python_job_host_share_one_trace() {
    let world = World::start(10.0).await;
    let dir = tempfile::tempdir().unwrap();
    let mut receiver = Receiver::start().await;
    let mut docs = documents(&world, &receiver, dir.path()).await;
    let token = abi_test_support::requests::service_token(SECRET, "py.jobs");
    let mut jobs = Command::new(python())
        .arg(workspace_root().join("tests/interop/job_peer.py"))
        .args([
            "serve",
            &world.nats.url(),
            &token,
            &world.project,
            "py.jobs",
            "echo",
        ])
        .envs(receiver.env("py.jobs"))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut ready = BufReader::new(jobs.stdout.take().unwrap()).lines();
    tokio::time::timeout(DEADLINE, ready.next_line())
        .await
        .expect("the Python job host starts")
        .unwrap();
    let mut agents = spawn_agents(&world, &receiver, "py.jobs/echo");
    world.wait_status(AGENTS, abi_wire::status::READY).await;

    // The reference's caller, under a root span of its own.
    let key = abi_auth::module_key(SECRET, "py.caller").unwrap();
    let actions = r#"[{"op": "invoke", "prompt": "relay", "timeout": 60}]"#;
    let mut caller = Command::new(python());
    caller
        .arg(workspace_root().join("tests/interop/agent_peer.py"))
        .args([
            "call",
            &world.nats.url(),
            &key,
            "py.caller",
            &world.project,
            AGENTS,
            actions,
        ])
        .envs(receiver.env("py.caller"));
    relayed(&mut caller).await;

    // Whole once the Python job host's record writes reached our document
    // service under the run's consumer span.
    let trace = receiver
        .until(|spans| {
            let trace = trace_of(spans, "py.caller", "internal", "py.caller calls")?;
            let mine =
                |service: &str, kind: &str, name: &str| holds(spans, &trace, service, kind, name);
            (mine("rs-agents", "server", "agent/submit")
                && mine("py.jobs", "consumer", "job echo")
                && mine("abi-documents", "server", "document/put")
                && spans
                    .iter()
                    .filter(|s| {
                        field(s, "trace_id") == trace && field(s, "service") == "abi-documents"
                    })
                    .count()
                    >= 2)
                .then_some(trace)
        })
        .await;
    let services: BTreeSet<&str> = trace.iter().map(|s| field(s, "service")).collect();
    for service in ["py.caller", "rs-agents", "abi-documents", "py.jobs"] {
        assert!(
            services.contains(service),
            "{service} in the trace: {services:?}"
        );
    }
    check_links(&trace);
    // Who called whom, hop by hop.
    let submit = find(&trace, "rs-agents", "server", "agent/submit")[0];
    let caller = parent_of(&trace, submit).unwrap();
    assert_eq!(
        (field(caller, "service"), field(caller, "kind")),
        ("py.caller", "client")
    );
    let run = find(&trace, "py.jobs", "consumer", "job echo")[0];
    let trigger = parent_of(&trace, run).unwrap();
    assert_eq!(
        (
            field(trigger, "service"),
            field(trigger, "kind"),
            field(trigger, "name")
        ),
        ("rs-agents", "client", "jobs/trigger")
    );
    let by_python = find(&trace, "abi-documents", "server", "document/put")
        .into_iter()
        .filter(|s| parent_of(&trace, s).is_some_and(|p| field(p, "service") == "py.jobs"))
        .count();
    assert!(
        by_python > 0,
        "the Python host's record writes reached our service: {trace:#?}"
    );

    stop(&mut agents).await;
    stop(&mut jobs).await;
    stop(&mut docs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abictl_our_agent_host_job_host_and_documents_share_one_trace() {
    let world = World::start(10.0).await;
    let dir = tempfile::tempdir().unwrap();
    let mut receiver = Receiver::start().await;
    let mut docs = documents(&world, &receiver, dir.path()).await;
    let mut jobs = Command::new(env!("CARGO_BIN_EXE_job-module"))
        .env_remove("ABI_ROLLOUT_ID")
        .env_remove("ABI_ROLLOUT_MODULES")
        .envs(world.module_env("rs.jobs"))
        .envs(receiver.env("rs-jobs"))
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut agents = spawn_agents(&world, &receiver, "rs.jobs/ingest");
    world.wait_status(AGENTS, abi_wire::status::READY).await;
    world.wait_status("rs.jobs", abi_wire::status::READY).await;

    let abictl = binary("abi-cli", "abictl");
    let env: HashMap<String, String> = world.module_env("caller").into_iter().collect();
    let mut caller = Command::new(abictl);
    caller
        .args(["invoke", AGENTS, "echo", "relay", "--as", "caller"])
        .env("NATS_URL", world.nats.url())
        .env("ABI_PROJECT", &world.project)
        .env("ABI_MODULE_KEY", &env["ABI_MODULE_KEY"])
        .envs(receiver.env("abictl"));
    relayed(&mut caller).await;

    let trace = receiver
        .until(|spans| {
            let trace = trace_of(spans, "abictl", "client", "agent/submit")?;
            let mine =
                |service: &str, kind: &str, name: &str| holds(spans, &trace, service, kind, name);
            (mine("rs-agents", "server", "agent/submit")
                && mine("rs-jobs", "consumer", "job ingest")
                && spans.iter().any(|s| {
                    field(s, "trace_id") == trace
                        && field(s, "service") == "abi-documents"
                        && field(s, "name") == "document/put"
                        && spans.iter().any(|p| {
                            field(p, "span_id") == field(s, "parent_span_id")
                                && field(p, "service") == "rs-jobs"
                        })
                }))
            .then_some(trace)
        })
        .await;
    check_links(&trace);
    let run = find(&trace, "rs-jobs", "consumer", "job ingest")[0];
    let trigger = parent_of(&trace, run).unwrap();
    assert_eq!(
        (field(trigger, "service"), field(trigger, "name")),
        ("rs-agents", "jobs/trigger")
    );

    stop(&mut agents).await;
    stop(&mut jobs).await;
    stop(&mut docs).await;
}
