//! The document service over a real nats-server: our server answering the
//! Python reference's SDK client exactly as the reference server does, our
//! SDK client against the reference server, tokens, admin operations, strict
//! namespaces, bad input, and a drain on shutdown.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use abi_document_model::{CollectionSpec, Data, FieldSpec, FindQuery, OrderBy, Predicate, Value};
use abi_documents::store::{SqliteConfig, SqliteStore};
use abi_proto::document::v1 as pb;
use abi_sdk::documents::BatchWrite;
use abi_sdk::{CallErrorKind, DocumentClient, TokenSource};
use abi_test_support::NatsServer;
use abi_wire::documents::{self, Operation};
use prost::Message as _;

use super::common::{OurServer, SECRET, document_peer, reference_server, token};
use super::put_many::Billing;

pub(super) fn module_token(identity: &str) -> TokenSource {
    let key = abi_auth::module_key(SECRET, identity).expect("module key");
    TokenSource::module_key(identity, key)
}

/// Runs the reference SDK's scenario (`document_peer.py client`) and returns
/// what it printed.
async fn python_client(nats_url: &str, namespace: &str) -> serde_json::Value {
    document_peer(&["client", nats_url, &token(namespace), namespace]).await
}

/// The reference SDK's client sees the same answers from our server as from
/// the reference server (each on its own nats-server: the subjects carry no
/// project).
#[tokio::test]
async fn the_reference_client_cannot_tell_our_server_from_the_reference() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ours_nats = NatsServer::start().await;
    let theirs_nats = NatsServer::start().await;
    let ours = OurServer::start(&ours_nats.url(), dir.path(), false).await;
    let mut theirs = reference_server(&theirs_nats.url(), dir.path()).await;

    let from_ours = python_client(&ours_nats.url(), "billing").await;
    let from_theirs = python_client(&theirs_nats.url(), "billing").await;
    assert_eq!(from_ours, from_theirs);
    assert_eq!(from_ours["count"], 6);
    assert_eq!(from_ours["create_again"], "VersionConflict");

    ours.stop().await;
    theirs.kill().await.expect("stop the reference server");
}

/// Our SDK client against the reference server: create-only, compare-and-swap,
/// typed errors, paging to the end, datetimes and bytes.
#[tokio::test]
async fn our_client_works_against_the_reference_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nats = NatsServer::start().await;
    let mut reference = reference_server(&nats.url(), dir.path()).await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let docs = DocumentClient::new(client, module_token("billing"), "billing");
    scenario(&docs).await;
    // No batches there: the client says so, sends nothing, and the writes
    // one by one still work.
    let refused = docs
        .batch(vec![put_write("runs", "b1", Some(0))])
        .await
        .expect_err("the reference serves no batches");
    assert!(refused.unsupported(), "{refused}");
    assert!(docs.try_get("runs", "b1").await.expect("read").is_none());
    let again = docs
        .batch(vec![put_write("runs", "b1", Some(0))])
        .await
        .expect_err("remembered");
    assert!(again.unsupported(), "{again}");
    reference.kill().await.expect("stop the reference server");
}

fn put_write(collection: &str, id: &str, if_version: Option<i64>) -> BatchWrite {
    BatchWrite::Put {
        collection: collection.into(),
        id: id.into(),
        data: Data::from([("n".to_owned(), Value::Int(1))]),
        if_version,
    }
}

