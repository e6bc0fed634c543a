//! Keys the SQL compares: equality keys, numeric text, sort parts, and the
//! bodies of the custom SQLite functions.

use std::collections::BTreeMap;
use std::rc::Rc;

use abi_document_model::Value;
use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use super::storage::encode;
use abi_pyjson::dumps;
use abi_pyjson::{self as json, Json};
use abi_pyjson::{exact_integer_text, python_repr, repr_integer_text};

/// The rank of a value's kind in the portable order: nulls first, then
/// booleans, numbers, strings, datetimes, bytes, arrays, objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(i64)]
pub enum ValueKind {
    /// `null` (and a missing field).
    Null = 0,
    /// `true`, `false`.
    Bool = 1,
    /// Integers and floats, compared exactly.
    Number = 2,
    /// Strings, by code point.
    String = 3,
    /// Datetimes, by their UTC text.
    Datetime = 4,
    /// Bytes, by their hex text.
    Bytes = 5,
    /// Arrays (all tie).
    Array = 6,
    /// Objects (all tie).
    Object = 7,
}

/// Python's `base64.b64decode(text, validate=True)`: the standard alphabet
/// only, `=` padding only at the end and complete, stray low bits of the
/// last character ignored.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    LENIENT.decode(text).ok()
}

/// A value's sort parts `(kind, number, text)`, as the SQL's sort expressions
/// compute them for a stored value; cursors carry them.
pub fn value_sort_parts(value: Option<&Value>) -> (ValueKind, Json, String) {
    match value {
        None | Some(Value::Null) => (ValueKind::Null, Json::Int(0), String::new()),
        Some(Value::Bool(b)) => (ValueKind::Bool, Json::Int(i64::from(*b)), String::new()),
        Some(Value::Int(n)) => (ValueKind::Number, Json::Int(*n), String::new()),
        Some(Value::Float(x)) => (ValueKind::Number, Json::Float(*x), String::new()),
        Some(Value::String(s)) => (ValueKind::String, Json::Int(0), s.clone()),
        Some(Value::Datetime(at)) => (ValueKind::Datetime, Json::Int(0), at.isoformat_micros()),
        Some(Value::Bytes(bytes)) => (ValueKind::Bytes, Json::Int(0), hex::encode(bytes)),
        Some(Value::List(_)) => (ValueKind::Array, Json::Int(0), String::new()),
        Some(Value::Object(_)) => (ValueKind::Object, Json::Int(0), String::new()),
    }
}

/// Python's `str()` of a number parsed from JSON: integers as digits, floats
/// as `repr`.
pub fn number_text(value: &Json) -> Option<String> {
    match value {
        Json::Int(n) => Some(n.to_string()),
        Json::BigInt(text) => Some(text.clone()),
        Json::Float(x) => Some(python_repr(*x)),
        _ => None,
    }
}

