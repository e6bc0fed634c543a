//! Schedules: ours are the reference's schedule messages (a host of ours
//! starting after the reference reconciled republishes nothing, so an
//! `@every` interval keeps running), their ticks run as schedule triggers,
//! and indexes beyond the declared schedules are purged; a paused job's
//! host publishes none.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use abi_sdk::jobs::{ControlErrorKind, JobSpec, Trigger};
use abi_test_support::{python, workspace_root};
use abi_wire::jobs;
use futures::StreamExt as _;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

fn spec(name: &str) -> JobSpec {
    JobSpec::new(name)
        .unwrap()
        .trigger(Trigger::every("1s", None).unwrap())
        .unwrap()
        .trigger(Trigger::cron("0 0 3 * * *", "Europe/Paris", Some(&json!({"a": 1}))).unwrap())
        .unwrap()
        .trigger(Trigger::on_event("x.y", None).unwrap())
        .unwrap()
        .trigger(Trigger::every("90s", Some(&json!({"b": [1, "é"]}))).unwrap())
        .unwrap()
}

/// The stored schedule messages of `job`: index → (sequence, headers, body).
async fn schedules(
    setup: &Setup,
    job: &str,
) -> BTreeMap<usize, (u64, BTreeMap<String, String>, String)> {
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let subjects = jobs::JobSubjects::new(&setup.project, MODULE, job);
    let mut found = BTreeMap::new();
    for index in 0..jobs::MAX_TRIGGERS {
        if let Ok(msg) = stream
            .get_last_raw_message_by_subject(&subjects.schedule(index))
            .await
        {
            let headers = msg
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v[0].as_str().to_owned()))
                .collect();
            found.insert(
                index,
                (
                    msg.sequence,
                    headers,
                    String::from_utf8(msg.payload.to_vec()).unwrap(),
                ),
            );
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_are_the_references_and_an_unchanged_every_is_never_republished() {
    let setup = Setup::start().await;
    let out = tokio::process::Command::new(python())
        .arg(workspace_root().join("tests/interop/job_schedules.py"))
        .args([
            &setup.server.url(),
            &setup.token(MODULE),
            &setup.project,
            MODULE,
            "tick",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = schedules(&setup, "tick").await;
    assert_eq!(theirs.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);

    // Our host of the same job finds them identical: nothing republished.
    let mut done = setup
        .nats
        .subscribe(jobs::JobSubjects::new(&setup.project, MODULE, "tick").done())
        .await
        .unwrap();
    let (host, _) = setup.host(MODULE, "rust-1", spec("tick"), fast()).await;
    let after = schedules(&setup, "tick").await;
    let seqs = |m: &BTreeMap<usize, (u64, BTreeMap<String, String>, String)>| {
        m.values().map(|v| v.0).collect::<Vec<_>>()
    };
    assert_eq!(seqs(&after), seqs(&theirs), "no schedule was republished");

    // The same triggers on a job only we reconcile: the same headers and bodies.
    let (other, _) = setup.host(MODULE, "rust-1", spec("tock"), fast()).await;
    let ours = schedules(&setup, "tock").await;
    let tock_target = jobs::JobSubjects::new(&setup.project, MODULE, "tock").trigger();
    let tick_target = jobs::JobSubjects::new(&setup.project, MODULE, "tick").trigger();
    for index in 0..3 {
        let (_, their_headers, their_body) = &theirs[&index];
        let (_, our_headers, our_body) = &ours[&index];
        let pick = |h: &BTreeMap<String, String>, target: &str| {
            jobs::SCHEDULE_HEADERS
                .iter()
                .map(|name| {
                    let v = h.get(*name).cloned();
                    (
                        *name,
                        if v.as_deref() == Some(target) {
                            Some("<target>".into())
                        } else {
                            v
                        },
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            pick(our_headers, &tock_target),
            pick(their_headers, &tick_target)
        );
        assert_eq!(our_body, their_body);
    }

    // The 1 s schedule fires: a run with the schedule's trigger.
    let notice = tokio::time::timeout(DEADLINE, done.next())
        .await
        .unwrap()
        .unwrap();
    let notice: serde_json::Value = serde_json::from_slice(&notice.payload).unwrap();
    assert_eq!(notice["status"], "SUCCEEDED");
    let run = setup
        .client(MODULE, "tick")
        .run(notice["run_id"].as_str().unwrap());
    let record = run.status().await.unwrap().to_json();
    assert_eq!(
        record["trigger"],
        json!({"kind": "schedule", "scheduler": jobs::JobSubjects::new(&setup.project, MODULE, "tick").schedule(0)})
    );
    assert_eq!(record["payload"], json!({}));
    host.close_now().await;
    other.close_now().await;

    // Fewer schedules declared: the stale indexes are purged.
    let fewer = JobSpec::new("tock")
        .unwrap()
        .trigger(Trigger::cron("@daily", "", None).unwrap())
        .unwrap();
    let (host, _) = setup.host(MODULE, "rust-1", fewer, fast()).await;
    let left = schedules(&setup, "tock").await;
    assert_eq!(left.keys().copied().collect::<Vec<_>>(), [0]);
    assert_eq!(left[&0].1[jobs::SCHEDULE_HEADER], "@daily");
    host.close_now().await;

    // Paused (`abictl pause`): a host starting publishes nothing; resuming
    // needs the declaration a client from discovery carries.
    let client = setup.client(MODULE, "tock");
    client.pause_schedules().await.unwrap();
    assert!(schedules(&setup, "tock").await.is_empty());
    let (host, _) = setup.host(MODULE, "rust-1", spec("tock"), fast()).await;
    assert!(
        schedules(&setup, "tock").await.is_empty(),
        "the host of a paused job published a schedule"
    );
    assert!(client.schedules_paused_since().await.unwrap().is_some());
    let refused = client.resume_schedules().await.unwrap_err();
    assert_eq!(refused.kind(), ControlErrorKind::Undeclared);
    host.close_now().await;
    setup.stop().await;
}
