//! What an agent invoke costs the document service, counted on the wire
//! (plain subscriptions see every request it answers), and what it stores:
//! with our document service, one read and two batches (the record and the
//! claim at submit; the events, the result, the outcome and the claim's
//! release at the end), where one document per request took eleven; with
//! the reference's, which serves no batches, the same documents one by one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_proto::Message as _;
use abi_proto::document::v1 as pb;
use abi_sdk::documents::{Data, Value};
use abi_wire::documents::{Operation, operation};
use futures::StreamExt as _;

use super::agents_fixture::{Provider, Setup, options, ready};

/// Requests per operation that touched one of `ids`.
type Counts = BTreeMap<&'static str, usize>;

/// Each request seen: its operation and the ids it names.
type Seen = Arc<Mutex<Vec<(&'static str, Vec<String>)>>>;

/// Counts the document requests naming any of the watched ids.
struct Snoop {
    seen: Seen,
}

impl Snoop {
    /// Subscribes to `operations` (never to one nobody serves: a listener
    /// would turn "no responders" into a timeout).
    async fn start(nats: &async_nats::Client, operations: &[Operation]) -> Self {
        let seen = Seen::default();
        for op in operations {
            let mut sub = nats.subscribe(operation(*op)).await.unwrap();
            let (seen, op) = (seen.clone(), *op);
            tokio::spawn(async move {
                while let Some(m) = sub.next().await {
                    let ids = ids_of(op, &m.payload);
                    seen.lock().unwrap().push((op.as_str(), ids));
                }
            });
        }
        nats.flush().await.unwrap();
        Self { seen }
    }

    fn count(&self, prefixes: &[&str]) -> Counts {
        let mut counts = Counts::new();
        for (op, ids) in self.seen.lock().unwrap().iter() {
            if ids
                .iter()
                .any(|id| prefixes.iter().any(|p| id.starts_with(p)))
            {
                *counts.entry(op).or_default() += 1;
            }
        }
        counts
    }
}

fn ids_of(op: Operation, payload: &[u8]) -> Vec<String> {
    use pb::batch_write::Write;
    match op {
        Operation::Get => vec![pb::GetRequest::decode(payload).unwrap().id],
        Operation::Put => vec![pb::PutRequest::decode(payload).unwrap().id],
        Operation::Delete => vec![pb::DeleteRequest::decode(payload).unwrap().id],
        Operation::Batch => pb::BatchRequest::decode(payload)
            .unwrap()
            .writes
            .into_iter()
            .filter_map(|w| match w.write? {
                Write::Put(p) => Some(p.id),
                Write::Delete(d) => Some(d.id),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A document's data without its times and its owner (an instance id),
/// which differ run to run.
fn timeless(data: &Data) -> Data {
    data.iter()
        .filter(|(k, _)| !k.ends_with("_at") && k.as_str() != "owner")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Invokes `echo` once with invocation id `inv-1` on a fresh world and
/// returns the document requests it cost and every document it left
/// (`kind/id` -> data without times).
async fn one_invoke(setup: Setup, batches: bool) -> (Counts, BTreeMap<String, Data>) {
    let provider = Provider::start(&setup.world, "rust", options()).await;
    ready(&setup.world, 1).await;
    let mut operations = vec![Operation::Get, Operation::Put, Operation::Delete];
    if batches {
        operations.push(Operation::Batch);
    }
    let nats = async_nats::connect(setup.world.nats.url()).await.unwrap();
    let snoop = Snoop::start(&nats, &operations).await;
    let agent = setup.agent("caller", "echo").await;
    let thread = "thread-1".to_owned();
    let mut submitted = agent
        .submit(
            "hello",
            abi_sdk::agents::SubmitOptions {
                invocation_id: Some("inv-1".into()),
                thread_id: Some(thread.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let result = submitted
        .result(Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(result, "rust:hello");
    let key = abi_wire::agents::invocation_key("echo", "inv-1");
    let claim = abi_wire::agents::claim_key("echo", "caller", &thread);
    let counts = snoop.count(&[&key, &claim]);
    let mut stored = BTreeMap::new();
    for kind in ["runs", "events", "claims"] {
        for doc in setup.all(kind).await {
            stored.insert(format!("{kind}/{}", doc.id), timeless(&doc.data));
        }
    }
    provider.stop().await;
    setup.stop().await;
    (counts, stored)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invoke_costs_one_read_and_two_batches_and_stores_what_one_by_one_stores() {
    let (ours, ours_stored) = one_invoke(Setup::start(20.0).await, true).await;
    assert_eq!(
        ours,
        Counts::from([("batch", 2), ("get", 1)]),
        "a read of the record, then two batches"
    );
    let (theirs, theirs_stored) =
        one_invoke(Setup::with_reference_documents(20.0).await, false).await;
    let total: usize = theirs.values().sum();
    assert!(
        total >= 9,
        "one by one on the reference's service: {theirs:?}"
    );
    assert_eq!(theirs.get("batch"), None);

    // The same documents, the same data (the record SUCCEEDED past both
    // events, the claim released).
    assert_eq!(
        ours_stored.keys().collect::<Vec<_>>(),
        theirs_stored.keys().collect::<Vec<_>>()
    );
    assert_eq!(ours_stored, theirs_stored);
    let record = ours_stored
        .iter()
        .find(|(k, _)| k.starts_with("runs/"))
        .map(|(_, d)| d)
        .expect("the run's record");
    assert_eq!(record.get("status"), Some(&Value::from("SUCCEEDED")));
    assert_eq!(record.get("last_sequence"), Some(&Value::Int(2)));
    assert!(
        !ours_stored.keys().any(|k| k.starts_with("claims/")),
        "claim released"
    );
}
