//! How many document calls a run costs its host, counted on the wire (a
//! plain subscription sees every request the document service answers):
//! a first delivery creates its RUNNING record unread, and every later
//! write of the attempt (progress, outcome) goes on the version it kept.
//! Two calls per run, where reading before each write took four. An idle
//! host's RUNNING create asks for the service's early word
//! (`Abi-Put-Decided`), so the handler starts before the commit's sync.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_proto::Message as _;
use abi_proto::document::v1 as pb;
use abi_sdk::jobs::{JobHostOptions, JobSpec};
use abi_test_support::wait_until;
use abi_wire::documents::{DECIDED_HEADER, Operation, operation};
use abi_wire::jobs::JobSubjects;
use futures::StreamExt as _;
use serde_json::json;
use tokio::sync::watch;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.calls";
/// A module whose host saves progress often.
const BEATING: &str = "acme.beats";

/// The host's reads and writes of run records, by run id.
struct Snoop {
    calls: watch::Receiver<Vec<(Operation, String)>>,
}

impl Snoop {
    async fn start(nats: &async_nats::Client) -> Self {
        let mut gets = nats.subscribe(operation(Operation::Get)).await.unwrap();
        let mut puts = nats.subscribe(operation(Operation::Put)).await.unwrap();
        let mut batches = nats.subscribe(operation(Operation::Batch)).await.unwrap();
        let mut groups = nats.subscribe(operation(Operation::PutMany)).await.unwrap();
        nats.flush().await.unwrap();
        let (tx, calls) = watch::channel(Vec::new());
        tokio::spawn(async move {
            loop {
                // A batch is one write request, counted once per id it names.
                let (op, writes) = tokio::select! {
                    Some(m) = gets.next() => {
                        let r = pb::GetRequest::decode(m.payload).unwrap();
                        (Operation::Get, vec![(r.namespace, r.id)])
                    }
                    Some(m) = puts.next() => {
                        let decided = m.headers.as_ref().and_then(|h| h.get(DECIDED_HEADER)).is_some();
                        let r = pb::PutRequest::decode(m.payload).unwrap();
                        if decided {
                            let key = format!("{DECIDED_HEADER} {}/{}", r.namespace, r.id);
                            tx.send_modify(|calls| calls.push((Operation::Put, key)));
                        }
                        (Operation::Put, vec![(r.namespace, r.id)])
                    }
                    Some(m) = batches.next() => {
                        let r = pb::BatchRequest::decode(m.payload).unwrap();
                        let mut ids: Vec<(String, String)> = r.writes.into_iter().filter_map(|w| match w.write? {
                            pb::batch_write::Write::Put(p) => Some((p.namespace, p.id)),
                            pb::batch_write::Write::Delete(d) => Some((d.namespace, d.id)),
                        }).collect();
                        ids.sort();
                        ids.dedup();
                        (Operation::Put, ids)
                    }
                    // A put_many is one write request per id it names (its
                    // puts are each their own), and one group of its size.
                    Some(m) = groups.next() => {
                        let r = pb::PutManyRequest::decode(m.payload).unwrap();
                        let size = r.puts.len();
                        tx.send_modify(|calls| calls.push((Operation::PutMany, size.to_string())));
                        (Operation::Put, r.puts.into_iter().map(|p| (p.namespace, p.id)).collect())
                    }
                    else => break,
                };
                tx.send_modify(|calls| {
                    calls.extend(
                        writes
                            .into_iter()
                            .map(|(ns, id)| (op, format!("{ns}/{id}"))),
                    );
                });
            }
        });
        Self { calls }
    }

    /// The sizes of the `put_many` requests seen, the queue's empty probe
    /// left out.
    fn groups(&self) -> Vec<usize> {
        let calls = self.calls.borrow();
        calls
            .iter()
            .filter(|(op, _)| *op == Operation::PutMany)
            .filter_map(|(_, size)| size.parse().ok())
            .filter(|size| *size > 0)
            .collect()
    }

    /// How many puts of `module`'s `run_id` asked for their early word.
    fn decided(&self, module: &str, run_id: &str) -> usize {
        let key = format!("{DECIDED_HEADER} {module}/{run_id}");
        let calls = self.calls.borrow();
        calls.iter().filter(|(_, k)| *k == key).count()
    }

