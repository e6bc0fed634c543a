//! [`ChatMessage`]: one LangChain v1 message as the reference's codec carries
//! it (`model_codec.py`): a type and the message's fields as JSON.

use std::collections::BTreeMap;

use abi_proto::model_registry::v1 as mpb;
use abi_pyjson::Json;
pub use abi_wire::models::MessageType;

use super::codec::{self, CodecError};

/// One chat message: its [`MessageType`] and its LangChain fields
/// (`content`, `additional_kwargs`, `response_metadata`, `name`, `id`, and
/// the type's own: `tool_calls` of an AI message, `tool_call_id` of a tool
/// message, `role` of a chat message...).
///
/// Decoded messages carry LangChain's defaults for the fields the sender
/// left out, so a handler reads them as LangChain would give them.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    kind: MessageType,
    data: BTreeMap<String, Json>,
}

impl ChatMessage {
    /// A message of `kind` whose content is `text`, with LangChain's defaults.
    pub fn text(kind: MessageType, text: impl Into<String>) -> Self {
        let mut data = BTreeMap::new();
        data.insert("content".to_owned(), Json::Str(text.into()));
        Self::with_defaults(kind, data)
    }

    /// A `human` message.
    pub fn human(text: impl Into<String>) -> Self {
        Self::text(MessageType::Human, text)
    }

    /// An `ai` message (what a model answers).
    pub fn ai(text: impl Into<String>) -> Self {
        Self::text(MessageType::Ai, text)
    }

    /// A `system` message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text(MessageType::System, text)
    }

    /// A `tool` message: the result of the tool call `tool_call_id`.
    pub fn tool(text: impl Into<String>, tool_call_id: impl Into<String>) -> Self {
        let mut message = Self::text(MessageType::Tool, text);
        message
            .data
            .insert("tool_call_id".to_owned(), Json::Str(tool_call_id.into()));
        message
    }

    /// A message of `kind` from its fields, checked as the reference's codec
    /// checks a message it receives.
    ///
    /// # Errors
    ///
    /// [`CodecError`] when the fields do not make a message of `kind` (no
    /// content, a `type` field naming another type, a tool message without
    /// `tool_call_id`...).
    pub fn from_fields(
        kind: MessageType,
        fields: BTreeMap<String, Json>,
    ) -> Result<Self, CodecError> {
        codec::check_fields(kind, &fields)?;
        Ok(Self::with_defaults(kind, fields))
    }

    /// Sets the field `key` (replacing it), e.g. `tool_calls` of an AI message.
    #[must_use]
    pub fn with_field(mut self, key: impl Into<String>, value: Json) -> Self {
        let key = key.into();
        if key != "type" {
            self.data.insert(key, value);
        }
        self
    }

    /// The message's type.
    pub fn kind(&self) -> MessageType {
        self.kind
    }

    /// The field `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.data.get(key)
    }

    /// Every field, `type` included.
    pub fn fields(&self) -> &BTreeMap<String, Json> {
        &self.data
    }

    /// The content as text: a string content as is, a list content as its
    /// strings and `{"type": "text", "text": ...}` parts joined.
    pub fn content_text(&self) -> String {
        match self.data.get("content") {
            Some(Json::Str(s)) => s.clone(),
            Some(Json::Array(parts)) => parts
                .iter()
                .filter_map(|part| match part {
                    Json::Str(s) => Some(s.as_str()),
                    Json::Object(o) if o.get("type") == Some(&Json::Str("text".into())) => {
                        match o.get("text") {
                            Some(Json::Str(s)) => Some(s.as_str()),
                            _ => None,
                        }
                    }
                    _ => None,
                })
                .collect(),
            _ => String::new(),
        }
    }

    /// The wire form: the type and the fields as compact JSON, in
    /// LangChain's field order (what `encode_message` sends).
    ///
    /// # Errors
    ///
    /// [`CodecError`] when a number is not finite (JSON cannot carry it).
    pub fn to_pb(&self) -> Result<mpb::ChatMessage, CodecError> {
        Ok(mpb::ChatMessage {
            r#type: self.kind.as_str().to_owned(),
            data_json: codec::encode_fields(&self.data)?.into_bytes(),
        })
    }

    /// Reads a wire message as the reference's `decode_message` does.
    ///
    /// # Errors
    ///
    /// [`CodecError`] for an unknown type, data that is not a JSON object
    /// with finite numbers, or fields that make no message of its type.
    pub fn from_pb(message: &mpb::ChatMessage) -> Result<Self, CodecError> {
        let kind = MessageType::parse(&message.r#type).ok_or(CodecError::UnknownType)?;
        let Json::Object(fields) =
            codec::decode_json(&message.data_json)?.ok_or(CodecError::NotAnObject)?
        else {
            return Err(CodecError::NotAnObject);
        };
        Self::from_fields(kind, fields)
    }

    /// Fills LangChain's defaults of `kind` for the fields not given.
    fn with_defaults(kind: MessageType, mut data: BTreeMap<String, Json>) -> Self {
        let defaults: &[FieldDefault] = &[
            ("additional_kwargs", || Json::Object(BTreeMap::new())),
            ("response_metadata", || Json::Object(BTreeMap::new())),
            ("name", || Json::Null),
            ("id", || Json::Null),
        ];
        for (key, value) in defaults {
            data.entry((*key).to_owned()).or_insert_with(value);
        }
        data.entry("content".to_owned())
            .or_insert_with(|| Json::Str(String::new()));
        data.insert("type".to_owned(), Json::Str(kind.as_str().to_owned()));
        let own: &[FieldDefault] = match kind {
            MessageType::Ai => &[
                ("tool_calls", || Json::Array(Vec::new())),
                ("invalid_tool_calls", || Json::Array(Vec::new())),
                ("usage_metadata", || Json::Null),
            ],
            MessageType::AiChunk => &[
                ("tool_calls", || Json::Array(Vec::new())),
                ("invalid_tool_calls", || Json::Array(Vec::new())),
                ("usage_metadata", || Json::Null),
                ("tool_call_chunks", || Json::Array(Vec::new())),
                ("chunk_position", || Json::Null),
            ],
            MessageType::Tool | MessageType::ToolChunk => &[
                ("artifact", || Json::Null),
                ("status", || Json::Str("success".to_owned())),
            ],
            _ => &[],
        };
        for (key, value) in own {
            data.entry((*key).to_owned()).or_insert_with(value);
        }
        Self { kind, data }
    }
}

