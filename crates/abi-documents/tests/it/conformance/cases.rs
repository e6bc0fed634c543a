//! Collections, versions, uniqueness, peers, names and validation.

use std::sync::Arc;

use abi_document_model::{
    CollectionSpec, DocumentError, DocumentStore, FieldSpec, FindQuery, OrderBy, Value,
};

use super::{Backend, adapter, all_ids, data, docs, find_ids, p, query};

fn unique(e: &Result<impl std::fmt::Debug, DocumentError>) -> bool {
    matches!(e, Err(DocumentError::UniqueViolation(_)))
}

fn conflict(e: &Result<impl std::fmt::Debug, DocumentError>) -> bool {
    matches!(e, Err(DocumentError::VersionConflict(_)))
}

/// Deterministic pseudo-random text (the reference seeds Python's RNG).
fn noise(len: usize, astral: bool) -> String {
    let mut state: u64 = 1258;
    let alphabet: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let r = (state >> 33) as u32;
            if astral {
                char::from_u32(0x10000 + r % 0xFFFFF).unwrap_or('x')
            } else {
                alphabet[r as usize % alphabet.len()]
            }
        })
        .collect()
}

/// Long values work in indexed and unique fields (strings, bytes, astral).
pub async fn long_incompressible_values_index_and_unique<B: Backend>(backend: &B) {
    for kind in ["string", "bytes", "unicode"] {
        let (_db, s) = docs(backend).await;
        let prefix = noise(5000, kind == "unicode");
        let field_type = if kind == "bytes" { "bytes" } else { "string" };
        let values: Vec<Value> = ["a", "b", "c"]
            .iter()
            .map(|suffix| {
                let text = format!("{prefix}{suffix}");
                if kind == "bytes" {
                    Value::Bytes(text.into_bytes())
                } else {
                    Value::String(text)
                }
            })
            .collect();
        s.put(
            "module",
            "records",
            "0",
            data([("x", values[0].clone())]),
            None,
        )
        .await
        .expect("0");
        s.ensure_collection(
            "module",
            CollectionSpec::new("records").field(FieldSpec::new("x", field_type).indexed()),
        )
        .await
        .expect("ensure");
        for (i, v) in values.iter().enumerate().skip(1) {
            s.put(
                "module",
                "records",
                &i.to_string(),
                data([("x", v.clone())]),
                None,
            )
            .await
            .expect("put");
        }
        s.ensure_collection("module", CollectionSpec::new("records"))
            .await
            .expect("re-ensure");
        assert_eq!(
            s.count("module", "records", vec![p("x", "eq", values[1].clone())])
                .await,
            Ok(1)
        );
        assert_eq!(
            s.count("module", "records", vec![p("x", "gt", values[0].clone())])
                .await,
            Ok(2)
        );
        assert_eq!(
            all_ids(&s, vec![], Some(OrderBy::asc("x")), 1).await,
            ["0", "1", "2"]
        );
        assert_eq!(
            all_ids(&s, vec![], Some(OrderBy::desc("x")), 1).await,
            ["2", "1", "0"]
        );
        if kind != "unicode" {
            s.ensure_collection(
                "module",
                CollectionSpec::new("u").field(FieldSpec::new("x", field_type).unique()),
            )
            .await
            .expect("unique");
            s.put("module", "u", "0", data([("x", values[0].clone())]), None)
                .await
                .expect("u0");
            s.put("module", "u", "1", data([("x", values[1].clone())]), None)
                .await
                .expect("u1");
            assert!(unique(
                &s.put("module", "u", "2", data([("x", values[0].clone())]), None)
                    .await
            ));
        }
    }
}