    /// `(gets, write requests)` of the record of `module`'s `run_id` so far
    /// (a put, or a batch or put_many naming it).
    fn count(&self, module: &str, run_id: &str) -> (usize, usize) {
        let key = format!("{module}/{run_id}");
        let calls = self.calls.borrow();
        let of = |op| calls.iter().filter(|(o, k)| *o == op && *k == key).count();
        (of(Operation::Get), of(Operation::Put))
    }
}

/// Waits for `run_id`'s completion notice (published once its outcome is
/// stored), without reading the record (that read would be counted).
pub(super) async fn finished(done: &mut async_nats::Subscriber, run_id: &str) -> String {
    let quoted = format!("\"{run_id}\"");
    loop {
        let notice = tokio::time::timeout(DEADLINE, done.next())
            .await
            .expect("a completion notice in time")
            .unwrap();
        let text = String::from_utf8(notice.payload.to_vec()).unwrap();
        if text.contains(&quoted) {
            return text;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_costs_two_record_calls_and_progress_moves_the_kept_version() {
    let setup = Setup::start().await;
    let (host, _) = setup
        .host(
            MODULE,
            "rust-1",
            JobSpec::new("ingest").unwrap().max_attempts(2).unwrap(),
            fast(),
        )
        .await;
    let beating = JobHostOptions {
        heartbeat_interval: Duration::from_millis(200),
        ..fast()
    };
    let (beating_host, calls) = setup
        .host(BEATING, "rust-2", JobSpec::new("ingest").unwrap(), beating)
        .await;
    let snoop = Snoop::start(&setup.nats).await;
    let mut done = setup
        .nats
        .subscribe(JobSubjects::new(&setup.project, MODULE, "ingest").done())
        .await
        .unwrap();
    let mut beating_done = setup
        .nats
        .subscribe(JobSubjects::new(&setup.project, BEATING, "ingest").done())
        .await
        .unwrap();
    setup.nats.flush().await.unwrap();
    let job = setup.client(MODULE, "ingest");

    // A plain run: create RUNNING, write the outcome on its version.
    let plain = job.trigger(json!({}), None).await.unwrap();
    let notice = finished(&mut done, plain.run_id()).await;
    assert!(notice.contains("SUCCEEDED"), "{notice}");
    assert_eq!(
        snoop.count(MODULE, plain.run_id()),
        (0, 2),
        "a first delivery's run: a create and one write, no reads"
    );
    assert_eq!(
        snoop.decided(MODULE, plain.run_id()),
        1,
        "an idle host's RUNNING create asks for its decision, its outcome does not"
    );

    // A retried run: the retry re-driven here reads the record once (is it
    // still this host's retry?) and starts on that version.
    let retried = job
        .trigger(json!({"fail_attempts": 1}), None)
        .await
        .unwrap();
    let notice = finished(&mut done, retried.run_id()).await;
    assert!(notice.contains("SUCCEEDED"), "{notice}");
    assert_eq!(
        snoop.count(MODULE, retried.run_id()),
        (1, 4),
        "two attempts: create, RETRYING, one read, RUNNING, outcome"
    );

    // A run whose progress is saved (heartbeats) before it ends: every save
    // goes on the version the last one returned, so none reads.
    let gated = setup
        .client(BEATING, "ingest")
        .trigger(json!({"gate": true}), None)
        .await
        .unwrap();
    let mut watching = snoop.calls.clone();
    tokio::time::timeout(
        DEADLINE,
        watching.wait_for(|_| snoop.count(BEATING, gated.run_id()).1 >= 3),
    )
    .await
    .expect("two progress saves in time")
    .unwrap();
    calls.release.notify_one();
    let notice = finished(&mut beating_done, gated.run_id()).await;
    assert!(notice.contains("SUCCEEDED"), "{notice}");
    let (gets, puts) = snoop.count(BEATING, gated.run_id());
    assert_eq!(gets, 0, "progress and outcome saves read nothing");
    assert!(puts >= 4, "create, two progress saves, outcome: {puts}");

    // The records read as before.
    for run in [&plain, &retried, &gated] {
        let record = run.status().await.unwrap();
        assert_eq!(record.status, "SUCCEEDED");
        assert_eq!(
            record.attempt,
            if run.run_id() == retried.run_id() {
                2
            } else {
                1
            }
        );
        assert!(record.data.contains_key("created_at"));
        assert!(record.data.contains_key("finished_at"));
        assert!(record.data.contains_key("heartbeat_at"));
    }
    wait_until(DEADLINE, || async {
        host.running() == 0 && beating_host.running() == 0
    })
    .await
    .unwrap();
    host.close_now().await;
    beating_host.close_now().await;
    setup.stop().await;
}

/// Runs that end together: their outcomes leave in shared `put_many`
/// requests (the host's records queue), each record still written twice
/// and read back SUCCEEDED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_end_together_write_their_outcomes_in_shared_requests() {
    const GROUPED: &str = "acme.grouped";
    const WAVE: usize = 24;
    let setup = Setup::start().await;
    let spec = JobSpec::new("ingest").unwrap().max_concurrency(64).unwrap();
    let (host, calls) = setup.host(GROUPED, "rust-1", spec, fast()).await;
    let snoop = Snoop::start(&setup.nats).await;
    let mut done = setup
        .nats
        .subscribe(JobSubjects::new(&setup.project, GROUPED, "ingest").done())
        .await
        .unwrap();
    setup.nats.flush().await.unwrap();
    let job = setup.client(GROUPED, "ingest");
    let mut runs = Vec::new();
    for wave in 1..=2 {
        for _ in 0..WAVE {
            runs.push(job.trigger(json!({"gate": true}), None).await.unwrap());
        }
        wait_until(DEADLINE, || async { calls.count() == wave * WAVE })
            .await
            .unwrap();
        // Released together; again until every one ended (a handler counted
        // may not be waiting yet).
        let mut ended = 0;
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while ended < WAVE {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{ended} of {WAVE} ended"
            );
            calls.release.notify_waiters();
            match tokio::time::timeout(Duration::from_millis(100), done.next()).await {
                Ok(Some(notice)) => {
                    let text = String::from_utf8(notice.payload.to_vec()).unwrap();
                    assert!(text.contains("SUCCEEDED"), "{text}");
                    ended += 1;
                }
                Ok(None) => panic!("the notices ended"),
                Err(_) => {}
            }
        }
    }
    let groups = snoop.groups();
    assert!(
        groups.iter().any(|size| *size >= 2),
        "outcomes written together: {groups:?}"
    );
    for run in &runs {
        assert_eq!(
            snoop.count(GROUPED, run.run_id()),
            (0, 2),
            "create, outcome"
        );
        let record = run.status().await.unwrap();
        assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 1));
    }
    wait_until(DEADLINE, || async { host.running() == 0 })
        .await
        .unwrap();
    host.close_now().await;
    setup.stop().await;
}

