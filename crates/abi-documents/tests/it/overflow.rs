//! RPC overflow over a real nats-server (1 MiB max payload, its default): a
//! document of 3 MiB goes up as an upload and comes back as a parked reply,
//! between our SDK client and the Python reference's, on our server and on
//! the reference's (with the overflow host a reference engine runs), each
//! client reading what the other stored. And a value above the overflow
//! limit is refused before anything is sent, naming both limits.

use abi_document_model::{CollectionSpec, Data, Value};
use abi_sdk::{CallErrorKind, DocumentClient, TokenSource};
use abi_test_support::NatsServer;

use super::common::{OurServer, SECRET, document_peer, reference_server, token};

/// Above the broker's 1 MiB, and not a multiple of a chunk.
const BIG: usize = 3 * 1024 * 1024 + 7;

/// The text both clients store: `a..z` over and over (as `document_peer.py
/// big` builds it).
fn text(len: usize) -> String {
    (0..len)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect()
}

fn client(nats: async_nats::Client, namespace: &str) -> DocumentClient {
    let key = abi_auth::module_key(SECRET, namespace).expect("module key");
    DocumentClient::new(nats, TokenSource::module_key(namespace, key), namespace)
}

/// Our client stores `rust`; the reference's stores `py` and reads `rust`;
/// ours reads `py`. Every read compared whole.
async fn both_ways(nats_url: &str) {
    let nats = async_nats::connect(nats_url).await.expect("connect");
    assert_eq!(nats.server_info().max_payload, 1024 * 1024);
    let docs = client(nats, "blobs");
    docs.ensure_collection(CollectionSpec::new("blobs"))
        .await
        .expect("ensure");
    let big = text(BIG);
    let data = Data::from([
        ("text".to_owned(), Value::String(big.clone())),
        ("n".to_owned(), Value::Int(2)),
    ]);
    let put = docs
        .put("blobs", "rust", data.clone(), None)
        .await
        .expect("a put above the broker's limit goes through overflow");
    assert_eq!(put.data, data, "the parked reply carries the document");

    let size = BIG.to_string();
    let seen = document_peer(&["big", nats_url, &token("blobs"), "blobs", &size]).await;
    assert_eq!(
        seen,
        serde_json::json!({
            "put_version": 1,
            "read_back_equal": true,
            "rust_text_len": BIG,
            "rust_text_equal": true,
        })
    );

    let theirs = docs
        .get("blobs", "py")
        .await
        .expect("read what Python stored");
    assert_eq!(
        theirs.data,
        Data::from([
            ("text".to_owned(), Value::String(big)),
            ("n".to_owned(), Value::Int(1)),
        ])
    );
}

#[tokio::test]
async fn documents_above_the_broker_limit_pass_both_ways_on_our_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nats = NatsServer::start().await;
    let ours = OurServer::start(&nats.url(), dir.path(), false).await;
    both_ways(&nats.url()).await;
    ours.stop().await;
}

#[tokio::test]
async fn documents_above_the_broker_limit_pass_both_ways_on_the_reference_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nats = NatsServer::start().await;
    let mut theirs = reference_server(&nats.url(), dir.path()).await;
    both_ways(&nats.url()).await;
    theirs.kill().await.expect("stop the reference server");
}

#[tokio::test]
async fn a_value_above_the_overflow_limit_is_refused_before_it_is_sent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nats = NatsServer::start().await;
    let ours = OurServer::start(&nats.url(), dir.path(), false).await;
    let docs = client(
        async_nats::connect(nats.url()).await.expect("connect"),
        "blobs",
    );
    docs.ensure_collection(CollectionSpec::new("blobs"))
        .await
        .expect("ensure");
    let huge = Data::from([(
        "b".to_owned(),
        Value::Bytes(vec![0; abi_wire::overflow::MAX_VALUE_BYTES]),
    )]);
    let err = docs
        .put("blobs", "huge", huge, None)
        .await
        .expect_err("above 256 MiB");
    assert_eq!(err.kind(), CallErrorKind::PayloadTooLarge);
    for limit in ["1048576-byte max payload", "268435456-byte overflow limit"] {
        assert!(err.message().contains(limit), "{err} names {limit}");
    }
    let missing = docs.try_get("blobs", "huge").await.expect("a read");
    assert!(missing.is_none(), "nothing was stored");
    ours.stop().await;
}