/// Our server's batches over NATS: all or none, the refused write named
/// with its code (also in `Abi-Error-Code`), the batch's own limits, and a
/// strict namespace guarding every write of it.
#[tokio::test]
async fn batches_store_all_or_none_and_name_the_refused_write() {
    for strict in [false, true] {
        let Billing {
            dir: _dir,
            nats: _nats,
            ours,
            client,
            docs,
        } = Billing::start(strict).await;
        let stored = docs
            .batch(vec![
                put_write("runs", "a", Some(0)),
                put_write("runs", "b", None),
                BatchWrite::Delete {
                    collection: "runs".into(),
                    id: "absent".into(),
                    if_version: None,
                },
            ])
            .await
            .expect("a batch");
        let versions: Vec<Option<i64>> = stored
            .iter()
            .map(|d| d.as_ref().map(|d| d.version))
            .collect();
        assert_eq!(versions, [Some(1), Some(1), None]);
        assert_eq!(stored[0].as_ref().map(|d| d.id.as_str()), Some("a"));

        let refused = docs
            .batch(vec![
                put_write("runs", "c", Some(0)),
                put_write("runs", "a", Some(0)),
            ])
            .await
            .expect_err("a is there");
        assert!(
            refused.refused(1, CallErrorKind::VersionConflict),
            "{refused}"
        );
        assert!(docs.try_get("runs", "c").await.expect("read").is_none());

        // On the wire: the code in the header, the index in the reply.
        let body = pb::BatchRequest {
            writes: vec![pb::BatchWrite {
                write: Some(pb::batch_write::Write::Put(pb::PutRequest {
                    namespace: "billing".into(),
                    collection: "nowhere".into(),
                    id: "x".into(),
                    data: Some(pb::Data::default()),
                    ..Default::default()
                })),
            }],
            ..Default::default()
        };
        let (header, error, payload) = raw(
            &client,
            Operation::Batch,
            Some(&token("billing")),
            body.encode_to_vec(),
        )
        .await;
        assert_eq!(header.as_deref(), Some("COLLECTION_NOT_FOUND"));
        assert_eq!(
            error.map(|e| e.code).as_deref(),
            Some("COLLECTION_NOT_FOUND")
        );
        let reply = pb::BatchResponse::decode(payload).expect("a batch reply");
        assert_eq!(reply.failed, Some(0));

        // Empty, too long, a write of neither kind, no token.
        let too_many = (0..=documents::MAX_BATCH_WRITES)
            .map(|i| put_write("runs", &format!("n{i}"), None))
            .collect();
        for (writes, expected) in [
            (Vec::new(), "INVALID_ARGUMENT"),
            (too_many, "INVALID_ARGUMENT"),
        ] {
            let refused = docs.batch(writes).await.expect_err("bad batch");
            assert_eq!(refused.failed, None, "{refused}");
            assert_eq!(refused.error.code(), Some(expected), "{refused}");
        }
        let neither = pb::BatchRequest {
            writes: vec![pb::BatchWrite { write: None }],
            ..Default::default()
        };
        let (header, _, payload) = raw(
            &client,
            Operation::Batch,
            Some(&token("billing")),
            neither.encode_to_vec(),
        )
        .await;
        assert_eq!(header.as_deref(), Some("INVALID_ARGUMENT"));
        assert_eq!(
            pb::BatchResponse::decode(payload).expect("reply").failed,
            Some(0)
        );
        let (header, _, _) = raw(&client, Operation::Batch, None, body.encode_to_vec()).await;
        assert_eq!(header.as_deref(), Some("UNAUTHENTICATED"));
        assert!(docs.try_get("runs", "n0").await.expect("read").is_none());

        // Another module's namespace: refused in strict mode, whole.
        let shipping = DocumentClient::new(client.clone(), module_token("shipping"), "shipping")
            .for_namespace("billing");
        let crossed = shipping.batch(vec![put_write("runs", "d", None)]).await;
        if strict {
            let refused = crossed.expect_err("strict");
            assert!(
                refused.refused(0, CallErrorKind::PermissionDenied),
                "{refused}"
            );
            assert!(docs.try_get("runs", "d").await.expect("read").is_none());
        } else {
            crossed.expect("open mode");
        }
        ours.stop().await;
    }
}

/// The same scenario on our server.
#[tokio::test]
async fn our_client_works_against_our_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nats = NatsServer::start().await;
    let ours = OurServer::start(&nats.url(), dir.path(), false).await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let docs = DocumentClient::new(client, module_token("billing"), "billing");
    scenario(&docs).await;
    ours.stop().await;
}

