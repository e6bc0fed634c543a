//! Documents as the reference stores them: JSON with tagged datetimes and
//! bytes, and `$`-prefixed keys escaped so no user object looks like a tag.

use std::collections::BTreeMap;

use abi_document_model::{Data, Datetime, DocumentError, Value};
use base64::Engine;

use std::fmt::Write as _;

use abi_pyjson::repr_integer_text;
use abi_pyjson::{Json, Member, python_repr, write_json_string};

/// The tag key of an encoded datetime or bytes value.
pub const TAG: &str = "$t";
/// The payload key of an encoded datetime or bytes value.
pub const PAYLOAD: &str = "$v";

/// A field name as stored: a leading `$` gets another one, so `$t` can only
/// ever be a tag.
pub fn storage_key(key: &str) -> String {
    if key.starts_with('$') {
        format!("${key}")
    } else {
        key.to_owned()
    }
}

/// A value as stored: datetimes as `{"$t":"datetime","$v":<isoformat with
/// microseconds, UTC>}`, bytes as `{"$t":"bytes","$v":<base64>}`, `-0.0` as
/// `0.0` (PostgreSQL's `numeric` has no negative zero), keys escaped.
pub fn encode(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(n) => Json::Int(*n),
        Value::Float(x) if *x == 0.0 => Json::Float(0.0),
        Value::Float(x) => Json::Float(*x),
        Value::String(s) => Json::Str(s.clone()),
        Value::Bytes(bytes) => tagged(
            "bytes",
            base64::engine::general_purpose::STANDARD.encode(bytes),
        ),
        Value::Datetime(at) => tagged("datetime", at.isoformat_micros()),
        Value::List(items) => Json::Array(items.iter().map(encode).collect()),
        Value::Object(data) => encode_data(data),
    }
}

/// [`encode`] of a document's data.
pub fn encode_data(data: &Data) -> Json {
    Json::Object(
        data.iter()
            .map(|(key, item)| (storage_key(key), encode(item)))
            .collect(),
    )
}

/// `dumps(&encode_data(data))`, the stored JSON text of a document's data,
/// written straight from the values: no [`Json`] tree in between, whose
/// strings and maps a put would copy and then drop.
pub fn stored_text(data: &Data) -> String {
    let mut out = String::with_capacity(STORED_TEXT_CAPACITY);
    write_data(&mut out, data);
    out
}

/// [`stored_text`], and where each top-level member lies in it: what
/// [`abi_pyjson::object_members`] would find in the text, noted while it is
/// written rather than parsed again (the index expressions of a put read
/// the new row's members).
pub fn stored_text_and_members(data: &Data) -> (String, Vec<Member>) {
    let mut out = String::with_capacity(STORED_TEXT_CAPACITY);
    let mut members = Vec::with_capacity(data.len());
    write_members(&mut out, data, Some(&mut members));
    (out, members)
}

/// `dumps(&encode(value))`: [`stored_text`] of one value.
pub fn stored_value_text(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Bytes a stored text starts with room for: a run record's fits.
const STORED_TEXT_CAPACITY: usize = 256;

fn write_data(out: &mut String, data: &Data) {
    write_members(out, data, None);
}

/// [`write_data`], noting each member's place in `noted` when given.
fn write_members(out: &mut String, data: &Data, mut noted: Option<&mut Vec<Member>>) {
    out.push('{');
    // Escaping a key keeps its place: keys starting with `$` all gain one,
    // which leaves their order among themselves and against the others as
    // it was, so `data`'s order is the sorted order of the stored keys.
    for (i, (key, item)) in data.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let key_start = out.len() + 1;
        if key.starts_with('$') {
            write_json_string(out, &format!("${key}"));
        } else {
            write_json_string(out, key);
        }
        let key_end = out.len() - 1;
        out.push(':');
        let value_start = out.len();
        write_value(out, item);
        if let Some(noted) = noted.as_deref_mut() {
            noted.push(Member {
                key: key_start..key_end,
                escaped: out.as_bytes()[key_start..key_end].contains(&b'\\'),
                value: value_start..out.len(),
            });
        }
    }
    out.push('}');
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(x) if *x == 0.0 => out.push_str(&python_repr(0.0)),
        Value::Float(x) => out.push_str(&python_repr(*x)),
        Value::String(s) => write_json_string(out, s),
        Value::Bytes(bytes) => write_tagged(
            out,
            "bytes",
            &base64::engine::general_purpose::STANDARD.encode(bytes),
        ),
        Value::Datetime(at) => write_tagged(out, "datetime", &at.isoformat_micros()),
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(data) => write_data(out, data),
    }
}