/// The equality key of a stored value: an integral float becomes the
/// integer its decimal text names (so `1.0` equals `1`, as JSONB compares),
/// recursively; booleans stay booleans.
pub fn equality_key(value: &Json) -> Json {
    match value {
        Json::Float(x) if x.is_finite() && x.fract() == 0.0 => integer_json(repr_integer_text(*x)),
        Json::Array(items) => Json::Array(items.iter().map(equality_key).collect()),
        Json::Object(members) => Json::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), equality_key(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn integer_json(text: String) -> Json {
    match text.parse::<i64>() {
        Ok(n) => Json::Int(n),
        Err(_) => Json::BigInt(text),
    }
}

/// A stored document's top-level members: its text, where each value lies,
/// and the answers given for it so far (a put asks for each indexed field
/// once per index expression: several times).
struct Members {
    text: String,
    members: Vec<abi_pyjson::Member>,
    /// Shared with SQLite's calls: an answer given again is not copied.
    answers: Vec<(String, Option<Rc<str>>)>,
}

/// The documents [`sqlite_field`] knows the members of on this thread
/// (SQLite calls it on the thread running the statement).
struct Known {
    /// The one being written, told by [`expect_written`]: an update's
    /// index expressions read the old row and the new one, and the old
    /// must not push the new out.
    written: Option<Members>,
    /// The one read last.
    last: Option<Members>,
}

thread_local! {
    /// What [`sqlite_field`] knows on this thread.
    static KNOWN_DOCUMENTS: std::cell::RefCell<Known> =
        const { std::cell::RefCell::new(Known { written: None, last: None }) };
}

/// Tells [`sqlite_field`] on this thread that the statements about to run
/// write `text`, whose top-level members are `members` (as
/// [`crate::codec::stored_text_and_members`] noted them), so the index
/// expressions over the new row need not parse it.
pub fn expect_written(text: &str, members: Vec<abi_pyjson::Member>) {
    KNOWN_DOCUMENTS.with(|known| {
        let mut known = known.borrow_mut();
        // The text's buffer is reused from one put to the next.
        let mut reused = known.written.take().map(|m| m.text).unwrap_or_default();
        reused.clear();
        reused.push_str(text);
        known.written = Some(Members {
            text: reused,
            members,
            answers: Vec::new(),
        });
    });
}

/// What `document_field(data, key)` returns: the canonical text of the
/// stored document's top-level `key`, or `None` when it is missing.
///
/// The members of the document this thread read last, and of the one it
/// writes, are kept ([`KNOWN_DOCUMENTS`]).
///
/// # Errors
///
/// When `raw` is not a JSON object.
pub fn sqlite_field(raw: &str, key: &str) -> Result<Option<Rc<str>>, String> {
    sqlite_field_bytes(raw.as_bytes(), key)
}

/// [`sqlite_field`] of the bytes SQLite hands over: the document this
/// thread read last is recognised by its bytes, so its UTF-8 is checked
/// once rather than once per index expression, and a member asked for
/// again is answered from [`KNOWN_DOCUMENTS`] without parsing it again.
///
/// # Errors
///
/// When `raw` is not UTF-8 or not a JSON object.
pub fn sqlite_field_bytes(raw: &[u8], key: &str) -> Result<Option<Rc<str>>, String> {
    let utf8 = |raw| std::str::from_utf8(raw).map_err(|e| format!("document_field: {e}"));
    // A put evaluates this several times per indexed field (each index
    // expression), a find once per field per row, each time on the same
    // document: its members are found once and kept for the next call, and
    // only the member asked for is parsed, once.
    let found = KNOWN_DOCUMENTS.with(|known| -> Result<Option<Option<Rc<str>>>, String> {
        let Known { written, last } = &mut *known.borrow_mut();
        let is = |members: &Option<Members>| {
            members
                .as_ref()
                .is_some_and(|known| known.text.as_bytes() == raw)
        };
        let slot = if is(written) {
            written
        } else {
            if !is(last) {
                let text = utf8(raw)?;
                *last = abi_pyjson::object_members(text)
                    .ok()
                    .map(|members| Members {
                        text: text.to_owned(),
                        members,
                        answers: Vec::new(),
                    });
            }
            last
        };
        let Some(known) = slot.as_mut() else {
            return Ok(None);
        };
        if let Some((_, answer)) = known.answers.iter().find(|(k, _)| k == key) {
            return Ok(Some(answer.clone()));
        }
        let text = &known.text;
        let answer = match known.members.iter().rev().find(|m| m.has_key(text, key)) {
            None => None,
            Some(member) => Some(Rc::from(dumps(
                &json::parse(&text[member.value.clone()])
                    .map_err(|e| format!("document_field: {e}"))?,
            ))),
        };
        known.answers.push((key.to_owned(), answer.clone()));
        Ok(Some(answer))
    })?;
    if let Some(found) = found {
        return Ok(found);
    }
    // Not a JSON object: the full parse says why, as it always did.
    match json::parse(utf8(raw)?) {
        Ok(Json::Object(mut members)) => Ok(members.remove(key).map(|v| Rc::from(dumps(&v)))),
        Ok(_) => Err("document_field: stored data is not an object".to_owned()),
        Err(e) => Err(format!("document_field: {e}")),
    }
}

/// What `document_json_key_v2(raw)` returns: the canonical equality key of
/// a JSON text, `None` for SQL NULL and JSON `null`.
///
/// # Errors
///
/// When `raw` is not JSON.
pub fn sqlite_json_key(raw: Option<&str>) -> Result<Option<String>, String> {
    match raw {
        None | Some("null") => Ok(None),
        Some(raw) => json::parse(raw)
            .map(|v| Some(dumps(&equality_key(&v))))
            .map_err(|e| format!("document_json_key_v2: {e}")),
    }
}

/// The [`sqlite_json_key`] of a stored value, as bound for an equality
/// match (`None` for null).
pub fn value_json_key(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        other => Some(dumps(&equality_key(&encode(other)))),
    }
}

/// What `document_json_key(raw)` returns, the equality key of older
/// releases (integral floats became their binary integer value), kept so
/// indexes built with it work until `ensure_collection` rebuilds them.
///
/// # Errors
///
/// When `raw` is not JSON.
pub fn sqlite_legacy_json_key(raw: Option<&str>) -> Result<Option<String>, String> {
    fn legacy(value: Json) -> Json {
        match value {
            Json::Float(x) if x.is_finite() && x.fract() == 0.0 => {
                integer_json(exact_integer_text(x))
            }
            Json::Array(items) => Json::Array(items.into_iter().map(legacy).collect()),
            Json::Object(members) => Json::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (k, legacy(v)))
                    .collect::<BTreeMap<_, _>>(),
            ),
            other => other,
        }
    }
    match raw {
        None | Some("null") => Ok(None),
        Some(raw) => json::parse(raw)
            .map(|v| Some(dumps(&legacy(v))))
            .map_err(|e| format!("document_json_key: {e}")),
    }
}

