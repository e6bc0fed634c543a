//! Values: round trips, numbers, bytes, datetimes, predicates.

use abi_document_model::{
    CollectionSpec, Datetime, DocumentError, DocumentStore, FieldSpec, OrderBy, Value,
};

use super::{Backend, all_ids, data, docs, find_ids, p, query};

/// A UTC datetime from ISO text.
pub fn at(text: &str) -> Value {
    Value::Datetime(Datetime::parse_iso(text).expect("datetime"))
}

fn obj<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    Value::Object(data(pairs))
}

/// The reference's `ROUND_TRIP_VALUES`, plus floats whose text matters.
pub fn round_trip_values() -> Vec<Value> {
    vec![
        Value::Bool(true),
        Value::Bool(false),
        Value::Int(0),
        Value::Int(-1),
        Value::Float(1.5),
        Value::Float(0.0),
        Value::from(""),
        Value::from("caf\u{e9}"),
        Value::Null,
        Value::List(vec![]),
        obj([]),
        Value::List(vec![Value::Int(1), Value::List(vec![Value::Int(2)])]),
        obj([("nested", obj([("deep", Value::Bool(true))]))]),
        at("2026-01-01T00:00:00+00:00"),
        Value::Bytes(vec![0, 255]),
        obj([("$t", "bytes".into()), ("$v", "AA==".into())]),
        obj([(
            "a",
            Value::List(vec![
                at("2026-01-01T00:00:00+00:00"),
                Value::Bytes(vec![255]),
            ]),
        )]),
        Value::Float(1e16),
        Value::Float(1e-5),
        Value::Float(0.1),
        Value::Int(i64::MIN),
        Value::Int(i64::MAX),
        Value::from("\u{1F600} astral"),
    ]
}

/// Every value reads back as written, with its type, and matches `eq`.
pub async fn every_value_round_trips<B: Backend>(backend: &B) {
    for value in round_trip_values() {
        let (_db, s) = docs(backend).await;
        let written = s
            .put(
                "module",
                "records",
                "id",
                data([("value", value.clone())]),
                None,
            )
            .await
            .expect("put");
        let read = s.get("module", "records", "id").await.expect("get");
        assert_eq!(read, written, "{value:?}");
        assert_eq!(read.data["value"], value);
        assert!(read.updated_at >= read.created_at);
        assert_eq!(read.version, 1);
        let n = s
            .count("module", "records", vec![p("value", "eq", value.clone())])
            .await;
        assert_eq!(n, Ok(1), "{value:?}");
    }
}

/// `1.0000000000000001e18` equals the integer its text names, as JSONB does.
pub async fn decimal_numeric_equality_ranges_uniqueness_and_paging<B: Backend>(backend: &B) {
    for sign in [1i64, -1] {
        let (_db, s) = docs(backend).await;
        let float = Value::Float(sign as f64 * 1.0000000000000001e18);
        let decimal = Value::Int(sign * 1_000_000_000_000_000_100);
        let binary = Value::Int(sign * 1_000_000_000_000_000_128);
        s.ensure_collection(
            "module",
            CollectionSpec::new("records").field(FieldSpec::new("x", "float").indexed()),
        )
        .await
        .expect("ensure");
        for (id, v) in [
            ("float", &float),
            ("decimal", &decimal),
            ("binary", &binary),
        ] {
            s.put(
                "module",
                "records",
                id,
                data([("x", v.clone()), ("nested", Value::List(vec![v.clone()]))]),
                None,
            )
            .await
            .expect("put");
        }
        for v in [&float, &decimal] {
            let mut ids = find_ids(
                &s,
                "records",
                query(vec![p("x", "eq", v.clone())], None, 100, None),
            )
            .await;
            ids.sort();
            assert_eq!(ids, ["decimal", "float"]);
            let nested = Value::List(vec![v.clone()]);
            assert_eq!(
                s.count("module", "records", vec![p("nested", "eq", nested)])
                    .await,
                Ok(2)
            );
            assert_eq!(
                s.count(
                    "module",
                    "records",
                    vec![p("nested", "contains", v.clone())]
                )
                .await,
                Ok(2)
            );
        }
        assert_eq!(
            s.get("module", "records", "float").await.expect("get").data["x"],
            decimal
        );
        for direction in ["asc", "desc"] {
            let mut expected = if sign == 1 {
                vec!["decimal", "float", "binary"]
            } else {
                vec!["binary", "decimal", "float"]
            };
            if direction == "desc" {
                expected.reverse();
            }
            let order = OrderBy {
                field: "x".into(),
                direction: direction.into(),
            };
            assert_eq!(all_ids(&s, vec![], Some(order), 1).await, expected);
        }
        let op = if sign == 1 { "gt" } else { "lt" };
        assert_eq!(
            find_ids(
                &s,
                "records",
                query(vec![p("x", op, float.clone())], None, 100, None)
            )
            .await,
            ["binary"]
        );
        s.ensure_collection(
            "module",
            CollectionSpec::new("unique").field(FieldSpec::new("x", "float").unique()),
        )
        .await
        .expect("ensure unique");
        s.put(
            "module",
            "unique",
            "float",
            data([("x", float.clone())]),
            None,
        )
        .await
        .expect("float");
        s.put(
            "module",
            "unique",
            "binary",
            data([("x", binary.clone())]),
            None,
        )
        .await
        .expect("binary");
        let dup = s
            .put(
                "module",
                "unique",
                "decimal",
                data([("x", decimal.clone())]),
                None,
            )
            .await;
        assert!(
            matches!(dup, Err(DocumentError::UniqueViolation(_))),
            "{dup:?}"
        );
    }
}

