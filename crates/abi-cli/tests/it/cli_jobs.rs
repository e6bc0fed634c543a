//! abictl's job commands (`jobs`, `trigger`, `runs`, `run`, `cancel`)
//! against a real nats-server, the discovery service (which prepares the
//! jobs stream), our document service and the Python reference's `JobHost`
//! (`tests/interop/job_peer.py`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_proto::discovery::v1 as pb;
use abi_test_support::{python, requests, spawn_until_ready, wait_until, workspace_root};
use tokio::process::{Child, Command};

use crate::common::{DEADLINE, SECRET, Stack, descriptor, documents};

async fn python_host(stack: &Stack, module: &str, job: &str) -> Child {
    let mut command = Command::new(python());
    command
        .arg(workspace_root().join("tests/interop/job_peer.py"))
        .args(["serve", &stack.server.url()])
        .arg(requests::service_token(SECRET, module))
        .args([&stack.project, module, job])
        .env("PYTHONUNBUFFERED", "1")
        .stdin(std::process::Stdio::null());
    spawn_until_ready(command, "ready", DEADLINE).await.unwrap()
}

/// Stops a reference host with SIGTERM; it must exit cleanly in time.
async fn stop_python_host(mut host: Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &host.id().unwrap().to_string()])
        .status();
    assert!(
        tokio::time::timeout(DEADLINE, host.wait())
            .await
            .unwrap()
            .unwrap()
            .success()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_lists_declared_jobs_with_their_schedules() {
    let stack = Stack::start().await;
    let mut d = descriptor("billing", &[]);
    d.jobs = vec![pb::JobDescriptor {
        name: "ingest".into(),
        contract_major: 1,
        max_concurrency: 2,
        max_attempts: 3,
        triggers: vec![
            pb::JobTrigger {
                kind: "cron".into(),
                spec: "0 0 6 * * *".into(),
                time_zone: "UTC".into(),
                ..Default::default()
            },
            pb::JobTrigger {
                kind: "every".into(),
                spec: "1h".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    }];
    stack.register(d.clone(), "billing-1", true).await;
    stack.register(d, "billing-2", true).await;
    stack
        .register(descriptor("other", &[]), "other-1", true)
        .await;

    let text = stack.abictl().run(&["jobs"]).await;
    let line = text.ok().lines().find(|l| l.contains("ingest")).unwrap();
    assert!(line.starts_with("billing"), "{line}");
    assert!(line.contains("cron 0 0 6 * * * (UTC); every 1h"), "{line}");
    assert!(line.trim_end().ends_with('2'), "two instances: {line}");
    let json = stack
        .abictl()
        .run(&["jobs", "billing", "--json"])
        .await
        .json();
    assert_eq!(json.as_array().unwrap().len(), 1);
    assert_eq!(json[0]["triggers"][1]["spec"], "1h");
    assert_eq!(json[0]["max_attempts"], 3);
    let none = stack
        .abictl()
        .run(&["jobs", "other", "--json"])
        .await
        .json();
    assert_eq!(none, serde_json::json!([]));

    // Pause and resume the schedules (no host here: resume publishes them
    // from the declaration, as a host would).
    let js = async_nats::jetstream::new(stack.nats.clone());
    let stream = js
        .get_stream(abi_wire::jobs::stream(&stack.project))
        .await
        .unwrap();
    let subjects = abi_wire::jobs::JobSubjects::new(&stack.project, "billing", "ingest");
    let schedules = || async {
        let mut found = Vec::new();
        for index in 0..abi_wire::jobs::MAX_TRIGGERS {
            if let Ok(msg) = stream
                .get_last_raw_message_by_subject(&subjects.schedule(index))
                .await
            {
                found.push(
                    msg.headers
                        .get(abi_wire::jobs::SCHEDULE_HEADER)
                        .unwrap()
                        .to_string(),
                );
            }
        }
        found
    };
    let paused = || async {
        stream
            .get_last_raw_message_by_subject(&subjects.paused())
            .await
            .is_ok()
    };
    let resumed = stack.abictl().run(&["resume", "billing", "ingest"]).await;
    assert!(
        resumed.ok().contains("resumed 2 schedule(s)"),
        "{resumed:?}"
    );
    assert_eq!(schedules().await, ["0 0 6 * * *", "@every 1h"]);
    let pause = stack.abictl().run(&["pause", "billing", "ingest"]).await;
    assert!(pause.ok().contains("paused"), "{pause:?}");
    assert!(schedules().await.is_empty(), "no schedule left to tick");
    assert!(paused().await);
    let resumed = stack
        .abictl()
        .run(&["--json", "resume", "billing", "ingest"])
        .await
        .json();
    assert_eq!(resumed["schedules"], 2);
    assert_eq!(schedules().await, ["0 0 6 * * *", "@every 1h"]);
    assert!(!paused().await);
    let undeclared = stack.abictl().run(&["pause", "billing", "nope"]).await;
    assert_eq!(undeclared.code, 1, "{undeclared:?}");
    assert!(
        undeclared.stderr.contains("JOB_NOT_FOUND"),
        "{undeclared:?}"
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_wait_runs_run_and_cancel_against_the_reference_host() {
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(&stack, dir.path()).await;
    let host = python_host(&stack, "billing", "ingest").await;
    // The module declares `ingest` (served by the reference's host) and
    // `nobody` (served by none); triggers are checked against that.
    let mut declared = descriptor("billing", &[]);
    for name in ["ingest", "nobody"] {
        declared.jobs.push(pb::JobDescriptor {
            name: name.into(),
            contract_major: 1,
            kind: "job".into(),
            max_concurrency: 1,
            max_attempts: 1,
            ..Default::default()
        });
    }
    stack.register(declared, "billing-1", true).await;
    let renewing = stack.keep_renewed("billing", "billing-1");

    let done = stack
        .abictl()
        .run(&[
            "trigger",
            "billing",
            "ingest",
            "--payload",
            r#"{"n": 1}"#,
            "--wait",
            "60",
        ])
        .await
        .json();
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    assert_eq!(done["result"], serde_json::json!({"echo": {"n": 1}}));
    let run_id = done["run_id"].as_str().unwrap().to_owned();

    // A payload from a file, large enough (~300 KB) that a `runs` page
    // holds fewer records than asked for: the listing below follows the
    // cursor.
    let file = dir.path().join("big.json");
    let big = serde_json::json!({"big": "x".repeat(300_000)});
    std::fs::write(&file, serde_json::to_vec(&big).unwrap()).unwrap();
    let at_file = format!("@{}", file.display());
    let done_big = stack
        .abictl()
        .run(&[
            "trigger",
            "billing",
            "ingest",
            "--payload",
            &at_file,
            "--wait",
            "60",
        ])
        .await
        .json();
    assert_eq!(done_big["status"], "SUCCEEDED");
    assert!(
        done_big["payload"] == big,
        "the host read the whole payload"
    );

    // A key makes a repeat the same run.
    let keyed = stack
        .abictl()
        .run(&["trigger", "billing", "ingest", "--key", "k", "--json"])
        .await
        .json();
    let repeat = stack
        .abictl()
        .run(&["trigger", "billing", "ingest", "--key", "k", "--json"])
        .await
        .json();
    assert_eq!(repeat["run_id"], keyed["run_id"]);
    assert_eq!(repeat["duplicate"], true);

    let shown = stack
        .abictl()
        .run(&["run", "billing", &run_id])
        .await
        .json();
    assert_eq!(shown["logs"], serde_json::json!([r#"payload {"n": 1}"#]));

    // A blocking run, cancelled once it runs.
    let blocked = stack
        .abictl()
        .run(&[
            "trigger",
            "billing",
            "ingest",
            "--payload",
            r#"{"block": true}"#,
        ])
        .await;
    let blocked_id = blocked.ok().trim().to_owned();
    let status = |id: String| {
        let ctl = stack.abictl();
        async move { ctl.run(&["run", "billing", &id]).await.json()["status"].clone() }
    };
    wait_until(DEADLINE, || async {
        status(blocked_id.clone()).await == "RUNNING"
    })
    .await
    .unwrap();
    let cancel = stack
        .abictl()
        .run(&["cancel", "billing", &blocked_id])
        .await;
    assert!(cancel.ok().contains("cancel sent"), "{cancel:#?}");
    wait_until(DEADLINE, || async {
        status(blocked_id.clone()).await == "CANCELLED"
    })
    .await
    .unwrap();

    // Newest first, by status, as a table or JSON.
    let all = stack
        .abictl()
        .run(&["runs", "billing", "ingest", "--json"])
        .await
        .json();
    let ids: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.first(), Some(&blocked_id.as_str()), "{all}");
    assert!(ids.contains(&run_id.as_str()));
    let cancelled = stack
        .abictl()
        .run(&["runs", "billing", "ingest", "--status", "CANCELLED"])
        .await;
    let text = cancelled.ok();
    assert!(text.starts_with("RUN"), "{text}");
    assert!(
        text.contains(&blocked_id) && !text.contains(&format!("{run_id} ")),
        "{text}"
    );

    // Nobody hosts this job: the wait ends at its deadline with exit 4, and
    // the run stays QUEUED.
    let late = stack
        .abictl()
        .run(&["trigger", "billing", "nobody", "--wait", "0.3"])
        .await;
    assert_eq!(late.code, 4, "{late:#?}");

    // A job nobody declares, or a module nobody registered: refused with
    // exit 1, naming what the module declares, and nothing created.
    let consumers = || async {
        let js = async_nats::jetstream::new(stack.nats.clone());
        let mut stream = js
            .get_stream(abi_wire::jobs::stream(&stack.project))
            .await
            .unwrap();
        stream.info().await.unwrap().state.consumer_count
    };
    let before = consumers().await;
    let undeclared = stack.abictl().run(&["trigger", "billing", "nope"]).await;
    assert_eq!(undeclared.code, 1, "{undeclared:#?}");
    assert!(
        undeclared.stderr.contains("JOB_NOT_FOUND")
            && undeclared.stderr.contains("its jobs: ingest, nobody"),
        "{undeclared:#?}"
    );
    let unregistered = stack
        .abictl()
        .run(&["trigger", "no-such-module", "ingest"])
        .await;
    assert_eq!(unregistered.code, 1, "{unregistered:#?}");
    assert!(
        unregistered.stderr.contains("MODULE_NOT_FOUND"),
        "{unregistered:#?}"
    );
    assert_eq!(consumers().await, before, "no consumer created");

    // Reads never write: a future sequence, or the sequence of another
    // job's trigger, is no run of this job's (exit 1), and no record appears.
    let (_, ingest_seq) = abi_wire::jobs::parse_run_id(&run_id).unwrap();
    for missing in ["ingest:99999".to_owned(), format!("nobody:{ingest_seq}")] {
        let read = stack.abictl().run(&["run", "billing", &missing]).await;
        assert_eq!(read.code, 1, "{read:#?}");
        assert!(read.stderr.contains("no such run"), "{read:#?}");
    }
    // A cancel of a run that does not exist, or that ended, sends nothing.
    let unknown = stack
        .abictl()
        .run(&["cancel", "billing", "ingest:99999"])
        .await;
    assert_eq!(unknown.code, 1, "{unknown:#?}");
    assert!(unknown.stderr.contains("no such run"), "{unknown:#?}");
    let ended = stack.abictl().run(&["cancel", "billing", &run_id]).await;
    assert_eq!(ended.code, 1, "{ended:#?}");
    assert!(
        ended.stderr.contains("already ended SUCCEEDED"),
        "{ended:#?}"
    );
    for job in ["ingest", "nobody"] {
        let listed = stack
            .abictl()
            .run(&["runs", "billing", job, "--json"])
            .await
            .json();
        let written: Vec<_> = listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["error"] == abi_wire::jobs::EXPIRED_UNRUN_ERROR)
            .collect();
        assert!(written.is_empty(), "a read wrote a record: {written:?}");
    }
    // Re-run a run that succeeded, retry one that failed: new runs with the
    // same payloads; a retry of a success is refused.
    let again = stack
        .abictl()
        .run(&["rerun", "billing", &run_id, "--wait", "60"])
        .await
        .json();
    assert_eq!(again["status"], "SUCCEEDED", "{again}");
    assert_ne!(again["run_id"], run_id.as_str());
    assert_eq!(again["payload"], serde_json::json!({"n": 1}));
    let no_retry = stack.abictl().run(&["retry", "billing", &run_id]).await;
    assert_eq!(no_retry.code, 1, "{no_retry:?}");
    assert!(no_retry.stderr.contains("nothing to retry"), "{no_retry:?}");
    let failed = stack
        .abictl()
        .run(&[
            "trigger",
            "billing",
            "ingest",
            "--payload",
            r#"{"fail": "why"}"#,
            "--wait",
            "60",
        ])
        .await;
    assert_eq!(failed.code, 1, "{failed:?}");
    let failed: serde_json::Value = serde_json::from_str(&failed.stdout).unwrap();
    assert_eq!(failed["status"], "FAILED");
    let retried = stack
        .abictl()
        .run(&[
            "retry",
            "billing",
            failed["run_id"].as_str().unwrap(),
            "--wait",
            "60",
        ])
        .await;
    assert_eq!(retried.code, 1, "the retry fails the same way: {retried:?}");
    let retried: serde_json::Value = serde_json::from_str(&retried.stdout).unwrap();
    assert_eq!(retried["status"], "FAILED");
    assert_ne!(retried["run_id"], failed["run_id"]);
    assert_eq!(retried["payload"], serde_json::json!({"fail": "why"}));

    // Purge the triggers nobody runs: counted first, removed with --yes.
    for _ in 0..2 {
        stack
            .abictl()
            .run(&["trigger", "billing", "nobody"])
            .await
            .ok();
    }
    let asked = stack.abictl().run(&["purge", "billing", "nobody"]).await;
    assert_eq!(asked.code, 2, "{asked:?}");
    assert!(
        asked.stderr.contains("has 3 queued trigger(s)"),
        "{asked:?}"
    );
    let purged = stack
        .abictl()
        .run(&["--json", "purge", "billing", "nobody", "--yes"])
        .await
        .json();
    assert_eq!(purged["purged"], 3, "{purged}");
    let asked = stack.abictl().run(&["purge", "billing", "nobody"]).await;
    assert!(
        asked.stderr.contains("has 0 queued trigger(s)"),
        "{asked:?}"
    );

    let bad = stack
        .abictl()
        .run(&["run", "billing", "not-a-run-id"])
        .await;
    assert_eq!(bad.code, 2, "{bad:#?}");
    let unknown = stack
        .abictl()
        .run(&["runs", "nobody", "ingest", "--json"])
        .await
        .json();
    assert_eq!(unknown, serde_json::json!([]));

    stop_python_host(host).await;
    renewing.abort();
    docs.cancel();
    stack.stop().await;
}

/// `abictl workflows` lists the declared workflows, `abictl start` starts
/// one, and `abictl steps` reads its journal as the reference's host wrote
/// it: the timeline in start order, and `--json` the summaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_shows_the_timeline_the_reference_journaled() {
    let stack = Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let docs = documents(&stack, dir.path()).await;
    let host = python_host(&stack, "flows", "flow:workflow:3").await;
    let mut declared = descriptor("flows", &[]);
    declared.jobs.push(pb::JobDescriptor {
        name: "flow".into(),
        contract_major: 1,
        kind: "workflow".into(),
        max_concurrency: 1,
        max_attempts: 3,
        input_schema: r#"{"type":"object"}"#.into(),
        ..Default::default()
    });
    declared.jobs.push(pb::JobDescriptor {
        name: "plain".into(),
        contract_major: 1,
        max_concurrency: 1,
        max_attempts: 1,
        ..Default::default()
    });
    stack.register(declared, "flows-1", true).await;
    let renewing = stack.keep_renewed("flows", "flows-1");

    let listed = stack
        .abictl()
        .run(&["workflows", "flows", "--json"])
        .await
        .json();
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "only the workflow: {listed}"
    );
    assert_eq!(listed[0]["name"], "flow");
    assert_eq!(listed[0]["kind"], "workflow");
    assert_eq!(listed[0]["input_schema"], r#"{"type":"object"}"#);
    let all = stack
        .abictl()
        .run(&["jobs", "flows", "--json"])
        .await
        .json();
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");

    let done = stack
        .abictl()
        .run(&[
            "start",
            "flows",
            "flow",
            "--input",
            r#"{"n": 4}"#,
            "--wait",
            "60",
        ])
        .await
        .json();
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    assert_eq!(done["result"], serde_json::json!({"out": 9}));
    let run_id = done["run_id"].as_str().unwrap().to_owned();

    let table = stack.abictl().run(&["steps", "flows", &run_id]).await;
    let lines: Vec<&str> = table.ok().lines().collect();
    assert!(lines[0].starts_with("KEY"), "{lines:?}");
    assert_eq!(lines.len(), 3, "a header and two steps: {lines:?}");
    for (line, key) in lines[1..].iter().zip(["double", "plus"]) {
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cells[..4], [key, "step", "SUCCEEDED", "1"], "{line}");
    }
    let json = stack
        .abictl()
        .run(&["steps", "flows", &run_id, "--json"])
        .await
        .json();
    assert_eq!(json[0]["key"], "double");
    assert_eq!(json[1]["key"], "plus");
    assert_eq!(json[1]["result_bytes"], 1, "plus returned 9");
    assert!(
        json[0].get("run_id").is_none(),
        "summaries as steps() lists them"
    );

    let none = stack.abictl().run(&["steps", "flows", "flow:999"]).await;
    assert!(none.ok().contains("no journaled steps"), "{none:?}");
    let bad = stack.abictl().run(&["steps", "flows", "not-a-run"]).await;
    assert_eq!(bad.code, 2, "{bad:?}");

    stop_python_host(host).await;
    renewing.abort();
    docs.cancel();
    stack.stop().await;
}