/// `{"$t":<tag>,"$v":<payload>}` ([`TAG`] sorts before [`PAYLOAD`]).
fn write_tagged(out: &mut String, tag: &str, payload: &str) {
    out.push('{');
    write_json_string(out, TAG);
    out.push(':');
    write_json_string(out, tag);
    out.push(',');
    write_json_string(out, PAYLOAD);
    out.push(':');
    write_json_string(out, payload);
    out.push('}');
}

fn tagged(tag: &str, payload: String) -> Json {
    Json::Object(BTreeMap::from([
        (TAG.to_owned(), Json::Str(tag.to_owned())),
        (PAYLOAD.to_owned(), Json::Str(payload)),
    ]))
}

/// Why stored JSON is not a document value.
fn malformed(what: &str) -> DocumentError {
    DocumentError::Storage(format!("Stored document holds a malformed {what}"))
}

/// A stored value read back: the inverse of [`encode`], with the
/// reference's two number quirks.
///
/// * An integer beyond 64 bits (PostgreSQL's JSONB prints exponent floats as
///   integers) becomes a float again.
/// * An integral float whose shortest decimal text names a different
///   integer than its binary value (`1.0000000000000001e18`) becomes that
///   integer, when it fits in 64 bits.
///
/// # Errors
///
/// [`DocumentError::Storage`] for a tag with a bad payload.
pub fn decode(value: Json) -> Result<Value, DocumentError> {
    Ok(match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(b),
        Json::Int(n) => Value::Int(n),
        Json::BigInt(text) => Value::Float(text.parse().map_err(|_| malformed("number"))?),
        Json::Float(x) => decode_float(x),
        // Strings and keys move from the parsed tree into the value.
        Json::Str(s) => Value::String(s),
        Json::Array(items) => Value::List(items.into_iter().map(decode).collect::<Result<_, _>>()?),
        Json::Object(mut members) => match members.get(TAG) {
            Some(Json::Str(tag)) if tag == "datetime" => match members.get(PAYLOAD) {
                Some(Json::Str(text)) => {
                    Value::Datetime(Datetime::parse_iso(text).map_err(|_| malformed("datetime"))?)
                }
                _ => return Err(malformed("datetime")),
            },
            Some(Json::Str(tag)) if tag == "bytes" => match members.remove(PAYLOAD) {
                Some(Json::Str(text)) => Value::Bytes(
                    super::keys::base64_decode(&text).ok_or_else(|| malformed("bytes value"))?,
                ),
                _ => return Err(malformed("bytes value")),
            },
            _ => Value::Object(decode_members(members)?),
        },
    })
}

/// [`decode`] of a stored document's top-level object.
///
/// # Errors
///
/// [`DocumentError::Storage`] when the stored JSON is not an object or holds
/// a malformed tag.
pub fn decode_data(value: Json) -> Result<Data, DocumentError> {
    match decode(value)? {
        Value::Object(data) => Ok(data),
        _ => Err(malformed("document")),
    }
}

fn decode_members(members: BTreeMap<String, Json>) -> Result<Data, DocumentError> {
    members
        .into_iter()
        .map(|(mut key, item)| {
            if key.starts_with("$$") {
                key.remove(0);
            }
            Ok((key, decode(item)?))
        })
        .collect()
}

/// `data` as it reads back once stored, without the JSON in between: what
/// [`decode_data`] gives for [`encode_data`] of it. Strings, bytes,
/// datetimes (microseconds, UTC) and keys go through unchanged; only floats
/// move (`-0.0` is stored as `0.0`, and the integral-float quirk of
/// [`decode`]).
pub fn as_stored(mut data: Data) -> Data {
    // In place: only floats change, so the map is not rebuilt.
    data.values_mut().for_each(make_stored);
    data
}

