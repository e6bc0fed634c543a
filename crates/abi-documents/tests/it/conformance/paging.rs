//! Ordering, cursors and byte-bounded pages.

use abi_document_model::{DocumentError, DocumentStore as _, FindQuery, OrderBy, Value};

use super::values::at;
use super::{Backend, all_ids, data, docs, iterate, p, query};

/// Paging one at a time visits every kind in the portable order.
pub async fn cursor_sort_keys_match_database_order_for_every_value_kind<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let values = vec![
        Value::Null,
        Value::Bool(false),
        Value::Bool(true),
        Value::Int(-1),
        Value::Int(0),
        Value::Int(9),
        Value::Int(10),
        "".into(),
        "a".into(),
        "z".into(),
        at("2026-01-01T00:00:00+00:00"),
        Value::Bytes(vec![]),
        Value::Bytes(vec![0]),
        Value::Bytes(vec![255]),
        Value::List(vec![]),
        Value::List(vec![Value::Int(1)]),
        Value::Object(data([])),
        Value::Object(data([("a", Value::Int(1))])),
    ];
    for (i, v) in values.iter().enumerate() {
        s.put(
            "module",
            "records",
            &format!("{i:02}"),
            data([("x", v.clone())]),
            None,
        )
        .await
        .expect("put");
    }
    let expected: Vec<String> = (0..values.len()).map(|i| format!("{i:02}")).collect();
    assert_eq!(
        all_ids(&s, vec![], Some(OrderBy::asc("x")), 1).await,
        expected
    );
    let mut reversed = expected;
    reversed.reverse();
    assert_eq!(
        all_ids(&s, vec![], Some(OrderBy::desc("x")), 1).await,
        reversed
    );
}

/// Numbers order numerically, ties by id, missing and null first.
pub async fn ordering_is_numeric_and_paging_handles_ties_and_nulls<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    s.ensure_collection(
        "module",
        abi_document_model::CollectionSpec::new("records")
            .field(abi_document_model::FieldSpec::new("n", "int").indexed()),
    )
    .await
    .expect("ensure");
    for (id, d) in [
        ("a", data([])),
        ("b", data([("n", Value::Null)])),
        ("c", data([("n", Value::Int(9))])),
        ("d", data([("n", Value::Int(10))])),
        ("e", data([("n", Value::Int(10))])),
    ] {
        s.put("module", "records", id, d, None).await.expect("put");
    }
    assert_eq!(
        all_ids(&s, vec![], Some(OrderBy::asc("n")), 2).await,
        ["a", "b", "c", "d", "e"]
    );
    assert_eq!(
        all_ids(&s, vec![], Some(OrderBy::desc("n")), 2).await,
        ["e", "d", "c", "b", "a"]
    );
}

/// A cursor resumes after its anchor even when the anchor is gone.
pub async fn cursor_is_stable_after_insert_and_deleted_anchor<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    for id in ["b", "d", "f"] {
        let n = i64::from(id.as_bytes()[0]);
        s.put("module", "records", id, data([("n", Value::Int(n))]), None)
            .await
            .expect("put");
    }
    let page = s
        .find(
            "module",
            "records",
            query(vec![], Some(OrderBy::asc("n")), 2, None),
        )
        .await
        .expect("find");
    s.put("module", "records", "a", data([("n", Value::Int(1))]), None)
        .await
        .expect("a");
    s.put(
        "module",
        "records",
        "e",
        data([("n", Value::Int(101))]),
        None,
    )
    .await
    .expect("e");
    s.delete("module", "records", "d", None)
        .await
        .expect("delete");
    let page = s
        .find(
            "module",
            "records",
            query(vec![], Some(OrderBy::asc("n")), 2, page.cursor),
        )
        .await
        .expect("find");
    assert_eq!(
        page.items.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["e", "f"]
    );
    assert_eq!(page.cursor, None);
}