/// Integers beyond 2^53 compare exactly against floats.
pub async fn numeric_range_preserves_large_integer_precision<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    for (id, v) in [("a", 1i64 << 53), ("b", (1 << 53) + 1), ("c", i64::MAX)] {
        s.put("module", "records", id, data([("x", Value::Int(v))]), None)
            .await
            .expect("put");
    }
    let where_ = vec![p("x", "gt", Value::Float(2f64.powi(53)))];
    let page = s
        .find(
            "module",
            "records",
            query(where_.clone(), Some(OrderBy::asc("x")), 1, None),
        )
        .await
        .expect("find");
    assert_eq!(page.items[0].id, "b");
    let page = s
        .find(
            "module",
            "records",
            query(where_, Some(OrderBy::asc("x")), 1, page.cursor),
        )
        .await
        .expect("find");
    assert_eq!(
        page.items.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["c"]
    );
}

/// The largest floats read back, write back, and page in order.
pub async fn large_finite_floats_remain_portable<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let values = [
        -1.797_693_134_862_315_7e308,
        -1e100,
        -1e20,
        1e20,
        1e100,
        1.797_693_134_862_315_7e308,
    ];
    for (i, x) in values.iter().enumerate() {
        let d = data([
            ("x", Value::Float(*x)),
            ("nested", Value::List(vec![Value::Float(*x)])),
        ]);
        s.put("module", "records", &i.to_string(), d.clone(), None)
            .await
            .expect("put");
        let stored = s
            .get("module", "records", &i.to_string())
            .await
            .expect("get");
        assert_eq!(stored.data, d);
        s.put(
            "module",
            "records",
            &i.to_string(),
            stored.data,
            Some(stored.version),
        )
        .await
        .expect("put back");
    }
    let expected: Vec<String> = (0..values.len()).map(|i| i.to_string()).collect();
    assert_eq!(
        all_ids(&s, vec![], Some(OrderBy::asc("x")), 1).await,
        expected
    );
}

/// Bytes order by their hex; `contains` matches nested values exactly.
pub async fn byte_sort_and_exact_nested_array_membership<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let member = || obj([("a", Value::List(vec![Value::Int(1), Value::Bool(true)]))]);
    for (id, b) in [("a", 255u8), ("b", 0), ("c", 1)] {
        let d = data([
            ("x", Value::Bytes(vec![b])),
            ("array", Value::List(vec![member()])),
        ]);
        s.put("module", "records", id, d, None).await.expect("put");
    }
    let probe = obj([("a", Value::List(vec![Value::Float(1.0), Value::Bool(true)]))]);
    assert_eq!(
        find_ids(
            &s,
            "records",
            query(
                vec![p("array", "contains", probe)],
                Some(OrderBy::asc("x")),
                10,
                None
            )
        )
        .await,
        ["b", "c", "a"]
    );
    let wrong = obj([("a", Value::List(vec![Value::Int(1), Value::Int(1)]))]);
    assert_eq!(
        s.count("module", "records", vec![p("array", "contains", wrong)])
            .await,
        Ok(0)
    );
}

/// The reference's predicate table.
pub async fn predicates<B: Backend>(backend: &B) {
    let cases: Vec<(Vec<abi_document_model::Predicate>, Vec<&str>)> = vec![
        (vec![p("x", "eq", Value::Null)], vec!["null"]),
        (
            vec![p("x", "ne", Value::Null)],
            vec!["array", "bool", "nine", "object", "ten", "text"],
        ),
        (vec![p("x", "exists", false)], vec!["missing"]),
        (vec![p("x", "eq", true)], vec!["bool"]),
        (vec![p("x", "gt", 9i64)], vec!["ten"]),
        (
            vec![p("x", "gte", 9i64), p("x", "lte", 10i64)],
            vec!["nine", "ten"],
        ),
        (vec![p("x", "lt", 10i64)], vec!["nine"]),
        (
            vec![p("x", "in", vec![Value::Int(9), Value::Null])],
            vec!["nine", "null"],
        ),
        (
            vec![p("x", "nin", vec![Value::Int(9), Value::Null])],
            vec!["array", "bool", "object", "ten", "text"],
        ),
        (vec![p("x", "in", Vec::<Value>::new())], vec![]),
        (vec![p("x", "contains", 9i64)], vec!["array"]),
        (
            vec![p("x", "contains", obj([("z", Value::Int(2))]))],
            vec![],
        ),
        (
            vec![p(
                "x",
                "eq",
                obj([("z", Value::Int(2)), ("a", Value::Int(1))]),
            )],
            vec!["object"],
        ),
        (
            vec![p("x", "exists", true)],
            vec!["array", "bool", "nine", "null", "object", "ten", "text"],
        ),
    ];
    let (_db, s) = docs(backend).await;
    let rows = [
        ("missing", data([])),
        ("null", data([("x", Value::Null)])),
        ("bool", data([("x", Value::Bool(true))])),
        ("nine", data([("x", Value::Int(9))])),
        ("ten", data([("x", Value::Int(10))])),
        ("text", data([("x", "10".into())])),
        (
            "array",
            data([(
                "x",
                Value::List(vec![
                    Value::Int(9),
                    obj([("z", Value::Int(2)), ("a", Value::Int(1))]),
                ]),
            )]),
        ),
        (
            "object",
            data([("x", obj([("a", Value::Int(1)), ("z", Value::Int(2))]))]),
        ),
    ];
    for (id, d) in rows {
        s.put("module", "records", id, d, None).await.expect("put");
    }
    for (where_, expected) in cases {
        let ids = find_ids(&s, "records", query(where_.clone(), None, 100, None)).await;
        assert_eq!(ids, expected, "{where_:?}");
        assert_eq!(
            s.count("module", "records", where_).await,
            Ok(expected.len() as i64)
        );
    }
}

