//! JSON between its three forms here: `serde_json` (what handlers see),
//! [`abi_pyjson::Json`] (Python's text, byte for byte) and document
//! [`Value`]s (what run records hold).

use abi_document_model::{Data, Value};
use abi_pyjson::Json;

/// `value` with Python's number model, for `json.dumps`-exact text.
pub fn to_py(value: &serde_json::Value) -> Json {
    match value {
        serde_json::Value::Null => Json::Null,
        serde_json::Value::Bool(b) => Json::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Json::Int(i),
            (None, Some(u), _) => Json::BigInt(u.to_string()),
            (_, _, Some(f)) => Json::Float(f),
            _ => Json::Null,
        },
        serde_json::Value::String(s) => Json::Str(s.clone()),
        serde_json::Value::Array(items) => Json::Array(items.iter().map(to_py).collect()),
        serde_json::Value::Object(map) => {
            Json::Object(map.iter().map(|(k, v)| (k.clone(), to_py(v))).collect())
        }
    }
}

/// `value` as a document value (integers as integers, as Python stores them).
pub fn to_doc(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(f)) => Value::Float(f),
            _ => Value::Null,
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => Value::List(items.iter().map(to_doc).collect()),
        serde_json::Value::Object(map) => Value::Object(to_data(map)),
    }
}

/// An object as document data.
pub fn to_data(map: &serde_json::Map<String, serde_json::Value>) -> Data {
    map.iter().map(|(k, v)| (k.clone(), to_doc(v))).collect()
}

/// Python's `repr()` of a string (its home is `abi-pyjson`).
pub use abi_pyjson::python_str_repr as py_repr;