/// A cursor is refused by another query, and garbage is refused.
pub async fn cursor_rejects_other_queries_and_invalid_tokens<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    for id in ["a", "b"] {
        s.put("module", "records", id, data([("x", Value::Int(1))]), None)
            .await
            .expect("put");
    }
    let cursor = s
        .find("module", "records", query(vec![], None, 1, None))
        .await
        .expect("find")
        .cursor
        .expect("a cursor");
    for invalid in ["not-a-cursor", "e30=", "bnVsbA==", cursor.as_str()] {
        let e = s
            .find(
                "module",
                "records",
                query(vec![p("x", "eq", 1i64)], None, 1, Some(invalid.to_owned())),
            )
            .await;
        assert_eq!(
            e,
            Err(DocumentError::invalid("Invalid cursor for this query")),
            "{invalid}"
        );
    }
}

/// Predicates in another order are the same query for a cursor.
pub async fn adapter_filters_and_reordered_predicates<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    for id in ["a", "b", "c"] {
        s.put(
            "module",
            "records",
            id,
            data([("x", Value::Int(1)), ("y", Value::Bool(true))]),
            None,
        )
        .await
        .expect("put");
    }
    let where_ = vec![p("x", "eq", 1i64), p("y", "eq", true)];
    let first = s
        .find("module", "records", query(where_.clone(), None, 1, None))
        .await
        .expect("first");
    let mut reordered = where_;
    reordered.reverse();
    let second = s
        .find("module", "records", query(reordered, None, 1, first.cursor))
        .await
        .expect("second");
    assert_eq!(second.items[0].id, "b");
}

fn bytes_query(order_by: Option<OrderBy>, limit: i64, max_bytes: i64) -> FindQuery {
    FindQuery {
        where_: vec![],
        order_by,
        limit,
        cursor: None,
        max_bytes: Some(max_bytes),
    }
}

/// `max_bytes` cuts pages; cursors continue without a gap or a repeat.
pub async fn max_bytes_cuts_pages_without_gap_or_repeat<B: Backend>(backend: &B) {
    for order_by in [None, Some(OrderBy::desc("n"))] {
        let (_db, s) = docs(backend).await;
        for n in 0..10 {
            let d = data([("n", Value::Int(n)), ("text", "x".repeat(1000).into())]);
            s.put("module", "records", &format!("d{n:02}"), d, None)
                .await
                .expect("put");
        }
        let pages = iterate(
            &s,
            "module",
            "records",
            vec![],
            order_by.clone(),
            10,
            Some(3000),
        )
        .await;
        assert!(pages.len() > 1);
        assert!(
            pages.iter().all(|page| (1..=3).contains(&page.len())),
            "{pages:?}"
        );
        let mut expected: Vec<String> = (0..10).map(|n| format!("d{n:02}")).collect();
        if order_by.is_some() {
            expected.reverse();
        }
        assert_eq!(pages.concat(), expected);
    }
}

/// An item larger than the budget comes back alone.
pub async fn an_item_larger_than_max_bytes_comes_back_alone<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    for (id, text) in [
        ("a", "small".to_owned()),
        ("b", "x".repeat(10_000)),
        ("c", "small".to_owned()),
    ] {
        s.put("module", "records", id, data([("text", text.into())]), None)
            .await
            .expect("put");
    }
    let pages = iterate(&s, "module", "records", vec![], None, 10, Some(1000)).await;
    assert_eq!(pages, [vec!["a"], vec!["b"], vec!["c"]]);
    let mut q = bytes_query(None, 10, 1);
    q.where_ = vec![p("text", "ne", "small")];
    let page = s.find("module", "records", q).await.expect("find");
    assert_eq!(page.items[0].id, "b");
}

/// `limit` still caps a page within a large budget.
pub async fn limit_still_caps_a_page_within_max_bytes<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    for id in ["a", "b", "c", "d", "e"] {
        s.put(
            "module",
            "records",
            id,
            data([("text", "small".into())]),
            None,
        )
        .await
        .expect("put");
    }
    let page = s
        .find("module", "records", bytes_query(None, 2, 1_000_000))
        .await
        .expect("find");
    assert_eq!(
        page.items.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert!(page.cursor.is_some());
}