/// A workflow whose attempt created the run's record journals its steps
/// without reading a summary first (no attempt ran before it, so there is
/// none); a later attempt reads each summary before it writes, and replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_attempt_journals_without_reading_and_a_retry_reads_and_replays() {
    const FLOWS: &str = "acme.flows";
    let setup = Setup::start().await;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let handler = abi_sdk::workflows::workflow_fn(
        move |cx: abi_sdk::workflows::FlowContext, _input: serde_json::Value| {
            let counted = counted.clone();
            async move {
                let n: i64 = cx
                    .step("first", || {
                        let counted = counted.clone();
                        async move {
                            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            Ok(7)
                        }
                    })
                    .await?;
                if cx.job().attempt() == 1 {
                    return Err(abi_sdk::jobs::JobError::retryable("fails after its step"));
                }
                Ok(json!({"n": n}))
            }
        },
    );
    let spec = JobSpec::new("flow")
        .unwrap()
        .as_workflow()
        .max_attempts(2)
        .unwrap();
    let host = setup.serve_one(FLOWS, "rust-1", spec, handler).await;
    let snoop = Snoop::start(&setup.nats).await;
    let run = setup
        .client(FLOWS, "flow")
        .trigger(json!({}), None)
        .await
        .unwrap();
    let record = run.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "SUCCEEDED", "{record:?}");
    assert_eq!(record.result, Some(json!({"n": 7})));
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the step ran once; attempt 2 replayed it"
    );
    let step = abi_wire::workflows::step_id(run.run_id(), "first");
    // The summary and the result share the id (two collections): attempt 1
    // puts the start, then the result and the end in one batch, reading
    // none; attempt 2 reads the summary, then the result it replays.
    assert_eq!(
        snoop.count(FLOWS, &step),
        (2, 2),
        "no read before attempt 1's writes, its end one batch; attempt 2 reads summary and result"
    );
    host.close_now().await;
    setup.stop().await;
}