async fn scenario(docs: &DocumentClient) {
    docs.ensure_collection(
        CollectionSpec::new("runs")
            .field(FieldSpec::new("status", "string").indexed())
            .field(FieldSpec::new("n", "int")),
    )
    .await
    .expect("ensure");
    let when =
        abi_document_model::Datetime::parse_iso("2026-10-01T12:00:00.5+02:00").expect("datetime");
    let mut data = Data::new();
    data.insert("status".into(), Value::from("RUNNING"));
    data.insert("at".into(), Value::Datetime(when));
    data.insert("raw".into(), Value::Bytes(vec![0, 1, 255]));
    let created = docs
        .put("runs", "r1", data.clone(), Some(0))
        .await
        .expect("create");
    assert_eq!(created.version, 1);
    assert_eq!(created.data, data);
    let again = docs
        .put("runs", "r1", data.clone(), Some(0))
        .await
        .expect_err("create twice");
    assert_eq!(again.kind(), CallErrorKind::VersionConflict);
    data.insert("status".into(), Value::from("SUCCEEDED"));
    let second = docs
        .put("runs", "r1", data.clone(), Some(1))
        .await
        .expect("cas");
    assert_eq!(second.version, 2);
    assert_eq!(second.created_at, created.created_at);
    // A put that keeps its data answers the stamps the service stored.
    let third = docs
        .put_ref("runs", "r1", &data, Some(2))
        .await
        .expect("put_ref");
    assert_eq!(third.version, 3);
    let read = docs.get("runs", "r1").await.expect("get");
    assert_eq!(third.created_at().expect("created_at"), created.created_at);
    assert_eq!(third.updated_at().expect("updated_at"), read.updated_at);
    assert_eq!(read.data, data);
    let stale = docs
        .put("runs", "r1", data.clone(), Some(1))
        .await
        .expect_err("stale");
    assert_eq!(stale.kind(), CallErrorKind::VersionConflict);
    let missing = docs.get("runs", "nope").await.expect_err("missing");
    assert_eq!(missing.kind(), CallErrorKind::DocumentNotFound);
    assert!(
        docs.try_get("runs", "nope")
            .await
            .expect("try_get")
            .is_none()
    );
    let wrong = docs.get("nothing", "r1").await.expect_err("no collection");
    assert_eq!(wrong.kind(), CallErrorKind::CollectionNotFound);
    let bad_type = {
        let mut d = Data::new();
        d.insert("n".into(), Value::from("not an int"));
        docs.put("runs", "bad", d, None)
            .await
            .expect_err("a declared type")
    };
    assert_eq!(bad_type.kind(), CallErrorKind::InvalidArgument);
    assert!(
        bad_type
            .to_string()
            .contains("Field 'n' must have type int"),
        "{bad_type}"
    );
    for i in 0..25 {
        let mut d = Data::new();
        d.insert("n".into(), Value::Int(i));
        d.insert(
            "status".into(),
            Value::from(if i % 2 == 0 { "EVEN" } else { "ODD" }),
        );
        docs.put("runs", &format!("p{i:02}"), d, None)
            .await
            .expect("put");
    }
    let query = FindQuery {
        where_: vec![Predicate::new("status", "eq", "ODD")],
        order_by: Some(OrderBy::desc("n")),
        limit: 5,
        ..Default::default()
    };
    let first = docs.find("runs", query.clone()).await.expect("find");
    assert_eq!(first.items.len(), 5);
    assert!(first.cursor.is_some());
    use futures::TryStreamExt as _;
    let all: Vec<_> = docs
        .find_all("runs", query)
        .try_collect()
        .await
        .expect("all pages");
    let ns: Vec<i64> = all
        .iter()
        .map(|d| match d.data["n"] {
            Value::Int(n) => n,
            _ => -1,
        })
        .collect();
    assert_eq!(ns, vec![23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1]);
    let count = docs
        .count("runs", vec![Predicate::new("n", "gte", 20i64)])
        .await
        .expect("count");
    assert_eq!(count, 5);
    let bad_op = docs
        .count("runs", vec![Predicate::new("n", "like", 1i64)])
        .await
        .expect_err("bad operator");
    assert_eq!(bad_op.kind(), CallErrorKind::InvalidArgument);
    assert!(
        bad_op
            .to_string()
            .contains("Unsupported predicate operator: like"),
        "{bad_op}"
    );
    docs.delete("runs", "p00", Some(1))
        .await
        .expect("delete at version");
    let conflict = docs
        .delete("runs", "p01", Some(7))
        .await
        .expect_err("delete stale");
    assert_eq!(conflict.kind(), CallErrorKind::VersionConflict);
    assert_eq!(
        docs.collections().await.expect("collections"),
        vec!["runs".to_owned()]
    );
    let spec = docs.collection_spec("runs").await.expect("spec");
    assert_eq!(spec.fields.len(), 2);
    let denied = docs
        .namespaces()
        .await
        .expect_err("a module may not list namespaces");
    assert_eq!(denied.kind(), CallErrorKind::PermissionDenied);
}

