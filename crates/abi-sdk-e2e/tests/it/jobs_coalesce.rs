//! Tick coalescing: with `coalesce_ticks`, the ticks of an every-1s
//! schedule that fired while the previous run was still going are recorded
//! SKIPPED (naming that run) and acknowledged, instead of running back to
//! back once it ends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk::documents::{Document, FindQuery, Predicate, Value};
use abi_sdk::jobs::{JobSpec, Trigger};
use abi_test_support::wait_until;
use abi_wire::jobs;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

fn text(doc: &Document, key: &str) -> String {
    match doc.data.get(key) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticks_fired_while_a_run_is_going_are_skipped() {
    let setup = Setup::start().await;
    // Every tick's handler waits for the gate.
    let spec = JobSpec::new("poll")
        .unwrap()
        .trigger(Trigger::every("1s", Some(&json!({"gate": true}))).unwrap())
        .unwrap()
        .coalesce_ticks(true);
    let (host, calls) = setup.host(MODULE, "rust-1", spec, fast()).await;
    let docs = setup.links(MODULE, "x").documents;
    let collection = jobs::runs_collection(&setup.project);
    let records = || async {
        let query = FindQuery {
            where_: vec![Predicate::new("job", "eq", "poll")],
            ..FindQuery::default()
        };
        docs.find(&collection, query).await.unwrap().items
    };
    let status = |docs: &[Document], status: &str| -> Vec<Document> {
        docs.iter()
            .filter(|d| text(d, "status") == status)
            .cloned()
            .collect()
    };
    wait_until(DEADLINE, || async {
        status(&records().await, "RUNNING").len() == 1
    })
    .await
    .expect("a tick runs");
    let first = status(&records().await, "RUNNING").remove(0);
    // Two more ticks fire while it waits (held in the stream: one slot).
    let js = async_nats::jetstream::new(setup.nats.clone());
    let stream = js.get_stream(jobs::stream(&setup.project)).await.unwrap();
    let consumer = jobs::JobSubjects::new(&setup.project, MODULE, "poll").consumer();
    wait_until(DEADLINE, || async {
        stream.consumer_info(&consumer).await.unwrap().num_pending >= 2
    })
    .await
    .expect("ticks queue behind the run");
    calls.release.notify_one();

    wait_until(DEADLINE, || async {
        status(&records().await, "SKIPPED").len() >= 2
    })
    .await
    .expect("the queued ticks are skipped");
    let all = records().await;
    let done = all.iter().find(|d| d.id == first.id).unwrap();
    assert_eq!(text(done, "status"), "SUCCEEDED");
    for skipped in status(&all, "SKIPPED") {
        assert_eq!(
            text(&skipped, "skip_reason"),
            format!("Coalesced: fired while run {} was still going", first.id)
        );
        assert_eq!(skipped.data["attempt"], Value::Int(0));
        assert!(text(&skipped, "fired_at") < text(done, "finished_at"));
        assert_eq!(text(&skipped, "started_at"), "");
    }
    // Only ticks fired after the run ended run again.
    assert!(calls.count() <= 2, "{} handler starts", calls.count());
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_is_skipped_while_a_run_goes_on_another_host() {
    let setup = Setup::start().await;
    // Two slots: the next ticks are delivered while the first run goes on.
    let spec = || {
        JobSpec::new("poll")
            .unwrap()
            .trigger(Trigger::every("1s", Some(&json!({"gate": true}))).unwrap())
            .unwrap()
            .max_concurrency(2)
            .unwrap()
            .coalesce_ticks(true)
    };
    let (one, one_calls) = setup.host(MODULE, "rust-1", spec(), fast()).await;
    let docs = setup.links(MODULE, "x").documents;
    let collection = jobs::runs_collection(&setup.project);
    let records = || async {
        let query = FindQuery {
            where_: vec![Predicate::new("job", "eq", "poll")],
            ..FindQuery::default()
        };
        docs.find(&collection, query).await.unwrap().items
    };
    let with = |docs: &[Document], status: &str, instance: &str| -> Vec<Document> {
        docs.iter()
            .filter(|d| text(d, "status") == status && text(d, "instance") == instance)
            .cloned()
            .collect()
    };
    wait_until(DEADLINE, || async {
        with(&records().await, "RUNNING", "rust-1").len() == 1
    })
    .await
    .expect("a tick runs on the first host");
    let first = with(&records().await, "RUNNING", "rust-1").remove(0);
    // The first host stops fetching (its run goes on): the second gets the ticks.
    let (two, two_calls) = setup.host(MODULE, "rust-2", spec(), fast()).await;
    let draining = tokio::spawn({
        let one = one.clone();
        async move { one.drain_within(DEADLINE).await }
    });
    wait_until(DEADLINE, || async {
        with(&records().await, "SKIPPED", "rust-2").len() >= 2
    })
    .await
    .expect("the second host skips the ticks");
    let all = records().await;
    let reason = format!("Coalesced: fired while run {} was still going", first.id);
    for skipped in with(&all, "SKIPPED", "rust-2") {
        assert_eq!(text(&skipped, "skip_reason"), reason);
    }
    assert_eq!(with(&all, "RUNNING", "rust-2").len(), 0);
    assert_eq!((one_calls.count(), two_calls.count()), (1, 0));
    one_calls.release.notify_one();
    draining.await.unwrap();
    let done = docs.get(&collection, &first.id).await.unwrap();
    assert_eq!(text(&done, "status"), "SUCCEEDED");
    one.close_now().await;
    two.close_now().await;
    setup.stop().await;
}