/// What `document_numeric_text(raw)` returns: the number's decimal text as
/// written (no rounding through a SQLite REAL).
///
/// # Errors
///
/// When `raw` is not a JSON number.
pub fn sqlite_numeric_text(raw: &str) -> Result<String, String> {
    json::parse(raw)
        .ok()
        .as_ref()
        .and_then(number_text)
        .ok_or_else(|| "document_numeric_text: not a JSON number".to_owned())
}

/// What `document_bytes_key(b64)` returns: the hex text of base64 bytes, ``
/// for NULL or empty.
///
/// # Errors
///
/// When `encoded` is not base64.
pub fn sqlite_bytes_key(encoded: Option<&str>) -> Result<String, String> {
    match encoded {
        None | Some("") => Ok(String::new()),
        Some(text) => base64_decode(text)
            .map(hex::encode)
            .ok_or_else(|| "document_bytes_key: invalid base64".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_written_document_is_answered_from_its_noted_members_beside_the_old_row() {
        let (new, old) = (r#"{"a":1,"b":"x"}"#, r#"{"a":2}"#);
        let members = abi_pyjson::object_members(new).unwrap();
        expect_written(new, members.clone());
        // An update's index expressions: the old row, then the new, twice.
        for _ in 0..2 {
            assert_eq!(sqlite_field(old, "a").unwrap().as_deref(), Some("2"));
            assert_eq!(sqlite_field(new, "a").unwrap().as_deref(), Some("1"));
            assert_eq!(sqlite_field(new, "b").unwrap().as_deref(), Some("\"x\""));
            assert_eq!(sqlite_field(new, "c").unwrap(), None);
        }
        // The noted members are what answers: noted wrong, answered wrong.
        let mut wrong = members;
        wrong[0].value = wrong[1].value.clone();
        expect_written(new, wrong);
        assert_eq!(sqlite_field(old, "a").unwrap().as_deref(), Some("2"));
        assert_eq!(sqlite_field(new, "a").unwrap().as_deref(), Some("\"x\""));
    }

    #[test]
    fn a_field_reads_as_the_whole_parse_reads_it() {
        let stored = r#"{"status": "RUNNING", "n": 1.5, "nested": {"status": "x"}, "$$t": [1, 2]}"#;
        let whole = |key: &str| match json::parse(stored) {
            Ok(Json::Object(mut members)) => members.remove(key).map(|v| Rc::from(dumps(&v))),
            _ => None,
        };
        let other = r#"{"status": "FAILED"}"#;
        for key in ["status", "n", "nested", "$$t", "missing"] {
            assert_eq!(sqlite_field(stored, key), Ok(whole(key)), "{key}");
            // The document kept is the one asked about, never the last one.
            let expected = (key == "status").then(|| Rc::from("\"FAILED\""));
            assert_eq!(sqlite_field(other, key), Ok(expected), "{key} of another");
        }
        assert_eq!(sqlite_field(stored, "status"), Ok(whole("status")));
        assert_eq!(
            sqlite_field("[1]", "a"),
            Err("document_field: stored data is not an object".to_owned())
        );
        assert!(
            sqlite_field("{\"a\": ", "a")
                .is_err_and(|e| e.starts_with("document_field: invalid JSON"))
        );
    }

    /// A member asked for again, of the same document, gets the same
    /// answer (kept, not parsed again); another document's bytes are read
    /// afresh; bytes that are not UTF-8 are refused.
    #[test]
    fn repeated_questions_of_one_document_are_answered_alike() {
        let stored = br#"{"status": "RUNNING", "n": 2, "n": 3}"#;
        for _ in 0..3 {
            assert_eq!(
                sqlite_field_bytes(stored, "status"),
                Ok(Some(Rc::from("\"RUNNING\"")))
            );
            assert_eq!(sqlite_field_bytes(stored, "n"), Ok(Some(Rc::from("3"))));
            assert_eq!(sqlite_field_bytes(stored, "gone"), Ok(None));
        }
        let other = br#"{"status": "SUCCEEDED"}"#;
        assert_eq!(
            sqlite_field_bytes(other, "status"),
            Ok(Some(Rc::from("\"SUCCEEDED\"")))
        );
        assert!(
            sqlite_field_bytes(b"{\"a\": \"\xff\"}", "a")
                .is_err_and(|e| e.starts_with("document_field: invalid utf-8"))
        );
    }
}
