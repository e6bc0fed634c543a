//! The codec against values the reference's own functions computed
//! (`document_codec.py`, `DocumentSQL.next_cursor`), generated once by
//! running them; each row is (input, the reference's output).

use abi_document_model::{Datetime, Document, OrderBy, Predicate, Value};
use abi_documents::codec::{
    decode, dumps, encode, fingerprint, next_cursor, parse, sqlite_json_key,
};

/// (f64 bits, dumps(f), dumps(encode(f)), sqlite_json_key, dumps(decode(stored)), decoded type).
const FLOATS: &[(u64, &str, &str, &str, &str, &str)] = &[
    (
        0x4341c37937e08000,
        "1e+16",
        "1e+16",
        "10000000000000000",
        "1e+16",
        "float",
    ),
    (
        0x3ee4f8b588e368f1,
        "1e-05",
        "1e-05",
        "1e-05",
        "1e-05",
        "float",
    ),
    (0x3fb999999999999a, "0.1", "0.1", "0.1", "0.1", "float"),
    (
        0x43b12210f47de981,
        "1.2345678901234568e+18",
        "1.2345678901234568e+18",
        "1234567890123456800",
        "1234567890123456800",
        "int",
    ),
    (0x8000000000000000, "-0.0", "0.0", "0", "0.0", "float"),
    (
        0x430c6bf526340000,
        "1000000000000000.0",
        "1000000000000000.0",
        "1000000000000000",
        "1000000000000000.0",
        "float",
    ),
    (
        0x437b69b4ba630f35,
        "1.2345678901234568e+17",
        "1.2345678901234568e+17",
        "123456789012345680",
        "1.2345678901234568e+17",
        "float",
    ),
    (
        0x3f1a36e2eb1c432d,
        "0.0001",
        "0.0001",
        "0.0001",
        "0.0001",
        "float",
    ),
    (0x1, "5e-324", "5e-324", "5e-324", "5e-324", "float"),
    (
        0x7fefffffffffffff,
        "1.7976931348623157e+308",
        "1.7976931348623157e+308",
        "179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "1.7976931348623157e+308",
        "float",
    ),
    (0x4004000000000000, "2.5", "2.5", "2.5", "2.5", "float"),
    (
        0xc480f0cf064dd592,
        "-1e+22",
        "-1e+22",
        "-10000000000000000000000",
        "-1e+22",
        "float",
    ),
    (
        0x3fd5555555555555,
        "0.3333333333333333",
        "0.3333333333333333",
        "0.3333333333333333",
        "0.3333333333333333",
        "float",
    ),
    (
        0x54b249ad2594c37d,
        "1e+100",
        "1e+100",
        "10000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "1e+100",
        "float",
    ),
    (
        0x4340000000000000,
        "9007199254740992.0",
        "9007199254740992.0",
        "9007199254740992",
        "9007199254740992.0",
        "float",
    ),
    (
        0x4059000000000000,
        "100.0",
        "100.0",
        "100",
        "100.0",
        "float",
    ),
    (
        0x43abc16d674ec801,
        "1.0000000000000001e+18",
        "1.0000000000000001e+18",
        "1000000000000000100",
        "1000000000000000100",
        "int",
    ),
    (
        0x444b1ae4d6e2ef50,
        "1e+21",
        "1e+21",
        "1000000000000000000000",
        "1e+21",
        "float",
    ),
    (
        0x3e8421f5f40d8376,
        "1.5e-07",
        "1.5e-07",
        "1.5e-07",
        "1.5e-07",
        "float",
    ),
    (
        0xc05edd2f1a9fbe77,
        "-123.456",
        "-123.456",
        "-123.456",
        "-123.456",
        "float",
    ),
];

/// (string, dumps(encode({s: [s]}))).
const STRINGS: &[(&str, &str)] = &[
    ("caf\u{e9}", "{\"caf\\u00e9\":[\"caf\\u00e9\"]}"),
    ("\u{1f600}", "{\"\\ud83d\\ude00\":[\"\\ud83d\\ude00\"]}"),
    (
        "a\u{22}b\u{5c}c\u{a}\u{9}\u{1}\u{7f}",
        "{\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\":[\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\"]}",
    ),
    ("\u{2028}", "{\"\\u2028\":[\"\\u2028\"]}"),
    ("$t", "{\"$$t\":[\"$t\"]}"),
    ("$$x", "{\"$$$x\":[\"$$x\"]}"),
];