/// Another store's declarations and drops are seen at once.
pub async fn catalog_changes_from_peer_are_visible<B: Backend>(backend: &B) {
    let (db, s) = docs(backend).await;
    let peer = backend.open(&db).await;
    s.put(
        "module",
        "records",
        "one",
        data([("x", Value::Int(1))]),
        None,
    )
    .await
    .expect("put");
    peer.ensure_collection(
        "module",
        CollectionSpec::new("records").field(FieldSpec::new("x", "int")),
    )
    .await
    .expect("peer ensure");
    let e = s
        .put(
            "module",
            "records",
            "two",
            data([("x", "bad".into())]),
            None,
        )
        .await;
    assert_eq!(
        e,
        Err(DocumentError::invalid("Field 'x' must have type int"))
    );
    peer.drop_collection("module", "records")
        .await
        .expect("drop");
    assert!(matches!(
        s.get("module", "records", "one").await,
        Err(DocumentError::CollectionNotFound(_))
    ));
}

/// A declaration existing data breaks is refused and changes nothing.
pub async fn invalid_type_declaration_preserves_data_and_catalog<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    s.put(
        "module",
        "records",
        "legacy",
        data([("x", "text".into())]),
        None,
    )
    .await
    .expect("put");
    let e = s
        .ensure_collection(
            "module",
            CollectionSpec::new("records").field(FieldSpec::new("x", "int")),
        )
        .await;
    assert_eq!(
        e,
        Err(DocumentError::invalid(
            "Cannot declare module.records: document 'legacy': Field 'x' must have type int. Migrate existing data before adding this declaration."
        ))
    );
    s.ensure_collection("module", CollectionSpec::new("records"))
        .await
        .expect("ensure");
    assert_eq!(
        s.get("module", "records", "legacy")
            .await
            .expect("get")
            .data,
        data([("x", "text".into())])
    );
    s.put(
        "module",
        "records",
        "new",
        data([("x", "still allowed".into())]),
        None,
    )
    .await
    .expect("put");
}

/// `delete(if_version=0)` always conflicts.
pub async fn delete_zero_is_a_version_conflict_even_for_absent_documents<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    assert_eq!(
        s.delete("module", "records", "absent", Some(0)).await,
        Err(DocumentError::VersionConflict(
            "Document records/absent does not have version 0".into()
        ))
    );
}

/// Field names with quotes, dots, `$`, newlines and non-ASCII work as
/// fields, in queries and in unique indexes.
pub async fn literal_field_names_preserve_queries_and_uniqueness<B: Backend>(backend: &B) {
    for field in [
        "a.b'\"$",
        "quote\"and\\slash",
        "line\nbreak",
        "$tag",
        "caf\u{e9}",
    ] {
        let (_db, s) = adapter(backend).await;
        s.ensure_collection(
            "module",
            CollectionSpec::new("literal")
                .field(FieldSpec::new(field, "string").indexed().unique()),
        )
        .await
        .expect("ensure");
        s.put(
            "module",
            "literal",
            "first",
            data([(field, "value".into())]),
            None,
        )
        .await
        .expect("put");
        assert!(unique(
            &s.put(
                "module",
                "literal",
                "duplicate",
                data([(field, "value".into())]),
                None
            )
            .await
        ));
        assert_eq!(
            s.count("module", "literal", vec![p(field, "eq", "value")])
                .await,
            Ok(1)
        );
        let q = query(
            vec![p(field, "in", vec![Value::from("value")])],
            Some(OrderBy::asc(field)),
            1,
            None,
        );
        assert_eq!(find_ids(&s, "literal", q).await, ["first"], "{field}");
    }
}