/// Ranges compare within a kind only; ordering goes by kind, then value.
pub async fn mixed_type_ranges_and_ordering<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let rows = [
        ("a-null", Value::Null),
        ("b-false", Value::Bool(false)),
        ("c-true", Value::Bool(true)),
        ("d-neg", Value::Float(-2.5)),
        ("e-one", Value::Int(1)),
        ("f-str", "a".into()),
        ("g-str", "b".into()),
        ("h-date", at("2026-01-01T00:00:00+00:00")),
        ("i-bytes", Value::Bytes(vec![1])),
        ("j-list", Value::List(vec![])),
        ("k-obj", obj([])),
    ];
    for (id, v) in rows.iter() {
        s.put("module", "records", id, data([("x", v.clone())]), None)
            .await
            .expect("put");
    }
    let ids = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
    let expected: Vec<String> = rows.iter().map(|(id, _)| id.to_string()).collect();
    assert_eq!(
        all_ids(&s, vec![], Some(OrderBy::asc("x")), 3).await,
        expected
    );
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(
        all_ids(&s, vec![], Some(OrderBy::desc("x")), 4).await,
        reversed
    );
    let find = |w| find_ids(&s, "records", query(w, None, 100, None));
    assert_eq!(find(vec![p("x", "gt", 0i64)]).await, ids(vec!["e-one"]));
    assert_eq!(
        find(vec![p("x", "gte", false)]).await,
        ids(vec!["b-false", "c-true"])
    );
    assert_eq!(find(vec![p("x", "lt", "b")]).await, ids(vec!["f-str"]));
    assert_eq!(
        find(vec![p("x", "lte", at("2027-01-01T00:00:00+00:00"))]).await,
        ids(vec!["h-date"])
    );
    assert_eq!(
        find(vec![p("x", "gt", Value::Bytes(vec![0]))]).await,
        ids(vec!["i-bytes"])
    );
    assert_eq!(find(vec![p("x", "eq", 1.0)]).await, ids(vec!["e-one"]));
    // A JSON null is a value for `ne` (only `eq null` matches it).
    assert_eq!(find(vec![p("x", "ne", true)]).await.len(), 10);
}

/// Datetimes compare as instants, whatever offset they were given in.
pub async fn datetime_comparison_normalizes_offsets<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let second = at("2026-01-01T00:00:00+00:00");
    s.put(
        "module",
        "records",
        "a",
        data([("date", at("2026-01-01T01:00:00+02:00"))]),
        None,
    )
    .await
    .expect("a");
    s.put(
        "module",
        "records",
        "b",
        data([("date", second.clone())]),
        None,
    )
    .await
    .expect("b");
    assert_eq!(
        find_ids(
            &s,
            "records",
            query(
                vec![p("date", "lt", second)],
                Some(OrderBy::asc("date")),
                10,
                None
            )
        )
        .await,
        ["a"]
    );
}

/// Declared types refuse other values, and a declared type never changes.
pub async fn typed_fields_reject_incompatible_values_and_type_changes<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    s.ensure_collection(
        "module",
        CollectionSpec::new("records").field(FieldSpec::new("x", "int")),
    )
    .await
    .expect("ensure");
    for v in [Value::Bool(true), "1".into(), Value::Float(1.5)] {
        let e = s
            .put("module", "records", "id", data([("x", v)]), None)
            .await;
        assert_eq!(
            e,
            Err(DocumentError::invalid("Field 'x' must have type int"))
        );
    }
    let e = s
        .ensure_collection(
            "module",
            CollectionSpec::new("records").field(FieldSpec::new("x", "string")),
        )
        .await;
    assert_eq!(
        e,
        Err(DocumentError::invalid(
            "Cannot change declared type of 'x'; migrate the data explicitly"
        ))
    );
}
