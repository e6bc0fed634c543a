//! The `abi.document.v1` wire contract, pinned by bytes the Python reference
//! wrote (`tests/golden/make_document_vectors.py`, with the reference's
//! generated classes and its own value encoder). Each value is built again
//! here, through our model where the reference used its encoder: the file
//! must decode to exactly that value, and both must encode to the file's bytes
//! (maps in key order, as the reference writes them deterministically).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;

use abi_document_model::pb::{data_to_pb, value_to_pb};
use abi_document_model::{Data, Datetime, Value};
use abi_proto::Message;
use abi_proto::common::v1 as common;
use abi_proto::document::v1 as pb;

type Check = Box<dyn Fn(&[u8]) -> Result<(), String>>;

fn exact<M>(expected: M) -> Check
where
    M: Message + Default + PartialEq + Debug + 'static,
{
    Box::new(move |bytes| {
        let decoded = M::decode(bytes).map_err(|e| format!("does not decode: {e}"))?;
        if decoded != expected {
            return Err(format!("decoded {decoded:?}\n  expected {expected:?}"));
        }
        for (what, again) in [
            ("re-encoding", decoded.encode_to_vec()),
            ("the Rust value", expected.encode_to_vec()),
        ] {
            if again != bytes {
                return Err(format!(
                    "{what} differs\n  file: {}\n  ours: {}",
                    hex::encode(bytes),
                    hex::encode(&again)
                ));
            }
        }
        Ok(())
    })
}

fn s(text: &str) -> String {
    text.to_owned()
}

fn when() -> Datetime {
    Datetime::parse_iso("2026-10-01T12:00:00.123456+02:00").unwrap()
}

fn context() -> Option<common::CallContext> {
    Some(common::CallContext {
        trace_id: s("trace-doc"),
        timeout_ms: 2500,
        principal_id: s("user:bob"),
        ..Default::default()
    })
}

fn call_error() -> Option<common::CallError> {
    Some(common::CallError {
        code: s("VERSION_CONFLICT"),
        message: s("VERSION_CONFLICT"),
        retryable: false,
        status: None,
    })
}