/// `collection_spec` gives the merged declaration.
pub async fn collection_spec_reads_back_as_declared_and_merged<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    s.ensure_collection(
        "module",
        CollectionSpec::new("people")
            .field(FieldSpec::new("email", "string").unique())
            .field(FieldSpec::new("age", "int").indexed())
            .unique_together(["first", "last"]),
    )
    .await
    .expect("ensure");
    s.ensure_collection(
        "module",
        CollectionSpec::new("people").field(FieldSpec::new("note", "json")),
    )
    .await
    .expect("merge");
    let spec = s.collection_spec("module", "people").await.expect("spec");
    assert_eq!(
        spec,
        CollectionSpec::new("people")
            .field(FieldSpec::new("email", "string").unique())
            .field(FieldSpec::new("age", "int").indexed())
            .field(FieldSpec::new("note", "json"))
            .unique_together(["first", "last"])
    );
    assert_eq!(
        s.collection_spec("module", "records").await,
        Ok(CollectionSpec::new("records"))
    );
    for (ns, c) in [("module", "absent"), ("another", "people")] {
        assert!(matches!(
            s.collection_spec(ns, c).await,
            Err(DocumentError::CollectionNotFound(_))
        ));
    }
    // Redeclaring a group in another order, or a field with fewer flags,
    // changes nothing.
    s.ensure_collection(
        "module",
        CollectionSpec::new("people")
            .field(FieldSpec::new("email", "string"))
            .unique_together(["last", "first"]),
    )
    .await
    .expect("redeclare");
    assert_eq!(s.collection_spec("module", "people").await, Ok(spec));
}

/// Two stores on one database share data and constraints; CAS has one winner.
pub async fn independent_adapters_share_data_constraints_and_atomic_writes<B: Backend>(
    backend: &B,
) {
    let (db, s) = docs(backend).await;
    s.ensure_collection(
        "module",
        CollectionSpec::new("records").field(FieldSpec::new("x", "int").unique()),
    )
    .await
    .expect("ensure");
    s.put(
        "module",
        "records",
        "id",
        data([("x", Value::Int(1))]),
        None,
    )
    .await
    .expect("put");
    let peer = backend.open(&db).await;
    peer.ensure_collection("module", CollectionSpec::new("records"))
        .await
        .expect("peer");
    assert_eq!(
        peer.get("module", "records", "id").await.expect("get").data,
        data([("x", Value::Int(1))])
    );
    assert!(unique(
        &peer
            .put(
                "module",
                "records",
                "duplicate",
                data([("x", Value::Int(1))]),
                None
            )
            .await
    ));
    let (a, b) = tokio::join!(
        s.put(
            "module",
            "records",
            "id",
            data([("x", Value::Int(2))]),
            Some(1)
        ),
        peer.put(
            "module",
            "records",
            "id",
            data([("x", Value::Int(2))]),
            Some(1)
        ),
    );
    assert_eq!(
        usize::from(a.is_ok()) + usize::from(b.is_ok()),
        1,
        "{a:?} {b:?}"
    );
    assert!(conflict(&a) || conflict(&b));
    assert_eq!(
        peer.get("module", "records", "id")
            .await
            .expect("get")
            .version,
        2
    );
}

/// Concurrent unconditional puts from two stores get versions 1..=10.
pub async fn concurrent_unconditional_writes_increment_every_version<B: Backend>(backend: &B) {
    let (db, s) = docs(backend).await;
    let stores = [Arc::new(s), Arc::new(backend.open(&db).await)];
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..10 {
        let store = Arc::clone(&stores[i % 2]);
        tasks.spawn(async move {
            store
                .put("module", "records", "id", data([]), None)
                .await
                .map(|d| d.version)
        });
    }
    let mut versions: Vec<i64> = tasks
        .join_all()
        .await
        .into_iter()
        .map(|v| v.expect("put"))
        .collect();
    versions.sort_unstable();
    assert_eq!(versions, (1..=10).collect::<Vec<_>>());
}

