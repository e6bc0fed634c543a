//! The console's JSON API and event stream against a real nats-server, the
//! discovery and document services and real module processes: modules come
//! and go on the stream as they register and stop; a DEGRADED instance
//! names its missing dependency; jobs, runs, a workflow's steps and search
//! answer from the records; actions are refused unless allowed, bad input
//! gets a clear code and changes nothing, and a batch cancel needs its
//! typed confirmation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_test_support::wait_until;
use abi_wire::ErrorCode;
use abi_wire::jobs::RunStatus;
use abi_wire::status::{DEGRADED, READY};
use serde_json::{Value, json};

use super::console_fixture::{
    ConsoleUnderTest, DEADLINE, EventStream, instances, job_module, stop_process,
};
use super::jobs_fixture::Documents;

const JOBS: &str = "acme.jobs";
const BLOCKING: &str = "acme.blocking";
const USER: &str = "acme.user";

fn code(body: &Value) -> &str {
    body["code"].as_str().unwrap_or("")
}

/// Polls a run's detail until its status is terminal.
async fn ended(console: &ConsoleUnderTest, module: &str, run_id: &str) -> Value {
    let path = format!("/api/runs/{module}/{run_id}");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let (status, body) = console.get(&path).await;
        if status == 200 && body["row"]["ended"] == true {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "run {run_id} never ended: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_follows_modules_and_runs_and_acts_only_when_allowed() {
    let world = abi_sdk_e2e::World::start(5.0).await;
    let documents = Documents::start(&world.nats.url(), &world.project, abi_sdk_e2e::SECRET).await;
    let console = ConsoleUnderTest::start(&world, true).await;
    let readonly = ConsoleUnderTest::start(&world, false).await;
    let mut events = EventStream::open(console.addr).await;
    let (kind, _) = events.next().await;
    assert_eq!(kind, "modules", "a page gets the modules view first");

    // A module starts: the stream shows it READY, no page asks again.
    let mut jobs = job_module(&world, JOBS, false, &[]);
    let view = events
        .until("modules", |v| {
            instances(v, JOBS).iter().any(|(_, s, _)| s == READY)
        })
        .await;
    let (_, _, generation) = &instances(&view, JOBS)[0];
    assert_eq!(generation, "serving");
    let (status, modules) = console.get("/api/modules").await;
    assert_eq!(status, 200);
    assert!(!instances(&modules, JOBS).is_empty(), "{modules}");

    // Jobs and workflows with their kinds.
    let (_, listed) = console.get("/api/jobs").await;
    let kinds: Vec<(String, String)> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["name"].as_str().unwrap().to_owned(),
                j["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(
        kinds.contains(&("ingest".into(), abi_wire::jobs::PLAIN_KIND.into())),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&("flow".into(), abi_wire::workflows::KIND.into())),
        "{kinds:?}"
    );

    // Read only: refused, nothing triggered.
    let trigger = format!("/api/jobs/{JOBS}/ingest/trigger");
    let (status, body) = readonly.post(&trigger, r#"{"n": 1}"#).await;
    assert_eq!(
        (status, code(&body)),
        (403, ErrorCode::PermissionDenied.as_str()),
        "{body}"
    );
    // Bad input: a clear code, nothing triggered either.
    let (status, body) = console.post(&trigger, "[1, 2]").await;
    assert_eq!(
        (status, code(&body)),
        (400, ErrorCode::InvalidArgument.as_str()),
        "{body}"
    );
    let (status, body) = console.post(&trigger, "{not json").await;
    assert_eq!(
        (status, code(&body)),
        (400, ErrorCode::InvalidArgument.as_str()),
        "{body}"
    );
    let (status, body) = console
        .post(&format!("/api/jobs/{JOBS}/nope/trigger"), "{}")
        .await;
    assert_eq!(
        (status, code(&body)),
        (404, ErrorCode::JobNotFound.as_str()),
        "{body}"
    );
    let runs_path = format!("/api/jobs/{JOBS}/ingest/runs");
    let (_, runs) = console.get(&runs_path).await;
    assert_eq!(runs["runs"], json!([]), "no run was triggered by a refusal");

    // A run, announced on the stream, then read back.
    let (status, body) = console.post(&trigger, r#"{"n": 1}"#).await;
    assert_eq!(status, 200, "{body}");
    let run_id = body["run_id"].as_str().unwrap().to_owned();
    events
        .until("runs", |v| {
            v.as_array().is_some_and(|jobs| {
                jobs.iter()
                    .any(|j| j["module_id"] == JOBS && j["job"] == "ingest")
            })
        })
        .await;
    let detail = ended(&console, JOBS, &run_id).await;
    assert_eq!(detail["row"]["status"], RunStatus::Succeeded.as_str());
    assert_eq!(detail["record"]["payload"], json!({"n": 1}));
    assert_eq!(detail["record"]["result"], json!({"n": 1}));
    let (_, runs) = console.get(&format!("{runs_path}?status=SUCCEEDED")).await;
    assert_eq!(runs["runs"][0]["run_id"], run_id.as_str());
    let (_, failed) = console
        .get(&format!("{runs_path}?status=FAILED,TIMED_OUT"))
        .await;
    assert_eq!(failed["runs"], json!([]));
    let (status, body) = console.get(&format!("{runs_path}?status=BOGUS")).await;
    assert_eq!(
        (status, code(&body)),
        (400, ErrorCode::InvalidArgument.as_str()),
        "{body}"
    );
    let (status, body) = console
        .post(&format!("/api/runs/{JOBS}/{run_id}/cancel"), "")
        .await;
    assert_eq!(
        (status, code(&body)),
        (409, ErrorCode::Conflict.as_str()),
        "an ended run: {body}"
    );
    let (status, body) = console
        .get(&format!("/api/runs/{JOBS}/ingest:999999"))
        .await;
    assert_eq!(status, 404, "{body}");

    // A workflow run: its journal's steps, in order.
    let (_, body) = console
        .post(&format!("/api/jobs/{JOBS}/flow/trigger"), "{}")
        .await;
    let flow_run = body["run_id"].as_str().unwrap().to_owned();
    let detail = ended(&console, JOBS, &flow_run).await;
    let steps: Vec<(&str, &str)> = detail["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["key"].as_str().unwrap(), s["status"].as_str().unwrap()))
        .collect();
    let succeeded = abi_wire::workflows::StepStatus::Succeeded.as_str();
    assert_eq!(steps, [("first", succeeded), ("second", succeeded)]);

    // Search: a run id, an instance id's start.
    let (_, found) = console.get(&format!("/api/search?q={run_id}")).await;
    let hrefs: Vec<&str> = found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["href"].as_str().unwrap())
        .collect();
    assert!(
        hrefs.contains(&format!("/runs/{JOBS}/{run_id}").as_str()),
        "{found}"
    );
    let instance = instances(&view, JOBS)[0].0.clone();
    let (_, found) = console
        .get(&format!("/api/search?q={}", &instance[..8]))
        .await;
    assert!(
        found["hits"][0]["href"]
            .as_str()
            .unwrap()
            .ends_with(&instance),
        "{found}"
    );

    // A batch cancel takes its typed confirmation, and then cancels.
    let mut blocking = job_module(&world, BLOCKING, true, &[]);
    world.wait_status(BLOCKING, READY).await;
    let (_, body) = console
        .post(
            &format!("/api/jobs/{BLOCKING}/ingest/trigger"),
            r#"{"block": true}"#,
        )
        .await;
    let blocked = body["run_id"].as_str().unwrap().to_owned();
    let running = format!("/api/jobs/{BLOCKING}/ingest/runs?status=RUNNING");
    wait_until(DEADLINE, || async {
        console.get(&running).await.1["runs"]
            .as_array()
            .is_some_and(|r| r.len() == 1)
    })
    .await
    .expect("the blocking run runs");
    let cancel = format!("/api/jobs/{BLOCKING}/ingest/cancel");
    let (status, body) = console
        .post(&cancel, r#"{"status": "RUNNING", "confirm": "cancel 2"}"#)
        .await;
    assert_eq!(
        (status, code(&body)),
        (409, ErrorCode::Conflict.as_str()),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("cancel 1"),
        "{body}"
    );
    let (status, body) = console
        .post(&cancel, r#"{"status": "SUCCEEDED", "confirm": "cancel 0"}"#)
        .await;
    assert_eq!(
        (status, code(&body)),
        (400, ErrorCode::InvalidArgument.as_str()),
        "ended runs: {body}"
    );
    let (status, body) = console
        .post(&cancel, r#"{"status": "RUNNING", "confirm": "cancel 1"}"#)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["sent"], json!([blocked]));
    let detail = ended(&console, BLOCKING, &blocked).await;
    assert_eq!(detail["row"]["status"], RunStatus::Cancelled.as_str());

    // A dependent loses its dependency: DEGRADED, naming what is missing.
    let mut user = abi_sdk_e2e::ModuleProc::spawn(
        USER,
        &[
            world.module_env(USER),
            vec![("E2E_DEPS".into(), format!("{JOBS}:1"))],
        ]
        .concat(),
    );
    events
        .until("modules", |v| {
            instances(v, USER).iter().any(|(_, s, _)| s == READY)
        })
        .await;
    stop_process(&mut jobs).await;
    let unmet = |v: &Value| {
        v["modules"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["module_id"] == USER))
            .map(|m| m["instances"][0]["unmet"].clone())
            .unwrap_or(Value::Null)
    };
    // DEGRADED while the dependency drains, then with it gone.
    let missing = abi_registry::overview::Edge::Missing.label();
    let view = events
        .until("modules", |v| {
            instances(v, USER).iter().any(|(_, s, _)| s == DEGRADED)
                && unmet(v)[0]["state"] == missing
        })
        .await;
    assert_eq!(
        unmet(&view),
        json!([{"module_id": JOBS, "contract_major": 1, "state": missing}])
    );

    // Evict: refused read-only, done otherwise.
    let user_instance = instances(&view, USER)[0].0.clone();
    let evict_path = format!("/api/instances/{user_instance}/evict");
    let (status, _) = readonly.post(&evict_path, "").await;
    assert_eq!(status, 403);
    let (status, body) = console.post(&evict_path, "").await;
    assert_eq!(
        (status, body["evicted"].clone()),
        (200, json!(true)),
        "{body}"
    );
    let (status, body) = console
        .post("/api/instances/no-such-instance/evict", "")
        .await;
    assert_eq!(status, 404, "{body}");

    user.signal("TERM");
    user.wait().await;
    stop_process(&mut blocking).await;
    console.stop().await;
    readonly.stop().await;
    documents.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_agent_runs_and_counts_chats_per_model_and_replica() {
    use super::models_fixture::{Process, chat_model, ready_instances};
    use abi_sdk::agents::SubmitOptions;
    use abi_sdk::models::ChatMessage;

    let setup = super::agents_fixture::Setup::start(5.0).await;
    let world = &setup.world;
    let agents_module = super::agents_fixture::MODULE;
    let console = ConsoleUnderTest::start(world, false).await;
    let mut agent_process = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-module"))
        .env_remove("ABI_ROLLOUT_ID")
        .env_remove("ABI_ROLLOUT_MODULES")
        .envs(world.module_env(agents_module))
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let _model = Process::ours(world, "acme.models", "m");
    super::agents_fixture::ready(world, 1).await;
    let replica = ready_instances(world, "acme.models", 1).await.remove(0);
    let mut events = EventStream::open(console.addr).await;

    // An agent run: on the stream, in the list, whole by its id, and found
    // by a search for its invocation id.
    let agent = setup.agent("caller", "echo").await;
    let mut run = agent
        .submit("hello", SubmitOptions::default())
        .await
        .unwrap();
    let invocation = run.invocation_id().to_owned();
    run.result(Some(DEADLINE)).await.unwrap();
    events
        .until("agents", |v| {
            v.as_array()
                .is_some_and(|m| m.contains(&json!(agents_module)))
        })
        .await;
    let (_, listed) = console
        .get(&format!("/api/agents/{agents_module}/runs"))
        .await;
    assert_eq!(
        listed["runs"][0]["invocation_id"],
        invocation.as_str(),
        "{listed}"
    );
    let (status, detail) = console
        .get(&format!("/api/agents/{agents_module}/runs/{invocation}"))
        .await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["row"]["ended"], true, "{detail}");
    let (_, found) = console.get(&format!("/api/search?q={invocation}")).await;
    assert_eq!(
        found["hits"][0]["href"],
        format!("/agents/{agents_module}/{invocation}"),
        "{found}"
    );
    let (status, body) = console
        .get(&format!("/api/agents/{agents_module}/runs/no-such-run"))
        .await;
    assert_eq!(
        (status, code(&body)),
        (404, ErrorCode::InvocationNotFound.as_str()),
        "{body}"
    );

    // Two chats: counted for that model on that replica, pushed to pages.
    let model = chat_model(world, "acme.models", "echo").await;
    for _ in 0..2 {
        model.invoke([ChatMessage::human("hi")]).await.unwrap();
    }
    let counts = events
        .until("chats", |v| {
            v.as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["instance_id"] == replica.as_str() && c["total"] == 2)
            })
        })
        .await;
    let row = counts
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["instance_id"] == replica.as_str())
        .unwrap();
    assert_eq!(
        (
            row["model"].clone(),
            row["module_id"].clone(),
            row["last_minute"].clone()
        ),
        (json!("echo"), json!("acme.models"), json!(2))
    );
    let (_, listed) = console.get("/api/agents").await;
    assert!(
        listed["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "echo" && a["module_id"] == agents_module)
    );
    assert!(
        listed["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "echo")
    );

    stop_process(&mut agent_process).await;
    console.stop().await;
}