fn object(pairs: &[(&str, Value)]) -> Data {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn data() -> pb::Data {
    data_to_pb(&object(&[
        ("status", Value::from("RUNNING")),
        ("attempt", Value::Int(2)),
        ("ratio", Value::Float(0.25)),
        ("ok", Value::Bool(true)),
        ("none", Value::Null),
        ("raw", Value::Bytes(vec![0, 255])),
        ("when", Value::Datetime(when())),
        (
            "logs",
            Value::List(vec![Value::from("a"), Value::from("b")]),
        ),
        (
            "trigger",
            Value::Object(object(&[
                ("kind", Value::from("manual")),
                ("n", Value::Int(-1)),
            ])),
        ),
    ]))
}

fn spec() -> pb::CollectionSpec {
    let field = |name: &str, indexed, unique| pb::FieldSpec {
        name: s(name),
        r#type: s("string"),
        indexed,
        unique,
    };
    pb::CollectionSpec {
        name: s("job_runs_ed954e41fa3f395c"),
        fields: vec![
            field("job", true, false),
            field("run_id", false, true),
            field("finished_at", true, true),
        ],
        unique_together: vec![pb::UniqueGroup {
            fields: vec![s("job"), s("sequence")],
        }],
    }
}

fn document() -> pb::Document {
    pb::Document {
        id: s("ingest:42"),
        data: Some(data()),
        created_at: s("2026-10-01T10:00:00.123456+00:00"),
        updated_at: s("2026-10-01T10:00:01+00:00"),
        version: 3,
    }
}

fn predicates() -> Vec<pb::Predicate> {
    vec![
        pb::Predicate {
            field: s("status"),
            operator: s("in"),
            value: Some(value_to_pb(&Value::List(vec![
                Value::from("RUNNING"),
                Value::from("RETRYING"),
            ]))),
        },
        pb::Predicate {
            field: s("attempt"),
            operator: s("gte"),
            value: Some(value_to_pb(&Value::Int(2))),
        },
    ]
}

fn cases() -> Vec<(&'static str, Check)> {
    const NS: &str = "acme.billing";
    const COLL: &str = "job_runs_ed954e41fa3f395c";
    let v = |value: Value| exact(value_to_pb(&value));
    vec![
        ("value_empty", exact(pb::Value::default())),
        (
            "value_full",
            v(Value::Object(object(&[(
                "nested",
                Value::List(vec![Value::Int(1), Value::from("x"), Value::Null]),
            )]))),
        ),
        ("value_null", v(Value::Null)),
        ("value_string_unicode", v(Value::from("é 📄 文档"))),
        ("value_int_min", v(Value::Int(i64::MIN))),
        ("value_int_max", v(Value::Int(i64::MAX))),
        ("value_int_minus_one", v(Value::Int(-1))),
        ("value_float_fraction", v(Value::Float(0.1))),
        ("value_float_large", v(Value::Float(1e308))),
        ("value_float_negative", v(Value::Float(-2.5))),
        ("value_bool_false", v(Value::Bool(false))),
        ("value_bytes", v(Value::Bytes(vec![0, 1, 0xfe, 0xff]))),
        ("value_datetime", v(Value::Datetime(when()))),
        (
            "value_list",
            v(Value::List(vec![
                Value::Int(1),
                Value::List(vec![Value::Int(2), Value::List(vec![Value::Int(3)])]),
                Value::Object(object(&[("k", Value::from("v"))])),
            ])),
        ),
        ("values_empty", exact(pb::Values::default())),
        (
            "values_full",
            exact(pb::Values {
                items: vec![
                    value_to_pb(&Value::Int(1)),
                    value_to_pb(&Value::from("two")),
                ],
            }),
        ),
        ("data_empty", exact(pb::Data::default())),
        ("data_full", exact(data())),
        ("field_spec_empty", exact(pb::FieldSpec::default())),
        (
            "field_spec_full",
            exact(pb::FieldSpec {
                name: s("job"),
                r#type: s("string"),
                indexed: true,
                unique: true,
            }),
        ),
        ("unique_group_empty", exact(pb::UniqueGroup::default())),
        (
            "unique_group_full",
            exact(pb::UniqueGroup {
                fields: vec![s("job"), s("sequence")],
            }),
        ),
        (
            "collection_spec_empty",
            exact(pb::CollectionSpec::default()),
        ),
        ("collection_spec_full", exact(spec())),
        ("document_empty", exact(pb::Document::default())),
        ("document_full", exact(document())),
        ("predicate_empty", exact(pb::Predicate::default())),
        ("predicate_full", exact(predicates().remove(0))),
        ("order_by_empty", exact(pb::OrderBy::default())),
        (
            "order_by_full",
            exact(pb::OrderBy {
                field: s("finished_at"),
                direction: s("desc"),
            }),
        ),
        (
            "ensure_collection_request_empty",
            exact(pb::EnsureCollectionRequest::default()),
        ),
        (
            "ensure_collection_request_full",
            exact(pb::EnsureCollectionRequest {
                context: context(),
                namespace: s(NS),
                spec: Some(spec()),
            }),
        ),
        (
            "ensure_collection_response_empty",
            exact(pb::EnsureCollectionResponse::default()),
        ),
        (
            "ensure_collection_response_full",
            exact(pb::EnsureCollectionResponse {
                error: call_error(),
            }),
        ),
        (
            "drop_collection_request_empty",
            exact(pb::DropCollectionRequest::default()),
        ),
        (
            "drop_collection_request_full",
            exact(pb::DropCollectionRequest {
                context: context(),
                namespace: s(NS),
                collection: s(COLL),
            }),
        ),
        (
            "drop_collection_response_empty",
            exact(pb::DropCollectionResponse::default()),
        ),
        (
            "drop_collection_response_full",
            exact(pb::DropCollectionResponse {
                error: call_error(),
            }),
        ),
        (
            "collections_request_empty",
            exact(pb::CollectionsRequest::default()),
        ),
        (
            "collections_request_full",
            exact(pb::CollectionsRequest {
                context: context(),
                namespace: s(NS),
            }),
        ),
        (
            "collections_response_empty",
            exact(pb::CollectionsResponse::default()),
        ),
        (
            "collections_response_full",
            exact(pb::CollectionsResponse {
                error: call_error(),
                collections: vec![s("a"), s("b")],
            }),
        ),
        (
            "collection_spec_request_empty",
            exact(pb::CollectionSpecRequest::default()),
        ),
        (
            "collection_spec_request_full",
            exact(pb::CollectionSpecRequest {
                context: context(),
                namespace: s(NS),
                collection: s(COLL),
            }),
        ),
        (
            "collection_spec_response_empty",
            exact(pb::CollectionSpecResponse::default()),
        ),
        (
            "collection_spec_response_full",
            exact(pb::CollectionSpecResponse {
                error: call_error(),
                spec: Some(spec()),
            }),
        ),
        (
            "namespaces_request_empty",
            exact(pb::NamespacesRequest::default()),
        ),
        (
            "namespaces_request_full",
            exact(pb::NamespacesRequest { context: context() }),
        ),
        (
            "namespaces_response_empty",
            exact(pb::NamespacesResponse::default()),
        ),
        (
            "namespaces_response_full",
            exact(pb::NamespacesResponse {
                error: call_error(),
                namespaces: vec![s("acme.billing"), s("naas_abi")],
            }),
        ),
        ("put_request_empty", exact(pb::PutRequest::default())),
        (
            "put_request_full",
            exact(pb::PutRequest {
                context: context(),
                namespace: s(NS),
                collection: s(COLL),
                id: s("ingest:42"),
                data: Some(data()),
                if_version: Some(3),
            }),
        ),
        (
            "put_request_create_only",
            exact(pb::PutRequest {
                namespace: s(NS),
                collection: s(COLL),
                id: s("ingest:42"),
                if_version: Some(0),
                ..Default::default()
            }),
        ),
        ("put_response_empty", exact(pb::PutResponse::default())),
        (
            "put_response_full",
            exact(pb::PutResponse {
                error: call_error(),
                document: Some(document()),
            }),
        ),
        ("get_request_empty", exact(pb::GetRequest::default())),
        (
            "get_request_full",
            exact(pb::GetRequest {
                context: context(),
                namespace: s(NS),
                collection: s(COLL),
                id: s("ingest:42"),
            }),
        ),
        ("get_response_empty", exact(pb::GetResponse::default())),
        (
            "get_response_full",
            exact(pb::GetResponse {
                error: call_error(),
                document: Some(document()),
            }),
        ),
        ("delete_request_empty", exact(pb::DeleteRequest::default())),
        (
            "delete_request_full",
            exact(pb::DeleteRequest {
                context: context(),
                namespace: s(NS),
                collection: s(COLL),
                id: s("ingest:42"),
                if_version: Some(7),
            }),
        ),
        (
            "delete_request_version_zero",
            exact(pb::DeleteRequest {
                id: s("x"),
                if_version: Some(0),
                ..Default::default()
            }),
        ),
        (
            "delete_response_empty",
            exact(pb::DeleteResponse::default()),
        ),
        (
            "delete_response_full",
            exact(pb::DeleteResponse {
                error: call_error(),
            }),
        ),
        ("find_request_empty", exact(pb::FindRequest::default())),
        (
            "find_request_full",
            exact(pb::FindRequest {
                context: context(),
                namespace: s(NS),
                collection: s(COLL),
                r#where: predicates(),
                order_by: Some(pb::OrderBy {
                    field: s("finished_at"),
                    direction: s("asc"),
                }),
                limit: Some(20),
                cursor: Some(s("eyJ2IjoxfQ==")),
                max_bytes: Some(131_072),
            }),
        ),
        (
            "find_request_zero_limit",
            exact(pb::FindRequest {
                limit: Some(0),
                max_bytes: Some(0),
                cursor: Some(String::new()),
                ..Default::default()
            }),
        ),
        ("find_response_empty", exact(pb::FindResponse::default())),
        (
            "find_response_full",
            exact(pb::FindResponse {
                error: call_error(),
                items: vec![
                    document(),
                    pb::Document {
                        id: s("b"),
                        version: 1,
                        ..Default::default()
                    },
                ],
                cursor: Some(s("next")),
            }),
        ),
        (
            "find_response_empty_cursor",
            exact(pb::FindResponse {
                cursor: Some(String::new()),
                ..Default::default()
            }),
        ),
        ("count_request_empty", exact(pb::CountRequest::default())),
        (
            "count_request_full",
            exact(pb::CountRequest {
                context: context(),
                namespace: s(NS),
                collection: s(COLL),
                r#where: predicates(),
            }),
        ),
        ("count_response_empty", exact(pb::CountResponse::default())),
        (
            "count_response_full",
            exact(pb::CountResponse {
                error: call_error(),
                count: i64::MAX,
            }),
        ),
    ]
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_vectors(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "bin"))
        .map(|path| {
            (
                path.file_stem().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).unwrap(),
            )
        })
        .collect()
}