/// Collections come and go per namespace.
pub async fn collection_lifecycle_and_namespaces<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    s.put("module", "records", "id", data([]), None)
        .await
        .expect("put");
    s.ensure_collection("module", CollectionSpec::new("records"))
        .await
        .expect("again");
    s.ensure_collection("other", CollectionSpec::new("records"))
        .await
        .expect("other");
    assert_eq!(
        s.collections("module").await,
        Ok(vec!["records".to_owned()])
    );
    assert_eq!(s.collections("unknown").await, Ok(vec![]));
    assert!(matches!(
        s.get("other", "records", "id").await,
        Err(DocumentError::DocumentNotFound(_))
    ));
    s.drop_collection("other", "records")
        .await
        .expect("drop other");
    assert_eq!(
        s.get("module", "records", "id").await.expect("get").version,
        1
    );
    assert!(matches!(
        s.put("other", "records", "id", data([]), None).await,
        Err(DocumentError::CollectionNotFound(_))
    ));
    s.drop_collection("module", "records").await.expect("drop");
    s.ensure_collection("module", CollectionSpec::new("records"))
        .await
        .expect("recreate");
    assert_eq!(s.count("module", "records", vec![]).await, Ok(0));
}

/// `namespaces` lists each namespace holding a collection, sorted, once.
pub async fn namespaces_lists_each_namespace_holding_a_collection<B: Backend>(backend: &B) {
    let (_db, s) = adapter(backend).await;
    s.ensure_collection("zeta.module", CollectionSpec::new("a"))
        .await
        .expect("a");
    s.ensure_collection("alpha.module", CollectionSpec::new("b"))
        .await
        .expect("b");
    s.ensure_collection("alpha.module", CollectionSpec::new("c"))
        .await
        .expect("c");
    s.put("alpha.module", "b", "id", data([]), None)
        .await
        .expect("put");
    assert_eq!(
        s.namespaces().await,
        Ok(vec!["alpha.module".to_owned(), "zeta.module".to_owned()])
    );
    s.drop_collection("zeta.module", "a").await.expect("drop");
    assert_eq!(s.namespaces().await, Ok(vec!["alpha.module".to_owned()]));
}

/// Every document operation on a missing collection says so.
pub async fn missing_collection_raises<B: Backend>(backend: &B) {
    let (_db, s) = adapter(backend).await;
    let missing =
        || DocumentError::CollectionNotFound("Collection none.missing does not exist".into());
    assert_eq!(s.get("none", "missing", "id").await, Err(missing()));
    assert_eq!(
        s.put("none", "missing", "id", data([]), None).await,
        Err(missing())
    );
    assert_eq!(
        s.delete("none", "missing", "id", None).await,
        Err(missing())
    );
    assert_eq!(
        s.find("none", "missing", FindQuery::default()).await,
        Err(missing())
    );
    assert_eq!(s.count("none", "missing", vec![]).await, Err(missing()));
    assert_eq!(s.drop_collection("none", "missing").await, Err(missing()));
    assert_eq!(s.collection_spec("none", "missing").await, Err(missing()));
}

/// The reference's compare-and-swap test.
pub async fn compare_and_swap<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let first = s
        .put(
            "module",
            "records",
            "id",
            data([("old", Value::Bool(true))]),
            Some(0),
        )
        .await
        .expect("create");
    let second = s
        .put(
            "module",
            "records",
            "id",
            data([("new", Value::Bool(true))]),
            Some(first.version),
        )
        .await
        .expect("swap");
    assert_eq!(second.version, 2);
    assert_eq!(second.created_at, first.created_at);
    assert_eq!(second.data, data([("new", Value::Bool(true))]));
    for version in [0, first.version] {
        assert!(conflict(
            &s.put("module", "records", "id", data([]), Some(version))
                .await
        ));
        assert!(conflict(
            &s.delete("module", "records", "id", Some(version)).await
        ));
    }
    assert_eq!(
        s.put("module", "records", "missing", data([]), Some(1))
            .await,
        Err(DocumentError::VersionConflict(
            "Document records/missing does not have version 1".into()
        ))
    );
    s.delete("module", "records", "id", Some(second.version))
        .await
        .expect("delete");
    assert_eq!(
        s.get("module", "records", "id").await,
        Err(DocumentError::DocumentNotFound(
            "Document records/id does not exist".into()
        ))
    );
    s.delete("module", "records", "id", None)
        .await
        .expect("delete absent");
    assert!(conflict(
        &s.delete("module", "records", "id", Some(2)).await
    ));
}