/// Sends raw bytes to an operation and decodes the reply's `CallError`.
pub(super) async fn raw(
    client: &async_nats::Client,
    op: Operation,
    token: Option<&str>,
    body: Vec<u8>,
) -> (
    Option<String>,
    Option<abi_proto::common::v1::CallError>,
    bytes::Bytes,
) {
    let mut headers = async_nats::HeaderMap::new();
    if let Some(token) = token {
        headers.insert(abi_wire::AUTH_HEADER, token);
    }
    let reply = client
        .request_with_headers(documents::operation(op), headers, body.into())
        .await
        .expect("a reply");
    let code_header = reply
        .headers
        .as_ref()
        .and_then(|h| h.get(documents::ERROR_CODE_HEADER))
        .map(|v| v.as_str().to_owned());
    // Every reply type holds its CallError in field 1.
    let error = pb::PutResponse::decode(reply.payload.clone())
        .ok()
        .and_then(|r| r.error);
    (code_header, error, reply.payload)
}

/// Tokens, the admin-only operation, malformed protobuf, bad names: a clear
/// code (also in `Abi-Error-Code`) and nothing stored.
#[tokio::test]
async fn bad_requests_get_a_code_and_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nats = NatsServer::start().await;
    let ours = OurServer::start(&nats.url(), dir.path(), false).await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let put = |id: &str, namespace: &str| {
        pb::PutRequest {
            namespace: namespace.into(),
            collection: "c".into(),
            id: id.into(),
            data: Some(pb::Data::default()),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let ensure = pb::EnsureCollectionRequest {
        namespace: "m".into(),
        spec: Some(pb::CollectionSpec {
            name: "c".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let api = token("api");
    let (_, error, _) = raw(&client, Operation::EnsureCollection, Some(&api), ensure).await;
    assert!(error.is_none(), "{error:?}");

    let (header, error, _) = raw(&client, Operation::Put, None, put("a", "m")).await;
    assert_eq!(header.as_deref(), Some("UNAUTHENTICATED"));
    assert_eq!(
        error.expect("error").message,
        "missing or invalid auth token"
    );
    let forged = abi_auth::issue_service_token(
        "api",
        "another-secret-of-32-bytes-at-least",
        Duration::from_secs(60),
        SystemTime::now(),
        None,
    )
    .expect("token");
    let (header, _, _) = raw(&client, Operation::Put, Some(&forged), put("a", "m")).await;
    assert_eq!(header.as_deref(), Some("UNAUTHENTICATED"));
    let (header, error, _) = raw(&client, Operation::Put, Some(&api), vec![0xff, 0xff]).await;
    assert_eq!(header.as_deref(), Some("INVALID_ARGUMENT"));
    assert!(
        error
            .expect("error")
            .message
            .starts_with("Malformed protobuf")
    );
    let (header, error, _) = raw(&client, Operation::Put, Some(&api), put("", "m")).await;
    assert_eq!(header.as_deref(), Some("INVALID_ARGUMENT"));
    assert_eq!(
        error.expect("error").message,
        "Names must be nonempty strings without NUL characters"
    );
    let (header, _, _) = raw(&client, Operation::Put, Some(&api), put("a", "other")).await;
    assert_eq!(header.as_deref(), Some("COLLECTION_NOT_FOUND"));
    let (header, error, _) = raw(
        &client,
        Operation::Namespaces,
        Some(&token("billing")),
        pb::NamespacesRequest::default().encode_to_vec(),
    )
    .await;
    assert_eq!(header.as_deref(), Some("PERMISSION_DENIED"));
    assert_eq!(
        error.expect("error").message,
        "namespaces needs a platform service identity"
    );
    let (header, _, body) = raw(
        &client,
        Operation::Namespaces,
        Some(&api),
        pb::NamespacesRequest::default().encode_to_vec(),
    )
    .await;
    assert_eq!(header, None);
    assert_eq!(
        pb::NamespacesResponse::decode(body)
            .expect("reply")
            .namespaces,
        vec!["m".to_owned()]
    );
    // A put that fits the broker but whose answer would not (short
    // datetimes come back long): refused before it is stored, since a
    // stored one could never be read back.
    let short = pb::Value {
        kind: Some(pb::value::Kind::DatetimeValue("2026-01-01T00Z".into())),
    };
    let mut data = pb::Data::default();
    data.fields.insert(
        "at".into(),
        pb::Value {
            kind: Some(pb::value::Kind::ListValue(pb::Values {
                items: vec![short; 50_000],
            })),
        },
    );
    let big = pb::PutRequest {
        namespace: "m".into(),
        collection: "c".into(),
        id: "big".into(),
        data: Some(data),
        ..Default::default()
    }
    .encode_to_vec();
    let max_payload = client.server_info().max_payload;
    assert!(big.len() < max_payload, "the request fits: {}", big.len());
    let (header, error, _) = raw(&client, Operation::Put, Some(&api), big).await;
    assert_eq!(header.as_deref(), Some("PAYLOAD_TOO_LARGE"));
    assert_eq!(
        error.expect("error").message,
        abi_documents::service::handler::PUT_REPLY_TOO_LARGE
    );
    // Nothing was stored by any refused put.
    let count = pb::CountRequest {
        namespace: "m".into(),
        collection: "c".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let (_, _, body) = raw(&client, Operation::Count, Some(&api), count).await;
    assert_eq!(pb::CountResponse::decode(body).expect("reply").count, 0);
    ours.stop().await;
}

/// Strict namespaces: a module writes only its own namespace, reads any;
/// platform identities write anywhere. Off (the reference's way), anyone
/// writes anywhere.
#[tokio::test]
async fn strict_namespaces_guard_writes_not_reads() {
    for strict in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let nats = NatsServer::start().await;
        let ours = OurServer::start(&nats.url(), dir.path(), strict).await;
        let client = async_nats::connect(nats.url()).await.expect("connect");
        let billing = DocumentClient::new(client.clone(), module_token("billing"), "billing");
        let shipping = DocumentClient::new(client.clone(), module_token("shipping"), "shipping");
        let api = DocumentClient::new(client.clone(), TokenSource::issued(token("api")), "billing");
        billing
            .ensure_collection(CollectionSpec::new("runs"))
            .await
            .expect("own namespace");
        billing
            .put("runs", "r1", Data::new(), None)
            .await
            .expect("own write");
        let into_billing = shipping.for_namespace("billing");
        let read = into_billing
            .get("runs", "r1")
            .await
            .expect("reads stay open");
        assert_eq!(read.version, 1);
        let written = into_billing.put("runs", "r2", Data::new(), None).await;
        let deleted = into_billing.delete("runs", "r1", None).await;
        if strict {
            assert_eq!(
                written.expect_err("strict").kind(),
                CallErrorKind::PermissionDenied
            );
            assert_eq!(
                deleted.expect_err("strict").kind(),
                CallErrorKind::PermissionDenied
            );
            assert!(
                into_billing
                    .try_get("runs", "r1")
                    .await
                    .expect("read")
                    .is_some()
            );
        } else {
            written.expect("open mode");
            deleted.expect("open mode");
        }
        api.put("runs", "r3", Data::new(), None)
            .await
            .expect("a platform identity writes anywhere");
        ours.stop().await;
    }
}

/// SIGTERM-like stop under load: every request sent before the stop gets an
/// answer (none is lost to the drain), and every acknowledged put is stored.
#[tokio::test]
async fn stopping_answers_every_request_already_routed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nats = NatsServer::start().await;
    let ours = OurServer::start(&nats.url(), dir.path(), false).await;
    let client = async_nats::connect(nats.url()).await.expect("connect");
    let docs = Arc::new(DocumentClient::new(client.clone(), module_token("m"), "m"));
    docs.ensure_collection(CollectionSpec::new("c"))
        .await
        .expect("ensure");
    let mut tasks = Vec::new();
    for i in 0..200 {
        let docs = docs.clone();
        tasks.push(tokio::spawn(async move {
            docs.put("c", &format!("d{i}"), Data::new(), Some(0)).await
        }));
    }
    // Stop while the puts are in flight.
    ours.stop().await;
    let mut acknowledged = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await.expect("task") {
            Ok(_) => acknowledged.push(i),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    CallErrorKind::NoResponders | CallErrorKind::TimedOut
                ),
                "a request got a wrong answer: {e}"
            ),
        }
    }
    // Reopen the file: every acknowledged put is there.
    let store = SqliteStore::open(SqliteConfig::new(dir.path().join("docs.sqlite")))
        .await
        .expect("reopen");
    use abi_document_model::DocumentStore as _;
    for i in acknowledged {
        store
            .get("m", "c", &format!("d{i}"))
            .await
            .expect("an acknowledged put is stored");
    }
}
