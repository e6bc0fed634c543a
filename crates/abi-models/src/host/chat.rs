//! One chat, in the reference's order (`ModelHost._handle`, `_invoke`):
//! size, decode, authorize, draining, the request's checks, tools, the
//! handler, the answer. Each refusal carries the reference's code and text.

use std::collections::BTreeMap;

use abi_proto::common::v1 as common;
use abi_proto::model_registry::v1 as mpb;
use abi_pyjson::Json;
use abi_wire::ErrorCode;
use abi_wire::models::{MAX_MESSAGES, MAX_REQUEST_BYTES, MAX_TOOLS, MessageType};
use prost::Message as _;
use tracing::warn;

use super::Shared;
use crate::codec::decode_json;
use crate::message::ChatMessage;
use crate::spec::{ChatInput, ChatModelSpec};

/// A chat answered with an error instead of a message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub(crate) code: String,
    pub(crate) message: String,
}

impl Refusal {
    /// The reference's `RPCError(code, text)`: its message is `"CODE: text"`.
    pub(crate) fn rpc(code: ErrorCode, text: &str) -> Self {
        Self {
            code: code.as_str().to_owned(),
            message: format!("{}: {text}", code.as_str()),
        }
    }

    /// Any other failure, which the reference answers without details.
    pub(crate) fn failed() -> Self {
        Self {
            code: ErrorCode::ModelError.as_str().to_owned(),
            message: "Model execution failed".to_owned(),
        }
    }

    pub(crate) fn into_response(self) -> mpb::ChatResponse {
        mpb::ChatResponse {
            message: None,
            error: Some(common::CallError {
                code: self.code,
                message: self.message,
                ..Default::default()
            }),
        }
    }
}

/// What the host read from the NATS message.
pub(crate) struct Incoming<'a> {
    pub(crate) payload: &'a [u8],
    pub(crate) overflowed: bool,
    pub(crate) caller_token: &'a str,
}

/// Answers one chat on `spec`'s model.
pub(crate) async fn answer(
    shared: &Shared,
    spec: &ChatModelSpec,
    msg: Incoming<'_>,
) -> mpb::ChatResponse {
    match handle(shared, spec, msg).await {
        Ok(message) => mpb::ChatResponse {
            message: Some(message),
            error: None,
        },
        Err(refusal) => refusal.into_response(),
    }
}

async fn handle(
    shared: &Shared,
    spec: &ChatModelSpec,
    msg: Incoming<'_>,
) -> Result<mpb::ChatMessage, Refusal> {
    if msg.payload.len() > MAX_REQUEST_BYTES || msg.overflowed {
        return Err(Refusal::rpc(
            ErrorCode::PayloadTooLarge,
            "Model request exceeds 512 KiB",
        ));
    }
    // The reference answers an undecodable request like a failed handler.
    let request = mpb::ChatRequest::decode(msg.payload).map_err(|_| Refusal::failed())?;
    let links = shared.links();
    shared
        .grants
        .authorize(
            &links.discovery,
            &links.session,
            spec.name(),
            msg.caller_token,
        )
        .await
        .map_err(|err| match err.code() {
            // The reference wraps discovery's refusal once more.
            Some(code) => Refusal {
                code: code.to_owned(),
                message: format!("{code}: {}", err.message()),
            },
            None => {
                warn!(model = %spec.name(), error = %err, "model authorization failed");
                Refusal::rpc(ErrorCode::Unavailable, "Model authorization failed")
            }
        })?;
    if shared.is_draining() {
        return Err(Refusal::rpc(
            ErrorCode::ModuleUnavailable,
            "Model is draining",
        ));
    }
    let input = validate(spec, request)?;
    let handler = shared.handler(spec.name()).ok_or_else(Refusal::failed)?;
    let reply = handler.chat(input).await.map_err(|err| {
        warn!(model = %spec.name(), error = %err, "model handler failed");
        Refusal::failed()
    })?;
    if reply.kind().base() != MessageType::Ai {
        return Err(Refusal::rpc(
            ErrorCode::ModelError,
            "Model result must be text or an AIMessage",
        ));
    }
    reply.to_pb().map_err(|err| {
        warn!(model = %spec.name(), error = %err, "model answer cannot be encoded");
        Refusal::failed()
    })
}

/// The request's checks, in the reference's order, and the handler's input.
pub(crate) fn validate(
    spec: &ChatModelSpec,
    request: mpb::ChatRequest,
) -> Result<ChatInput, Refusal> {
    let invalid = |text: &str| Refusal::rpc(ErrorCode::InvalidArgument, text);
    let named = request
        .r#ref
        .as_ref()
        .map(|r| r.canonical_id.as_str())
        .unwrap_or("");
    if !named.is_empty() && named != spec.name() {
        return Err(invalid("Model request names another model"));
    }
    if request.messages.is_empty() || request.messages.len() > MAX_MESSAGES {
        return Err(invalid("Model request needs 1 to 1024 messages"));
    }
    if request.tools_json.len() > MAX_TOOLS {
        return Err(invalid("Model request allows at most 128 tools"));
    }
    let unreadable = || invalid("Invalid model message or tools");
    let messages = request
        .messages
        .iter()
        .map(ChatMessage::from_pb)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| unreadable())?;
    let tools = request
        .tools_json
        .iter()
        .map(|t| decode_json(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| unreadable())?;
    let tool_options = decode_json(&request.tool_options_json)
        .map_err(|_| unreadable())?
        .unwrap_or(Json::Object(BTreeMap::new()));
    let tools = tools
        .into_iter()
        .map(|t| match t {
            Some(Json::Object(o)) => Some(o),
            _ => None,
        })
        .collect::<Option<Vec<_>>>();
    let (Some(tools), Json::Object(tool_options)) = (tools, tool_options) else {
        return Err(invalid("Tools must be JSON definitions"));
    };
    if !tool_options.is_empty() && tools.is_empty() {
        return Err(invalid("Tool options require tool definitions"));
    }
    if (!tools.is_empty() || !tool_options.is_empty()) && !spec.takes_tools() {
        return Err(Refusal::rpc(
            ErrorCode::Unimplemented,
            "This model handler does not accept tools",
        ));
    }
    // The reference ignores options; here they reach the handler, so they
    // must be what every caller sends: a JSON object.
    let options = match decode_json(&request.options_json) {
        Ok(None) => BTreeMap::new(),
        Ok(Some(Json::Object(o))) => o,
        _ => return Err(invalid("Model options must be a JSON object")),
    };
    Ok(ChatInput {
        messages,
        stop: request.stop,
        options,
        tools,
        tool_options,
    })
}