fn vectors_dir() -> PathBuf {
    workspace_root().join("tests/golden/document_vectors")
}

#[test]
fn every_document_vector_decodes_to_the_rust_value_and_re_encodes_to_the_same_bytes() {
    let files = read_vectors(&vectors_dir());
    let cases = cases();
    let names: BTreeSet<String> = cases.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(names.len(), cases.len(), "a case is listed twice");
    let on_disk: BTreeSet<String> = files.keys().cloned().collect();
    assert_eq!(on_disk, names, "vector files and Rust cases differ");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(name, check)| {
            check(&files[*name])
                .err()
                .map(|why| format!("{name}: {why}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_changed_value_deep_inside_fails_the_check() {
    let files = read_vectors(&vectors_dir());
    let mut wrong = document();
    let fields = &mut wrong.data.as_mut().unwrap().fields;
    fields.insert(s("attempt"), value_to_pb(&Value::Int(3)));
    assert!(
        exact(pb::PutResponse {
            error: call_error(),
            document: Some(wrong)
        })(&files["put_response_full"])
        .is_err()
    );
}

#[test]
fn the_generator_reproduces_the_committed_vectors() {
    let out = tempfile::tempdir().unwrap();
    let result = Command::new(abi_test_support::python())
        .arg(workspace_root().join("tests/golden/make_document_vectors.py"))
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("run the venv Python (./scripts/setup.sh)");
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let made = read_vectors(out.path());
    let committed = read_vectors(&vectors_dir());
    assert_eq!(
        made.keys().collect::<Vec<_>>(),
        committed.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &made {
        assert_eq!(
            hex::encode(bytes),
            hex::encode(&committed[name]),
            "{name}: regenerate and commit"
        );
    }
}
