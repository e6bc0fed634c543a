//! The reference's message codec (`model_codec.py`): compact JSON with
//! finite numbers only, and the checks LangChain applies when it builds a
//! message from a dict.

use std::collections::BTreeMap;

use abi_pyjson::Json;
use abi_wire::models::MessageType;

/// Why a message, a tool definition or an option set cannot be read or
/// written. Every variant answers `INVALID_ARGUMENT` on a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The bytes are not UTF-8 JSON.
    #[error("not JSON")]
    NotJson,
    /// A number is not finite (`NaN`, `Infinity`, or out of a double's range).
    #[error("a number is not finite")]
    NotFinite,
    /// The message type is not one the codec carries.
    #[error("unsupported message type")]
    UnknownType,
    /// The message data is not a JSON object.
    #[error("message data is not a JSON object")]
    NotAnObject,
    /// The data's `type` names another type.
    #[error("message data names another type")]
    TypeMismatch,
    /// A field the type requires is missing or of the wrong JSON type.
    #[error("message field {0:?} is missing or invalid")]
    Field(&'static str),
}

/// `json.loads` as `decode_json` calls it: `None` for empty bytes, numbers
/// finite only.
pub(crate) fn decode_json(bytes: &[u8]) -> Result<Option<Json>, CodecError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| CodecError::NotJson)?;
    let value = abi_pyjson::parse(text).map_err(|_| CodecError::NotJson)?;
    check_finite(&value)?;
    Ok(Some(value))
}

/// `encode_json`: compact separators, ASCII only, finite numbers only.
/// Object keys come out sorted (the tree is ordered).
pub(crate) fn encode_json(value: &Json) -> Result<String, CodecError> {
    check_finite(value)?;
    Ok(abi_pyjson::dumps(value))
}

/// Where LangChain's `message_to_dict` puts each field it declares; fields
/// not in this list come after them, sorted.
const FIELD_ORDER: [&str; 16] = [
    "content",
    "additional_kwargs",
    "response_metadata",
    "type",
    "name",
    "id",
    "example",
    "tool_calls",
    "invalid_tool_calls",
    "usage_metadata",
    "tool_call_chunks",
    "chunk_position",
    "tool_call_id",
    "artifact",
    "status",
    "role",
];

/// A message's fields as compact JSON in LangChain's field order (nested
/// objects with sorted keys).
pub(crate) fn encode_fields(fields: &BTreeMap<String, Json>) -> Result<String, CodecError> {
    let known = FIELD_ORDER.iter().filter_map(|k| fields.get_key_value(*k));
    let rest = fields
        .iter()
        .filter(|(k, _)| !FIELD_ORDER.contains(&k.as_str()));
    let mut out = String::from("{");
    for (i, (key, value)) in known.chain(rest).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&abi_pyjson::json_string(key));
        out.push(':');
        out.push_str(&encode_json(value)?);
    }
    out.push('}');
    Ok(out)
}

/// What LangChain refuses when it builds a message of `kind` from `fields`.
pub(crate) fn check_fields(
    kind: MessageType,
    fields: &BTreeMap<String, Json>,
) -> Result<(), CodecError> {
    match fields.get("type") {
        None => {}
        Some(Json::Str(t)) if t == kind.as_str() => {}
        Some(_) => return Err(CodecError::TypeMismatch),
    }
    for value in fields.values() {
        check_finite(value)?;
    }
    match fields.get("content") {
        None if kind == MessageType::Remove => {}
        Some(Json::Str(_)) => {}
        Some(Json::Array(parts))
            if parts
                .iter()
                .all(|p| matches!(p, Json::Str(_) | Json::Object(_))) => {}
        _ => return Err(CodecError::Field("content")),
    }
    for key in ["additional_kwargs", "response_metadata"] {
        if !matches!(fields.get(key), None | Some(Json::Object(_))) {
            return Err(CodecError::Field(key));
        }
    }
    if !matches!(fields.get("name"), None | Some(Json::Null | Json::Str(_))) {
        return Err(CodecError::Field("name"));
    }
    let required_string = |key: &'static str| match fields.get(key) {
        Some(Json::Str(_)) => Ok(()),
        _ => Err(CodecError::Field(key)),
    };
    match kind.base() {
        MessageType::Tool => required_string("tool_call_id")?,
        MessageType::Chat => required_string("role")?,
        MessageType::Function => required_string("name")?,
        MessageType::Remove => required_string("id")?,
        MessageType::Ai => {
            for key in ["tool_calls", "invalid_tool_calls"] {
                match fields.get(key) {
                    None => {}
                    Some(Json::Array(calls))
                        if calls.iter().all(|c| matches!(c, Json::Object(_))) => {}
                    _ => return Err(CodecError::Field(key)),
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn check_finite(value: &Json) -> Result<(), CodecError> {
    match value {
        Json::Float(x) if !x.is_finite() => Err(CodecError::NotFinite),
        Json::Array(items) => items.iter().try_for_each(check_finite),
        Json::Object(map) => map.values().try_for_each(check_finite),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_read_as_decode_json_reads_it() {
        assert_eq!(decode_json(b""), Ok(None));
        assert_eq!(decode_json(b"NaN"), Err(CodecError::NotJson));
        assert_eq!(decode_json(b"[1e400]"), Err(CodecError::NotFinite));
        assert_eq!(decode_json(b"{\"a\":"), Err(CodecError::NotJson));
        assert_eq!(decode_json(b"{\"a\":1.5}").map(|v| v.is_some()), Ok(true));
        assert_eq!(
            encode_json(&Json::Float(f64::NAN)),
            Err(CodecError::NotFinite)
        );
    }

    #[test]
    fn fields_langchain_refuses_are_refused() {
        let parse = |t: &str| match decode_json(t.as_bytes()) {
            Ok(Some(Json::Object(m))) => m,
            _ => BTreeMap::new(),
        };
        let bad = [
            (MessageType::Human, "{}"),
            (MessageType::Human, r#"{"content":1}"#),
            (MessageType::Human, r#"{"content":[1]}"#),
            (MessageType::Human, r#"{"content":"x","type":"ai"}"#),
            (
                MessageType::Human,
                r#"{"content":"x","additional_kwargs":5}"#,
            ),
            (MessageType::Ai, r#"{"content":"x","name":5}"#),
            (MessageType::Ai, r#"{"content":"x","tool_calls":"no"}"#),
            (MessageType::Tool, r#"{"content":"x"}"#),
            (MessageType::Chat, r#"{"content":"x"}"#),
            (MessageType::Function, r#"{"content":"x"}"#),
            (MessageType::Remove, "{}"),
        ];
        for (kind, text) in bad {
            assert!(check_fields(kind, &parse(text)).is_err(), "{kind} {text}");
        }
        let good = [
            (MessageType::Human, r#"{"content":"x","extra":5,"id":5}"#),
            (MessageType::Remove, r#"{"id":"a"}"#),
            (MessageType::AiChunk, r#"{"content":"x"}"#),
        ];
        for (kind, text) in good {
            assert_eq!(check_fields(kind, &parse(text)), Ok(()), "{kind} {text}");
        }
    }
}