/// A field LangChain fills when it is not given, and its default value.
type FieldDefault = (&'static str, fn() -> Json);

impl From<&str> for ChatMessage {
    /// A human message.
    fn from(text: &str) -> Self {
        Self::human(text)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// `encode_message` of LangChain 1.x for the same messages.
    #[test]
    fn built_messages_encode_as_langchain_does() {
        let cases = [
            (
                ChatMessage::human("hi"),
                r#"{"content":"hi","additional_kwargs":{},"response_metadata":{},"type":"human","name":null,"id":null}"#,
            ),
            (
                ChatMessage::ai("yo"),
                r#"{"content":"yo","additional_kwargs":{},"response_metadata":{},"type":"ai","name":null,"id":null,"tool_calls":[],"invalid_tool_calls":[],"usage_metadata":null}"#,
            ),
            (
                ChatMessage::tool("r", "c1"),
                r#"{"content":"r","additional_kwargs":{},"response_metadata":{},"type":"tool","name":null,"id":null,"tool_call_id":"c1","artifact":null,"status":"success"}"#,
            ),
            (
                ChatMessage::text(MessageType::AiChunk, "a"),
                r#"{"content":"a","additional_kwargs":{},"response_metadata":{},"type":"AIMessageChunk","name":null,"id":null,"tool_calls":[],"invalid_tool_calls":[],"usage_metadata":null,"tool_call_chunks":[],"chunk_position":null}"#,
            ),
        ];
        for (message, want) in cases {
            let wire = message.to_pb().unwrap();
            assert_eq!(String::from_utf8(wire.data_json.clone()).unwrap(), want);
            assert_eq!(ChatMessage::from_pb(&wire).unwrap(), message);
        }
    }

    #[test]
    fn a_sparse_message_gets_the_defaults_and_text_parts_join() {
        let wire = mpb::ChatMessage {
            r#type: "human".into(),
            data_json: br#"{"content":["a",{"type":"text","text":"b"},{"type":"image"}]}"#.to_vec(),
        };
        let message = ChatMessage::from_pb(&wire).unwrap();
        assert_eq!(message.content_text(), "ab");
        assert_eq!(message.get("name"), Some(&Json::Null));
    }
}
