//! Documents as the reference stores them: JSON with tagged datetimes and
//! bytes, and `$`-prefixed keys escaped so no user object looks like a tag.

use std::collections::BTreeMap;

use abi_document_model::{Data, Datetime, DocumentError, Value};
use base64::Engine;

use abi_pyjson::Json;
use abi_pyjson::repr_integer_text;

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
pub fn decode(value: &Json) -> Result<Value, DocumentError> {
    Ok(match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Int(n) => Value::Int(*n),
        Json::BigInt(text) => Value::Float(text.parse().map_err(|_| malformed("number"))?),
        Json::Float(x) => decode_float(*x),
        Json::Str(s) => Value::String(s.clone()),
        Json::Array(items) => Value::List(items.iter().map(decode).collect::<Result<_, _>>()?),
        Json::Object(members) => match members.get(TAG) {
            Some(Json::Str(tag)) if tag == "datetime" => match members.get(PAYLOAD) {
                Some(Json::Str(text)) => {
                    Value::Datetime(Datetime::parse_iso(text).map_err(|_| malformed("datetime"))?)
                }
                _ => return Err(malformed("datetime")),
            },
            Some(Json::Str(tag)) if tag == "bytes" => match members.get(PAYLOAD) {
                Some(Json::Str(text)) => Value::Bytes(
                    super::keys::base64_decode(text).ok_or_else(|| malformed("bytes value"))?,
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
pub fn decode_data(value: &Json) -> Result<Data, DocumentError> {
    match decode(value)? {
        Value::Object(data) => Ok(data),
        _ => Err(malformed("document")),
    }
}

fn decode_members(members: &BTreeMap<String, Json>) -> Result<Data, DocumentError> {
    members
        .iter()
        .map(|(key, item)| {
            let key = if key.starts_with("$$") {
                &key[1..]
            } else {
                key.as_str()
            };
            Ok((key.to_owned(), decode(item)?))
        })
        .collect()
}

fn decode_float(x: f64) -> Value {
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
