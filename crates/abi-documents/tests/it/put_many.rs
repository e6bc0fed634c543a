//! `put_many` over a real nats-server and SQLite file: each put stored or
//! refused on its own, the request's own limits refusing it whole (nothing
//! stored), a strict namespace guarding each put; and the SDK's `PutQueue`
//! sending waiting puts in one request to our service, and one per request
//! to the reference's, which has no such endpoint.

use std::time::Duration;

use abi_document_model::{CollectionSpec, Data, Value};
use abi_proto::document::v1 as pb;
use abi_sdk::{CallErrorKind, DocumentClient};
use abi_test_support::NatsServer;
use abi_wire::documents::{self, Operation};
use futures::StreamExt as _;
use prost::Message as _;

use super::common::{OurServer, reference_server, token};
use super::nats_service::{module_token, raw};

fn data(n: i64) -> Data {
    Data::from([("n".to_owned(), Value::Int(n))])
}

fn put(namespace: &str, collection: &str, id: &str, if_version: Option<i64>) -> pb::PutRequest {
    pb::PutRequest {
        namespace: namespace.into(),
        collection: collection.into(),
        id: id.into(),
        data: Some(abi_document_model::pb::data_to_pb(&data(1))),
        if_version,
        ..Default::default()
    }
}

fn request(puts: Vec<pb::PutRequest>) -> Vec<u8> {
    pb::PutManyRequest {
        puts,
        ..Default::default()
    }
    .encode_to_vec()
}

/// A connection to `nats`, and a client of module `billing` whose
/// collection `runs` it declares (on whichever service serves there).
async fn billing_client(nats: &NatsServer) -> (async_nats::Client, DocumentClient) {
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let docs = DocumentClient::new(client.clone(), module_token("billing"), "billing");
    docs.ensure_collection(CollectionSpec::new("runs"))
        .await
        .expect("ensure");
    (client, docs)
}

/// Our service on a nats-server of its own (`strict` namespaces or not),
/// and a client of module `billing`, whose collection `runs` exists.
pub(super) struct Billing {
    pub dir: tempfile::TempDir,
    pub nats: NatsServer,
    pub ours: OurServer,
    pub client: async_nats::Client,
    pub docs: DocumentClient,
}

impl Billing {
    pub async fn start(strict: bool) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let nats = NatsServer::start().await;
        let ours = OurServer::start(&nats.url(), dir.path(), strict).await;
        let (client, docs) = billing_client(&nats).await;
        Self {
            dir,
            nats,
            ours,
            client,
            docs,
        }
    }
}

/// The reference's service on a nats-server of its own, and a client of
/// module `billing`, whose collection `runs` exists.
pub(super) struct ReferenceBilling {
    pub dir: tempfile::TempDir,
    pub nats: NatsServer,
    pub reference: tokio::process::Child,
    pub client: async_nats::Client,
    pub docs: DocumentClient,
}

impl ReferenceBilling {
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let nats = NatsServer::start().await;
        let reference = reference_server(&nats.url(), dir.path()).await;
        let (client, docs) = billing_client(&nats).await;
        Self {
            dir,
            nats,
            reference,
            client,
            docs,
        }
    }
}

#[tokio::test]
async fn put_many_stores_or_refuses_each_put_on_its_own() {
    for strict in [false, true] {
        let Billing {
            dir: _dir,
            nats: _nats,
            ours,
            client,
            docs,
        } = Billing::start(strict).await;
        docs.put("runs", "x", data(7), Some(0)).await.expect("x");
        let billing = Some(token("billing"));

        let puts = vec![
            put("billing", "runs", "a", Some(0)),
            put("billing", "runs", "x", Some(0)),
            put("billing", "nowhere", "c", None),
            put("billing", "runs", "", None),
            put("shipping", "runs", "s", None),
            put("billing", "runs", "b", None),
        ];
        let (header, error, payload) = raw(
            &client,
            Operation::PutMany,
            billing.as_deref(),
            request(puts),
        )
        .await;
        assert_eq!((header, error), (None, None), "answered put by put");
        let reply = pb::PutManyResponse::decode(payload).expect("a put_many reply");
        let codes: Vec<Option<&str>> = reply
            .results
            .iter()
            .map(|r| r.error.as_ref().map(|e| e.code.as_str()))
            .collect();
        let elsewhere = if strict {
            "PERMISSION_DENIED"
        } else {
            "COLLECTION_NOT_FOUND"
        };
        assert_eq!(
            codes,
            [
                None,
                Some("VERSION_CONFLICT"),
                Some("COLLECTION_NOT_FOUND"),
                Some("INVALID_ARGUMENT"),
                Some(elsewhere),
                None
            ]
        );
        for (at, id) in [(0, "a"), (5, "b")] {
            let written = reply.results[at].document.as_ref().expect("stamps");
            assert_eq!((written.id.as_str(), written.version), (id, 1));
            assert!(written.data.is_none(), "the caller sent the data");
            let stored = docs.get("runs", id).await.expect("stored");
            assert_eq!(stored.data, data(1));
            assert_eq!(stored.created_at.isoformat(), written.created_at);
            assert_eq!(stored.updated_at.isoformat(), written.updated_at);
        }
        let x = docs.get("runs", "x").await.expect("x");
        assert_eq!((x.version, x.data), (1, data(7)), "the refused put left x");

        // Refused whole: empty, too many, one document twice, no token.
        let too_many = (0..=documents::MAX_BATCH_WRITES)
            .map(|i| put("billing", "runs", &format!("n{i}"), None))
            .collect();
        let twice = vec![
            put("billing", "runs", "d", None),
            put("billing", "runs", "d", None),
        ];
        for (puts, token, expected) in [
            (Vec::new(), billing.as_deref(), "INVALID_ARGUMENT"),
            (too_many, billing.as_deref(), "INVALID_ARGUMENT"),
            (twice, billing.as_deref(), "INVALID_ARGUMENT"),
            (
                vec![put("billing", "runs", "e", None)],
                None,
                "UNAUTHENTICATED",
            ),
        ] {
            let (header, error, payload) =
                raw(&client, Operation::PutMany, token, request(puts)).await;
            assert_eq!(header.as_deref(), Some(expected));
            assert_eq!(error.map(|e| e.code).as_deref(), Some(expected));
            let reply = pb::PutManyResponse::decode(payload).expect("a reply");
            assert!(reply.results.is_empty());
        }
        for id in ["n0", "d", "e"] {
            assert!(docs.try_get("runs", id).await.expect("read").is_none());
        }
        ours.stop().await;
    }
}

