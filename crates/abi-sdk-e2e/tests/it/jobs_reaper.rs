//! The reaper: runs nothing will finish are FAILED with the reference's
//! messages; live runs and runs JetStream can still redeliver are left alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk::documents::{CollectionSpec, Data, Datetime, FieldSpec, Value};
use abi_sdk::jobs::{JobContext, JobHost, JobResult, JobSpec};
use abi_wire::jobs;
use serde_json::json;

use super::jobs_fixture::{Setup, fast};

const MODULE: &str = "acme.billing";

fn ago(secs: i64) -> String {
    Datetime::from_unix_micros(Datetime::now().unix_micros() - secs * 1_000_000)
        .unwrap()
        .isoformat()
}

fn record(status: &str, attempt: i64, max_attempts: i64, seen: &str, sequence: u64) -> Data {
    let mut data = Data::new();
    data.insert("job".into(), "ingest".into());
    data.insert("status".into(), status.into());
    data.insert("attempt".into(), Value::Int(attempt));
    data.insert("max_attempts".into(), Value::Int(max_attempts));
    data.insert("heartbeat_at".into(), seen.into());
    data.insert("started_at".into(), seen.into());
    if status == "RETRYING" {
        data.insert("retry_at".into(), seen.into());
    }
    data.insert(
        "sequence".into(),
        Value::Int(i64::try_from(sequence).unwrap()),
    );
    data
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_runs_are_failed_and_the_others_left_alone() {
    let setup = Setup::start().await;
    // Stored before the consumer exists: never delivered, still in the stream.
    let job = setup.client(MODULE, "ingest");
    let kept = [
        job.trigger(json!({}), None).await.unwrap(),
        job.trigger(json!({}), None).await.unwrap(),
    ];
    let seq = |i: usize| jobs::parse_run_id(kept[i].run_id()).unwrap().1;
    // Bound, not serving: nothing delivers those triggers (a delivery would
    // race the records written below) and no upkeep runs on its own.
    let host = JobHost::new().options(fast()).job(
        JobSpec::new("ingest").unwrap(),
        |_cx: JobContext| -> futures::future::BoxFuture<'static, JobResult> {
            Box::pin(async { Ok(json!(null)) })
        },
    );
    let host = host.bind(setup.links(MODULE, "rust-1"));
    let docs = setup.links(MODULE, "x").documents;
    let collection = jobs::runs_collection(&setup.project);
    let mut spec = CollectionSpec::new(collection.clone());
    for field in ["job", "status", "finished_at"] {
        spec = spec.field(FieldSpec::new(field, "string").indexed());
    }
    docs.ensure_collection(spec).await.unwrap();
    let old = ago(600);
    let cases = [
        (
            seq(0),
            record("RUNNING", 1, 1, &old, seq(0)),
            Some("FAILED"),
        ),
        (
            999_999,
            record("RETRYING", 1, 3, &ago(60), 999_999),
            Some("FAILED"),
        ),
        (seq(1), record("RETRYING", 1, 3, &ago(60), seq(1)), None),
        (999_998, record("RUNNING", 1, 1, &ago(0), 999_998), None),
        (
            999_997,
            record("RUNNING", 1, 3, &old, 999_997),
            Some("FAILED"),
        ),
    ];
    for (sequence, data, _) in &cases {
        docs.put(
            &collection,
            &jobs::run_id("ingest", *sequence),
            data.clone(),
            Some(0),
        )
        .await
        .unwrap();
    }
    assert_eq!(host.reap_lost_runs().await.unwrap(), 3);
    for (sequence, data, expected) in &cases {
        let run = job.run(jobs::run_id("ingest", *sequence));
        let record = run.status().await.unwrap();
        let before = match &data["status"] {
            Value::String(s) => s.clone(),
            _ => unreachable!(),
        };
        assert_eq!(
            record.status,
            expected.map_or(before, str::to_owned),
            "{sequence}"
        );
    }
    let job = &job;
    let error = |sequence| async move {
        job.run(jobs::run_id("ingest", sequence))
            .status()
            .await
            .unwrap()
            .error
    };
    assert_eq!(
        error(seq(0)).await,
        format!("Lost: no heartbeat since {old} (its host stopped before the run finished)")
    );
    assert_eq!(
        error(999_999).await,
        "Trigger expired before it could be retried"
    );
    assert_eq!(
        error(999_997).await,
        format!(
            "Lost: no heartbeat since {old}, and its trigger expired before it could be retried"
        )
    );
    host.close_now().await;
    setup.stop().await;
}