/// `if_version`: unset writes always, 0 only creates, n swaps; versions
/// start at 1 and count every write.
pub async fn if_version_semantics<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let put = |v| s.put("module", "records", "id", data([]), v);
    assert_eq!(put(None).await.expect("1").version, 1);
    assert_eq!(put(None).await.expect("2").version, 2);
    assert!(conflict(&put(Some(0)).await));
    assert!(conflict(&put(Some(1)).await));
    assert_eq!(put(Some(2)).await.expect("3").version, 3);
    assert!(conflict(&put(Some(7)).await));
    assert_eq!(
        put(Some(-1)).await,
        Err(DocumentError::invalid(
            "if_version must be a nonnegative integer or None"
        ))
    );
    assert_eq!(
        s.get("module", "records", "id").await.expect("get").version,
        3
    );
    s.delete("module", "records", "id", None)
        .await
        .expect("delete");
    assert_eq!(put(Some(0)).await.expect("recreated").version, 1);
}

/// Concurrent CAS writers on one document: exactly one wins each version.
pub async fn concurrent_cas_has_one_winner<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let s = Arc::new(s);
    s.put("module", "records", "id", data([]), Some(0))
        .await
        .expect("create");
    for version in 1..=5i64 {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..8i64 {
            let s = Arc::clone(&s);
            tasks.spawn(async move {
                s.put(
                    "module",
                    "records",
                    "id",
                    data([("winner", Value::Int(i))]),
                    Some(version),
                )
                .await
            });
        }
        let results = tasks.join_all().await;
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "version {version}"
        );
        assert!(results.iter().all(|r| r.is_ok() || conflict(r)));
    }
    assert_eq!(
        s.get("module", "records", "id").await.expect("get").version,
        6
    );
}

/// Unique fields ignore missing and null; groups are unique together;
/// declarations only add; other namespaces are separate.
pub async fn unique_sparse_compound_and_additive_declarations<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let spec = CollectionSpec::new("records")
        .field(FieldSpec::new("email", "string").unique())
        .unique_together(["team", "slug"]);
    s.ensure_collection("module", spec.clone())
        .await
        .expect("ensure");
    s.ensure_collection("module", CollectionSpec::new("records"))
        .await
        .expect("again");
    for (id, d) in [
        ("a", data([])),
        ("b", data([])),
        ("c", data([("email", Value::Null)])),
        ("d", data([("email", Value::Null)])),
    ] {
        s.put("module", "records", id, d, None)
            .await
            .expect("sparse");
    }
    let full = data([
        ("email", "a".into()),
        ("team", "t".into()),
        ("slug", "s".into()),
    ]);
    s.put("module", "records", "one", full.clone(), None)
        .await
        .expect("one");
    for d in [
        data([("email", "a".into())]),
        data([("team", "t".into()), ("slug", "s".into())]),
    ] {
        assert!(unique(&s.put("module", "records", "two", d, None).await));
    }
    assert_eq!(s.count("module", "records", vec![]).await, Ok(5));
    s.ensure_collection("other", spec).await.expect("other");
    s.put("other", "records", "one", full, None)
        .await
        .expect("other one");
}

/// A unique declaration over duplicates fails and rolls back whole.
pub async fn adding_unique_constraint_checks_existing_data_and_rolls_back<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    for id in ["a", "b"] {
        s.put("module", "records", id, data([("x", Value::Int(1))]), None)
            .await
            .expect("put");
    }
    let spec = CollectionSpec::new("records").field(FieldSpec::new("x", "int").unique());
    assert!(unique(&s.ensure_collection("module", spec.clone()).await));
    assert_eq!(
        s.collection_spec("module", "records").await,
        Ok(CollectionSpec::new("records"))
    );
    s.put("module", "records", "c", data([("x", Value::Int(1))]), None)
        .await
        .expect("c");
    s.delete("module", "records", "a", None).await.expect("a");
    s.delete("module", "records", "b", None).await.expect("b");
    s.ensure_collection("module", spec)
        .await
        .expect("now unique");
}

