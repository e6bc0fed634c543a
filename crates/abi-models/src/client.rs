//! [`ChatModel`]: calling a chat model a module serves
//! ([`ModelsExt::chat_model`]), and [`ChatCall`] for a chat with
//! stop sequences, options or tools.
//!
//! Beyond the reference (which always sends to the first READY instance,
//! weakness 13), chats are spread round robin over the READY instances that
//! declare the model, and a chat refused because an instance cannot take it
//! (`MODULE_UNAVAILABLE`: draining or not ready; `RESOURCE_EXHAUSTED`: busy;
//! `LEASE_EXPIRED`; nobody subscribed) goes to the next one. Such a refusal
//! means the handler never ran, so sending again is safe.

use abi_wire::ErrorCode;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use abi_proto::common::v1 as common;
use abi_proto::model_registry::v1 as mpb;
use abi_pyjson::Json;
use abi_wire::models::{CHAT_KIND, MessageType, chat_subject};
use prost::Message as _;

use super::codec::encode_json;
use super::message::ChatMessage;
use super::spec::ChatInput;
use abi_sdk_core::ModuleProxy;
use abi_sdk_core::routes::Routes;
use abi_sdk_core::{BoundSigner, TokenSource};
use abi_sdk_core::{CallError, CallErrorKind};

/// How long one chat may take unless set otherwise.
pub const DEFAULT_CHAT_TIMEOUT: Duration = Duration::from_secs(60);

/// A chat model served by a module: cheap to clone, clones share the
/// round robin and the instance list.
#[derive(Clone)]
pub struct ChatModel {
    proxy: ModuleProxy,
    name: String,
    signer: BoundSigner,
    timeout: Duration,
    routes: Arc<Routes>,
}

impl std::fmt::Debug for ChatModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatModel")
            .field("module_id", &self.proxy.module_id())
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ChatModel {
    pub(crate) fn new(proxy: ModuleProxy, name: String, tokens: Arc<TokenSource>) -> Self {
        Self {
            proxy,
            name,
            signer: Arc::new(move |audience| tokens.for_audience(audience)),
            timeout: DEFAULT_CHAT_TIMEOUT,
            routes: Arc::new(Routes::new()),
        }
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets how long one chat may take (default [`DEFAULT_CHAT_TIMEOUT`]).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Signs the instance-bound tokens with `signer` instead of the
    /// client's module key (a tool holding the project secret).
    #[must_use]
    pub fn bound_tokens(mut self, signer: BoundSigner) -> Self {
        self.signer = signer;
        self
    }

    /// Sends `messages` and returns the model's AI message.
    ///
    /// # Errors
    ///
    /// `ModelNotFound` when no READY instance declares the model, the
    /// host's refusal (`InvalidArgument`, `Unimplemented`, `ModelError`,
    /// `PayloadTooLarge`...), `TimedOut`, or the last instance's refusal
    /// when every one was unavailable.
    ///
    /// # Cancel safety
    ///
    /// Cancelling drops the chat; the model may still answer it.
    pub async fn invoke(
        &self,
        messages: impl IntoIterator<Item = ChatMessage>,
    ) -> Result<ChatMessage, CallError> {
        self.request(messages).send().await
    }

    /// A chat to complete with stop sequences, options or tools before
    /// [`ChatCall::send`].
    pub fn request(&self, messages: impl IntoIterator<Item = ChatMessage>) -> ChatCall<'_> {
        ChatCall {
            model: self,
            input: ChatInput {
                messages: messages.into_iter().collect(),
                ..ChatInput::default()
            },
        }
    }

    /// The READY instances that declare this chat model, by instance id.
    ///
    /// # Errors
    ///
    /// As [`ModuleProxy::ready_instances`]; `ModelNotFound` when none of
    /// them declares the model.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn instances(&self) -> Result<Vec<String>, CallError> {
        let ids: Vec<String> = self
            .proxy
            .ready_instances()
            .await?
            .into_iter()
            .filter(|i| {
                i.descriptor.as_ref().is_some_and(|d| {
                    d.models
                        .iter()
                        .any(|m| m.name == self.name && m.kind == CHAT_KIND)
                })
            })
            .map(|i| i.instance_id)
            .collect();
        if ids.is_empty() {
            return Err(
                CallError::new(CallErrorKind::ModelNotFound, self.name.clone())
                    .with_code(ErrorCode::ModelNotFound.as_str()),
            );
        }
        Ok(ids)
    }

    async fn send(&self, input: &ChatInput) -> Result<ChatMessage, CallError> {
        let Some(nats) = self.proxy.client().nats().cloned() else {
            return Err(CallError::new(
                CallErrorKind::NoResponders,
                "chat models are served over NATS only",
            ));
        };
        let payload = self.encode(input)?;
        self.routes
            .call(
                || self.instances(),
                |id| self.exchange(&nats, id, payload.clone()),
                retry_elsewhere,
                || {
                    CallError::new(CallErrorKind::ModelNotFound, self.name.clone())
                        .with_code(ErrorCode::ModelNotFound.as_str())
                },
            )
            .await
    }

    fn encode(&self, input: &ChatInput) -> Result<bytes::Bytes, CallError> {
        let invalid = |err: super::codec::CodecError| {
            CallError::new(
                CallErrorKind::InvalidArgument,
                format!("cannot encode the chat: {err}"),
            )
        };
        let object = |map: &BTreeMap<String, Json>| encode_json(&Json::Object(map.clone()));
        let request = mpb::ChatRequest {
            context: Some(common::CallContext {
                trace_id: abi_sdk_core::ids::uuid4(),
                timeout_ms: i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX),
                ..Default::default()
            }),
            r#ref: Some(mpb::ModelRef {
                canonical_id: self.name.clone(),
                provider: self.proxy.module_id().to_owned(),
                kind: CHAT_KIND.to_owned(),
                model_id: String::new(),
            }),
            messages: input
                .messages
                .iter()
                .map(ChatMessage::to_pb)
                .collect::<Result<_, _>>()
                .map_err(invalid)?,
            stop: input.stop.clone(),
            options_json: object(&input.options).map_err(invalid)?.into_bytes(),
            tools_json: input
                .tools
                .iter()
                .map(|t| object(t).map(String::into_bytes))
                .collect::<Result<_, _>>()
                .map_err(invalid)?,
            tool_options_json: object(&input.tool_options).map_err(invalid)?.into_bytes(),
        };
        Ok(request.encode_to_vec().into())
    }

    /// One request to one instance and its decoded answer.
    async fn exchange(
        &self,
        nats: &async_nats::Client,
        instance_id: String,
        payload: bytes::Bytes,
    ) -> Result<ChatMessage, CallError> {
        let subject = chat_subject(self.proxy.client().project(), &instance_id, &self.name);
        let token = (self.signer)(&instance_id)?;
        let response: mpb::ChatResponse = abi_sdk_core::instance_call::call_instance(
            nats,
            &subject,
            &token,
            payload,
            self.timeout,
        )
        .await?;
        if let Some(error) = response.error.filter(|e| !e.code.is_empty()) {
            return Err(
                CallError::new(CallErrorKind::from_code(&error.code), error.message)
                    .with_code(error.code),
            );
        }
        let message = response
            .message
            .ok_or_else(|| CallError::new(CallErrorKind::Decode, "the chat answered no message"))
            .and_then(|m| {
                ChatMessage::from_pb(&m).map_err(|e| {
                    CallError::new(
                        CallErrorKind::Decode,
                        "the chat answered a malformed message",
                    )
                    .with_source(e)
                })
            })?;
        if message.kind().base() != MessageType::Ai {
            return Err(CallError::new(
                CallErrorKind::Decode,
                "the remote chat model returned a non-AI message",
            ));
        }
        Ok(message)
    }
}

