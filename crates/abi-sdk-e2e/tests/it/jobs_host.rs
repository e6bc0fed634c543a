//! Our job host end to end: a real nats-server, the jobs stream discovery
//! creates, our document service; runs recorded with the reference's fields,
//! retries with backoff, timeouts, cancels, skips, and the fence.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::jobs::JobSpec;
use abi_sdk::jobs::time::fired_at;
use abi_test_support::wait_until;
use abi_wire::jobs;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

/// A reference timestamp: `2026-10-01T12:00:00.123456+00:00`, the fraction
/// only when not zero.
fn is_isoformat(text: &str) -> bool {
    let b = text.as_bytes();
    let base = b.len() >= 25
        && b[4] == b'-'
        && b[10] == b'T'
        && text.ends_with("+00:00")
        && !text.contains('Z');
    base && (b.len() == 25 || (b.len() == 32 && b[19] == b'.'))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_trigger_runs_once_and_is_recorded_with_the_references_fields() {
    let setup = Setup::start().await;
    let spec = JobSpec::new("ingest").unwrap();
    let (host, calls) = setup.host(MODULE, "rust-1", spec, fast()).await;
    let job = setup.client(MODULE, "ingest");
    let run = job.trigger(json!({"n": 1}), None).await.unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED");
    assert_eq!(calls.count(), 1);
    let data = record.to_json();
    let mut keys: Vec<&str> = data
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "attempt",
            "created_at",
            "error",
            "finished_at",
            "fired_at",
            "heartbeat_at",
            "instance",
            "job",
            "logs",
            "max_attempts",
            "module_id",
            "payload",
            "result",
            "run_id",
            "sequence",
            "started_at",
            "status",
            "trace_id",
            "trigger",
        ]
    );
    let sequence = jobs::parse_run_id(run.run_id()).unwrap().1;
    assert_eq!(data["run_id"], run.run_id());
    assert_eq!(data["job"], "ingest");
    assert_eq!(data["module_id"], MODULE);
    assert_eq!(data["attempt"], 1);
    assert_eq!(data["max_attempts"], 1);
    assert_eq!(data["trigger"], json!({"kind": "manual"}));
    assert_eq!(data["payload"], json!({"n": 1}));
    assert_eq!(data["instance"], "rust-1");
    assert_eq!(data["sequence"], sequence);
    assert_eq!(data["error"], "");
    assert_eq!(data["trace_id"], "");
    assert_eq!(data["logs"], json!(["attempt 1 on rust-1"]));
    assert_eq!(data["result"], json!({"echo": {"n": 1}, "host": "rust-1"}));
    for field in [
        "created_at",
        "started_at",
        "heartbeat_at",
        "finished_at",
        "fired_at",
    ] {
        let text = data[field].as_str().unwrap();
        assert!(is_isoformat(text), "{field}: {text}");
    }
    // fired_at is the stored trigger's timestamp as nats-py prints it.
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let stored = stream.get_raw_message(sequence).await.unwrap();
    assert_eq!(
        data["fired_at"],
        fired_at(stored.time.unix_timestamp_nanos())
    );
    // The consumer is the reference's.
    let consumer = stream
        .consumer_info(jobs::JobSubjects::new(&setup.project, MODULE, "ingest").consumer())
        .await
        .unwrap();
    assert_eq!(consumer.config.max_ack_pending, 1);
    assert_eq!(consumer.config.ack_wait, Duration::from_secs(30));
    assert_eq!(consumer.config.max_deliver, -1);
    // Acked: nothing pending.
    assert_eq!(consumer.num_ack_pending, 0);
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_retries_with_backoff_then_fails_after_max_attempts() {
    let setup = Setup::start().await;
    let spec = JobSpec::new("flaky").unwrap().max_attempts(3).unwrap();
    let (host, calls) = setup.host(MODULE, "rust-1", spec, fast()).await;
    let job = setup.client(MODULE, "flaky");
    let started = tokio::time::Instant::now();
    let run = job.trigger(json!({"fail": "boom"}), None).await.unwrap();
    // The first failure is recorded RETRYING with its retry time.
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RETRYING"
    })
    .await
    .unwrap();
    let retrying = run.status().await.unwrap().to_json();
    assert!(
        retrying["retry_at"]
            .as_str()
            .is_some_and(|t| t.ends_with("+00:00"))
    );
    assert_eq!(retrying["error"], "RuntimeError: boom");
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "FAILED");
    assert_eq!(record.attempt, 3);
    assert_eq!(record.error, "RuntimeError: boom");
    assert_eq!(calls.count(), 3);
    // Backoffs 0.2 s then 0.4 s: no retry came sooner.
    assert!(started.elapsed() >= Duration::from_millis(600));

    // Attempts left but not retryable: FAILED at once.
    let run = job
        .trigger(json!({"non_retryable": true}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("FAILED", 1));
    assert_eq!(record.error, "NonRetryable: bad input");

    // A later attempt succeeds.
    let run = job
        .trigger(json!({"fail_attempts": 1}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 2));

    // Skipped.
    let run = job
        .trigger(json!({"skip": "nothing new"}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SKIPPED");
    assert_eq!(record.to_json()["skip_reason"], "nothing new");
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_timeout_is_timed_out_and_a_cancelled_run_is_cancelled() {
    let setup = Setup::start().await;
    let spec = JobSpec::new("slow")
        .unwrap()
        .timeout(Duration::from_millis(300))
        .unwrap()
        .max_concurrency(2)
        .unwrap();
    let (host, _calls) = setup.host(MODULE, "rust-1", spec, fast()).await;
    let job = setup.client(MODULE, "slow");
    let run = job
        .trigger(json!({"ignore_cancel": true}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "TIMED_OUT");
    assert_eq!(record.error, "Timed out after 0.3s");

    let spec = JobSpec::new("long").unwrap();
    let (other, _calls) = setup.host(MODULE, "rust-2", spec, fast()).await;
    let job = setup.client(MODULE, "long");
    let run = job.trigger(json!({"block": true}), None).await.unwrap();
    wait_until(DEADLINE, || async {
        run.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    run.cancel().await.unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "CANCELLED");
    assert!(record.to_json()["finished_at"].is_string());
    // The handler could tell a caller's cancel from a hand-back.
    assert!(
        record.logs.contains(&"stopped: Some(Cancel)".to_owned()),
        "{:?}",
        record.logs
    );
    host.close_now().await;
    other.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_creates_missing_consumers_only_and_start_updates_them() {
    let setup = Setup::start().await;
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let subjects = jobs::JobSubjects::new(&setup.project, MODULE, "ingest");
    let max_ack_pending = || async {
        stream
            .consumer_info(subjects.consumer())
            .await
            .unwrap()
            .config
            .max_ack_pending
    };
    // Another generation's consumer, at another concurrency.
    let older = abi_sdk::jobs::host::consumer_config(&subjects, 5, Duration::from_secs(30));
    stream.create_consumer(older).await.unwrap();
    let host = abi_sdk::jobs::JobHost::new()
        .job(JobSpec::new("ingest").unwrap(), |_cx| async {
            Ok(json!(null))
        })
        .bind(setup.links(MODULE, "rust-1"));
    host.prepare_consumers().await.unwrap();
    assert_eq!(max_ack_pending().await, 5, "prepare never updates");
    host.start_serving().await.unwrap();
    assert_eq!(
        max_ack_pending().await,
        1,
        "start updates to this code's limits"
    );
    host.close_now().await;

    // A missing consumer is created by prepare.
    let host = abi_sdk::jobs::JobHost::new()
        .job(JobSpec::new("other").unwrap(), |_cx| async {
            Ok(json!(null))
        })
        .bind(setup.links(MODULE, "rust-1"));
    host.prepare_consumers().await.unwrap();
    let other = jobs::JobSubjects::new(&setup.project, MODULE, "other").consumer();
    assert!(stream.consumer_info(other).await.is_ok());
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_checked_payload_is_read_back_from_the_object_store() {
    let setup = Setup::start().await;
    let (host, _) = setup
        .host(MODULE, "rust-1", JobSpec::new("ingest").unwrap(), fast())
        .await;
    let js = async_nats::jetstream::new(setup.nats.clone());
    let store = js.get_object_store(jobs::CLAIM_CHECK_BUCKET).await.unwrap();
    let body = serde_json::to_vec(&json!({"big": "x".repeat(10_000)})).unwrap();
    let name = "0123456789abcdef0123456789abcdef";
    store.put(name, &mut body.as_slice()).await.unwrap();
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(jobs::TRIGGER_HEADER, "manual");
    headers.insert(jobs::CLAIM_CHECK_HEADER, name);
    headers.insert(
        jobs::CLAIM_CHECK_SIZE_HEADER,
        body.len().to_string().as_str(),
    );
    let subjects = jobs::JobSubjects::new(&setup.project, MODULE, "ingest");
    let ack = js
        .publish_with_headers(subjects.trigger(), headers, Vec::new().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let run = setup
        .client(MODULE, "ingest")
        .run(jobs::run_id("ingest", ack.sequence));
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED");
    assert_eq!(
        record.to_json()["payload"]["big"].as_str().unwrap().len(),
        10_000
    );
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_the_filter_keeps_become_one_run_each() {
    let setup = Setup::start().await;
    let spec = JobSpec::new("on_order")
        .unwrap()
        .trigger(
            abi_sdk::jobs::Trigger::on_event(
                "orders.created",
                Some(&json!({"status": ["paid"], "amount": {"gt": 10}})),
            )
            .unwrap(),
        )
        .unwrap();
    let (host, _) = setup.host(MODULE, "rust-1", spec, fast()).await;
    let subjects = jobs::JobSubjects::new(&setup.project, MODULE, "on_order");
    let mut done = setup.nats.subscribe(subjects.done()).await.unwrap();
    let event = |id: &str, body: serde_json::Value| {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id);
        (headers, serde_json::to_vec(&body).unwrap())
    };
    // Kept, the same event again (one run), rejected by the filter, kept.
    for (id, body) in [
        ("e1", json!({"status": "paid", "amount": 12})),
        ("e1", json!({"status": "paid", "amount": 12})),
        ("e2", json!({"status": "open", "amount": 99})),
        ("e3", json!({"status": "paid", "amount": 50})),
    ] {
        let (headers, body) = event(id, body);
        setup
            .nats
            .publish_with_headers("orders.created", headers, body.into())
            .await
            .unwrap();
    }
    setup.nats.flush().await.unwrap();
    let mut runs = Vec::new();
    for _ in 0..2 {
        let notice = tokio::time::timeout(DEADLINE, futures::StreamExt::next(&mut done))
            .await
            .unwrap()
            .unwrap();
        let notice: serde_json::Value = serde_json::from_slice(&notice.payload).unwrap();
        runs.push(notice["run_id"].as_str().unwrap().to_owned());
    }
    runs.sort_by_key(|r| jobs::parse_run_id(r).unwrap().1);
    let (first, second) = (
        jobs::parse_run_id(&runs[0]).unwrap().1,
        jobs::parse_run_id(&runs[1]).unwrap().1,
    );
    assert_eq!(
        second,
        first + 1,
        "the duplicate and the rejected event stored nothing"
    );
    let job = setup.client(MODULE, "on_order");
    let record = job.run(runs[0].clone()).status().await.unwrap().to_json();
    assert_eq!(record["trigger"], json!({"kind": "event"}));
    assert_eq!(
        record["payload"],
        json!({"subject": "orders.created", "data": {"status": "paid", "amount": 12}})
    );
    let record = job.run(runs[1].clone()).status().await.unwrap().to_json();
    assert_eq!(record["payload"]["data"]["amount"], 50);
    host.close_now().await;
    setup.stop().await;
}