/// Names and values full of SQL are only data.
pub async fn names_and_predicate_values_are_not_sql<B: Backend>(backend: &B) {
    let (_db, s) = adapter(backend).await;
    let name = "x'%s?; DROP TABLE abi_documents; --";
    let field = "a.b'\"$";
    s.ensure_collection(
        name,
        CollectionSpec::new(name).field(FieldSpec::new(field, "string").unique()),
    )
    .await
    .expect("ensure");
    s.put(name, name, name, data([(field, name.into())]), None)
        .await
        .expect("put");
    let page = s
        .find(
            name,
            name,
            query(
                vec![p(field, "eq", name)],
                Some(OrderBy::asc(field)),
                1,
                None,
            ),
        )
        .await
        .expect("find");
    assert_eq!(page.items[0].id, name);
}

/// Bad arguments are refused with the reference's messages, in its order.
pub async fn validation_messages_and_order<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let names = DocumentError::invalid("Names must be nonempty strings without NUL characters");
    // The id and version are checked before the collection is looked up.
    assert_eq!(
        s.put("none", "missing", "", data([]), None).await,
        Err(names.clone())
    );
    assert_eq!(s.get("module", "records", "a\0b").await, Err(names.clone()));
    assert_eq!(
        s.put("", "records", "id", data([]), None).await,
        Err(names.clone())
    );
    assert_eq!(s.collections("").await, Err(names.clone()));
    assert_eq!(
        s.put("module", "records", "id", data([("s", "a\0".into())]), None)
            .await,
        Err(DocumentError::invalid(
            "Document strings cannot contain NUL characters"
        ))
    );
    assert_eq!(
        s.put(
            "module",
            "records",
            "id",
            data([("f", Value::Float(f64::NAN))]),
            None
        )
        .await,
        Err(DocumentError::invalid("Document floats must be finite"))
    );
    let bad = |limit, where_, order_by, max_bytes, cursor| FindQuery {
        where_,
        order_by,
        limit,
        cursor,
        max_bytes,
    };
    let find = |q| s.find("none", "missing", q);
    assert_eq!(
        find(bad(0, vec![], None, None, None)).await,
        Err(DocumentError::invalid(
            "Page size must be an integer between 1 and 1000"
        ))
    );
    assert_eq!(
        find(bad(10, vec![p("x", "like", 1i64)], None, None, None)).await,
        Err(DocumentError::invalid(
            "Unsupported predicate operator: like"
        ))
    );
    assert_eq!(
        find(bad(10, vec![p("x", "gt", Value::Null)], None, None, None)).await,
        Err(DocumentError::invalid(
            "Range predicates require a non-null scalar"
        ))
    );
    assert_eq!(
        find(bad(10, vec![p("x", "exists", 1i64)], None, None, None)).await,
        Err(DocumentError::invalid("exists requires a boolean"))
    );
    assert_eq!(
        find(bad(10, vec![p("x", "in", 1i64)], None, None, None)).await,
        Err(DocumentError::invalid("in/nin require a list"))
    );
    assert_eq!(
        find(bad(10, vec![], None, Some(0), None)).await,
        Err(DocumentError::invalid(
            "max_bytes must be a positive integer or None"
        ))
    );
    // A bad cursor is refused before the collection is looked up.
    assert_eq!(
        find(bad(10, vec![], None, None, Some("x".into()))).await,
        Err(DocumentError::invalid("Invalid cursor for this query"))
    );
    assert_eq!(
        s.ensure_collection(
            "module",
            CollectionSpec::new("records")
                .field(FieldSpec::new("x", "int"))
                .field(FieldSpec::new("x", "int"))
        )
        .await,
        Err(DocumentError::invalid("Duplicate field declarations"))
    );
}