/// Whether the instance refused before running the handler, so another
/// replica may take the chat.
fn retry_elsewhere(err: &CallError) -> bool {
    matches!(
        err.kind(),
        CallErrorKind::ModuleUnavailable
            | CallErrorKind::ResourceExhausted
            | CallErrorKind::LeaseExpired
            | CallErrorKind::NoResponders
    )
}

/// A chat being put together: [`ChatModel::request`], then [`ChatCall::send`].
#[must_use = "a chat is sent by send()"]
#[derive(Debug)]
pub struct ChatCall<'a> {
    model: &'a ChatModel,
    input: ChatInput,
}

impl ChatCall<'_> {
    /// Adds stop sequences.
    pub fn stop(mut self, stop: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.input.stop.extend(stop.into_iter().map(Into::into));
        self
    }

    /// Sets the option `key` (`temperature`, `max_tokens`, ...).
    pub fn option(mut self, key: impl Into<String>, value: Json) -> Self {
        self.input.options.insert(key.into(), value);
        self
    }

    /// Adds a tool definition (a JSON object, e.g. an OpenAI tool schema).
    pub fn tool(mut self, definition: BTreeMap<String, Json>) -> Self {
        self.input.tools.push(definition);
        self
    }

    /// Sets the tool option `key` (`tool_choice`, ...).
    pub fn tool_option(mut self, key: impl Into<String>, value: Json) -> Self {
        self.input.tool_options.insert(key.into(), value);
        self
    }

    /// Sends the chat; as [`ChatModel::invoke`].
    ///
    /// # Errors
    ///
    /// As [`ChatModel::invoke`].
    ///
    /// # Cancel safety
    ///
    /// As [`ChatModel::invoke`].
    pub async fn send(self) -> Result<ChatMessage, CallError> {
        self.model.send(&self.input).await
    }
}
/// Chat models from a module's proxy: `proxy.chat_model("echo")` (in
/// the `abi_sdk` prelude).
pub trait ModelsExt {
    /// The chat model `name` of this module: chats go round robin to the
    /// READY instances declaring it (see [`ChatModel`]). No lookup happens
    /// until the first chat.
    fn chat_model(&self, name: impl Into<String>) -> ChatModel;
}

impl ModelsExt for ModuleProxy {
    fn chat_model(&self, name: impl Into<String>) -> ChatModel {
        ChatModel::new(self.clone(), name.into(), self.client().token())
    }
}