/// (order field, direction) → (fingerprint, cursor) for one document and query.
const CURSORS: &[(&str, &str, &str, &str)] = &[
    (
        "x",
        "asc",
        "52988c8aee8ad5a28d903606582d43c13e62d44a4920ceb0a8c3da258a44ff05",
        "eyJrZXkiOlsyLDEuNWUrMjAsIiIsImRcdTAwZTkiXSwicSI6IjUyOTg4YzhhZWU4YWQ1YTI4ZDkwMzYwNjU4MmQ0M2MxM2U2MmQ0NGE0OTIwY2ViMGE4YzNkYTI1OGE0NGZmMDUiLCJ2IjoxfQ==",
    ),
    (
        "when",
        "desc",
        "e135b61000b88f016d9b71f3d2ff26020830ec6d2ec082d0a7496ed82f303fde",
        "eyJrZXkiOls0LDAsIjIwMjUtMTItMzFUMjM6MDA6MDAuMDAwMDAwKzAwOjAwIiwiZFx1MDBlOSJdLCJxIjoiZTEzNWI2MTAwMGI4OGYwMTZkOWI3MWYzZDJmZjI2MDIwODMwZWM2ZDJlYzA4MmQwYTc0OTZlZDgyZjMwM2ZkZSIsInYiOjF9",
    ),
    (
        "b",
        "asc",
        "28a9b1d5421a2a5e0fbdd27b9b6440728f9431a55ae517d324b3c2d0a4559452",
        "eyJrZXkiOls1LDAsIjAwZmYiLCJkXHUwMGU5Il0sInEiOiIyOGE5YjFkNTQyMWEyYTVlMGZiZGQyN2I5YjY0NDA3MjhmOTQzMWE1NWFlNTE3ZDMyNGIzYzJkMGE0NTU5NDUyIiwidiI6MX0=",
    ),
    (
        "",
        "",
        "adb0d0cbdef9b47defab5b62511f471951121bca7875455c62993df705be4e36",
        "eyJrZXkiOlsiZFx1MDBlOSJdLCJxIjoiYWRiMGQwY2JkZWY5YjQ3ZGVmYWI1YjYyNTExZjQ3MTk1MTEyMWJjYTc4NzU0NTVjNjI5OTNkZjcwNWJlNGUzNiIsInYiOjF9",
    ),
];

#[test]
fn floats_print_store_and_read_back_as_the_reference() {
    for &(bits, repr, stored, key, decoded, kind) in FLOATS {
        let x = f64::from_bits(bits);
        assert_eq!(
            dumps(&abi_documents::codec::Json::Float(x)),
            repr,
            "repr of {x:e}"
        );
        let json = encode(&Value::Float(x));
        assert_eq!(dumps(&json), stored, "stored {x:e}");
        assert_eq!(
            sqlite_json_key(Some(stored)).expect("key").as_deref(),
            Some(key),
            "key {x:e}"
        );
        let back = decode(parse(stored).expect("parse")).expect("decode");
        let expected_kind = match back {
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            _ => "other",
        };
        assert_eq!(expected_kind, kind, "decoded type of {x:e}");
        assert_eq!(dumps(&encode(&back)), decoded, "decoded {x:e}");
    }
}

#[test]
fn strings_and_keys_escape_as_the_reference() {
    for &(s, stored) in STRINGS {
        let value = Value::Object(
            [(s.to_owned(), Value::List(vec![Value::from(s)]))]
                .into_iter()
                .collect(),
        );
        assert_eq!(dumps(&encode(&value)), stored);
        assert_eq!(
            decode(parse(stored).expect("parse")).expect("decode"),
            value
        );
    }
}

#[test]
fn cursors_are_byte_identical_to_the_reference() {
    let at = |s: &str| Datetime::parse_iso(s).expect("datetime");
    let doc = Document {
        id: "d\u{e9}".to_owned(),
        data: [
            ("x".to_owned(), Value::Float(1.5e20)),
            (
                "when".to_owned(),
                Value::Datetime(at("2026-01-01T01:00:00+02:00")),
            ),
            ("b".to_owned(), Value::Bytes(vec![0, 255])),
        ]
        .into_iter()
        .collect(),
        created_at: at("2026-01-01T00:00:00+00:00"),
        updated_at: at("2026-01-01T00:00:00+00:00"),
        version: 1,
    };
    let where_ = vec![
        Predicate::new("x", "gt", 1.0),
        Predicate::new("b", "eq", Value::Bytes(vec![1])),
        Predicate::new(
            "$k",
            "eq",
            Value::Object(
                [(
                    "$t".to_owned(),
                    Value::Datetime(at("2026-01-01T00:00:00+00:00")),
                )]
                .into_iter()
                .collect(),
            ),
        ),
    ];
    for &(field, direction, expected_fp, expected_cursor) in CURSORS {
        let order = (!field.is_empty()).then(|| OrderBy {
            field: field.to_owned(),
            direction: direction.to_owned(),
        });
        let fp = fingerprint("ns", "coll", &where_, order.as_ref());
        assert_eq!(fp, expected_fp, "fingerprint {field}");
        assert_eq!(
            next_cursor(&fp, order.as_ref(), &doc),
            expected_cursor,
            "cursor {field}"
        );
    }
}

/// A cursor with a duplicate JSON key reads as the reference reads it:
/// Python's `json.loads` keeps the last value, and so does ours.
#[test]
fn a_cursor_with_a_duplicate_key_keeps_the_last_value() {
    use base64::Engine as _;
    let fp = fingerprint("ns", "coll", &[], None);
    let encode = |json: String| base64::engine::general_purpose::URL_SAFE.encode(json);
    let plain = encode(format!(r#"{{"key":["d"],"q":"{fp}","v":1}}"#));
    let read = abi_documents::codec::read_cursor(&plain, &fp, false).expect("a cursor");
    assert_eq!(read.id, "d");
    let last_wins = encode(format!(
        r#"{{"key":["x"],"q":"{fp}","v":2,"v":1,"key":["d"]}}"#
    ));
    let read = abi_documents::codec::read_cursor(&last_wins, &fp, false).expect("the last value");
    assert_eq!(read.id, "d");
    let last_bad = encode(format!(r#"{{"key":["d"],"q":"{fp}","v":1,"v":2}}"#));
    let refused = abi_documents::codec::read_cursor(&last_bad, &fp, false).unwrap_err();
    assert_eq!(refused.to_string(), abi_documents::codec::INVALID_CURSOR);
}