/// Subscriptions to the `put_many` and `put` requests.
async fn watch_puts(
    client: &async_nats::Client,
) -> (async_nats::Subscriber, async_nats::Subscriber) {
    let groups = client
        .subscribe(documents::operation(Operation::PutMany))
        .await
        .expect("subscribe");
    let singles = client
        .subscribe(documents::operation(Operation::Put))
        .await
        .expect("subscribe");
    client.flush().await.expect("flush");
    (groups, singles)
}

/// The puts a subscription saw: `(put_many requests with puts, puts they
/// carried, single puts)`, read until `puts` puts were seen.
async fn seen(
    groups: &mut async_nats::Subscriber,
    singles: &mut async_nats::Subscriber,
    puts: usize,
) -> (usize, usize, usize) {
    let (mut requests, mut carried, mut alone) = (0, 0, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while carried + alone < puts {
        tokio::select! {
            Some(m) = groups.next() => {
                let r = pb::PutManyRequest::decode(m.payload).expect("a put_many");
                // The queue's probe is empty.
                if !r.puts.is_empty() {
                    requests += 1;
                    carried += r.puts.len();
                }
            }
            Some(_) = singles.next() => alone += 1,
            () = tokio::time::sleep_until(deadline) => panic!("saw {carried} + {alone} of {puts} puts"),
        }
    }
    (requests, carried, alone)
}

#[tokio::test]
async fn a_put_queue_sends_the_puts_that_wait_in_one_request() {
    let Billing {
        dir: _dir,
        nats: _nats,
        ours,
        client,
        docs,
    } = Billing::start(false).await;
    let (mut groups, mut singles) = watch_puts(&client).await;
    let queue = docs.put_queue();
    const N: usize = 48;
    let ids: Vec<String> = (0..N).map(|i| format!("q{i}")).collect();

    // All at once: a few leave alone, the rest wait and leave together.
    let first = data(1);
    let created =
        futures::future::join_all(ids.iter().map(|id| queue.put("runs", id, &first, Some(0))))
            .await;
    for written in &created {
        assert_eq!(written.as_ref().expect("created").version, 1);
    }
    // Each one's compare-and-swap, one of them on a stale version.
    let second = data(2);
    let updated = futures::future::join_all(ids.iter().enumerate().map(|(i, id)| {
        let version = if i == 7 { 5 } else { 1 };
        queue.put("runs", id, &second, Some(version))
    }))
    .await;
    for (i, written) in updated.iter().enumerate() {
        match written {
            Ok(written) => assert_ne!(i, 7, "{written:?}"),
            Err(e) => assert_eq!((i, e.kind()), (7, CallErrorKind::VersionConflict)),
        }
    }
    for (i, id) in ids.iter().enumerate() {
        let stored = docs.get("runs", id).await.expect("stored");
        let expected = if i == 7 { (1, data(1)) } else { (2, data(2)) };
        assert_eq!((stored.version, stored.data), expected, "{id}");
    }

    let (requests, carried, alone) = seen(&mut groups, &mut singles, 2 * N).await;
    assert!(
        carried >= 2 * requests && requests >= 1,
        "{requests} put_many for {carried} puts"
    );
    assert!(
        requests + alone < N,
        "{} requests for {} puts",
        requests + alone,
        2 * N
    );
    ours.stop().await;
}

#[tokio::test]
async fn a_put_queue_sends_one_put_per_request_to_the_reference() {
    let ReferenceBilling {
        dir: _dir,
        nats: _nats,
        mut reference,
        client,
        docs,
    } = ReferenceBilling::start().await;
    let (mut groups, mut singles) = watch_puts(&client).await;
    let queue = docs.put_queue();
    let ids: Vec<String> = (0..24).map(|i| format!("r{i}")).collect();
    for round in 1..=2 {
        let stored = data(round);
        let written = futures::future::join_all(
            ids.iter()
                .map(|id| queue.put("runs", id, &stored, Some(round - 1))),
        )
        .await;
        for written in written {
            assert_eq!(written.expect("written").version, round);
        }
    }
    let (requests, carried, alone) = seen(&mut groups, &mut singles, 48).await;
    assert_eq!((requests, carried, alone), (0, 0, 48));
    let stored = docs.get("runs", "r3").await.expect("stored");
    assert_eq!((stored.version, stored.data), (2, data(2)));
    reference.kill().await.expect("stop the reference server");
}