fn make_stored(value: &mut Value) {
    match value {
        // A float pattern compares with `==`: `-0.0` matches too.
        Value::Float(0.0) => *value = Value::Float(0.0),
        Value::Float(x) => *value = decode_float(*x),
        Value::List(items) => items.iter_mut().for_each(make_stored),
        Value::Object(data) => data.values_mut().for_each(make_stored),
        _ => {}
    }
}

pub(crate) fn decode_float(x: f64) -> Value {
    // `integer != value` in Python compares exactly; an integral f64 below
    // 2^127 converts to i128 exactly.
    if x.is_finite()
        && x.fract() == 0.0
        && let Ok(integer) = repr_integer_text(x).parse::<i64>()
        && i128::from(integer) != x as i128
    {
        return Value::Int(integer);
    }
    Value::Float(x)
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::expect_used)]

    use super::*;

    /// Values of every kind, with escaped and unusual keys, floats the
    /// store rewrites and nesting.
    pub(crate) fn sample_values() -> Vec<Value> {
        let at = Datetime::from_unix_micros(1_700_000_000_123_456).expect("in range");
        let nested = Data::from([
            ("$t".to_owned(), Value::from("datetime")),
            ("$$v".to_owned(), Value::Float(-0.0)),
            ("big".to_owned(), Value::Float(1.0000000000000001e18)),
            ("#".to_owned(), Value::Int(1)),
            ("%".to_owned(), Value::Int(2)),
            ("".to_owned(), Value::Null),
            ("é".to_owned(), Value::Bool(false)),
        ]);
        vec![
            Value::Null,
            Value::Bool(true),
            Value::Int(i64::MIN),
            Value::Float(-0.0),
            Value::Float(0.1),
            Value::Float(1e300),
            Value::Float(1.0000000000000001e18),
            Value::Float(3.0),
            Value::String("é\u{1F600}\"\n$t".to_owned()),
            Value::Bytes(vec![0, 255, 10]),
            Value::Datetime(at),
            Value::List(vec![Value::Float(-0.0), Value::Object(nested.clone())]),
            Value::List(Vec::new()),
            Value::Object(Data::new()),
            Value::Object(nested),
        ]
    }

    /// The text written straight from the values is the text of the JSON
    /// tree, for every kind of value, escaped keys and nesting included.
    #[test]
    fn stored_text_is_dumps_of_encode() {
        for (n, value) in sample_values().into_iter().enumerate() {
            assert_eq!(
                stored_value_text(&value),
                abi_pyjson::dumps(&encode(&value)),
                "value {n}"
            );
            let data = Data::from([
                (format!("k{n}"), value.clone()),
                ("$x".to_owned(), value.clone()),
                ("$".to_owned(), value.clone()),
                ("#".to_owned(), value),
            ]);
            assert_eq!(
                stored_text(&data),
                abi_pyjson::dumps(&encode_data(&data)),
                "row {n}"
            );
        }
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn members_noted_while_writing_are_the_ones_a_parse_finds() {
        let values = sample_values();
        let mut data = Data::new();
        for (n, value) in values.iter().enumerate() {
            // Keys escaped in JSON, keys gaining a `$`, plain keys.
            for key in [format!("k{n}"), format!("$k{n}"), format!("é\"\\{n}")] {
                data.insert(key, value.clone());
            }
        }
        for data in [Data::new(), data] {
            let (text, members) = stored_text_and_members(&data);
            assert_eq!(text, stored_text(&data));
            assert_eq!(
                members,
                abi_pyjson::object_members(&text).unwrap(),
                "{text}"
            );
        }
    }

    #[test]
    fn as_stored_is_the_json_round_trip() {
        for (n, value) in sample_values().into_iter().enumerate() {
            let data = Data::from([(format!("k{n}"), value.clone()), ("$x".to_owned(), value)]);
            let text = abi_pyjson::dumps_default(&encode_data(&data));
            let read_back =
                decode_data(abi_pyjson::parse(&text).expect("valid JSON")).expect("decodes");
            assert_eq!(as_stored(data), read_back, "row {n}: {text}");
        }
    }
}
