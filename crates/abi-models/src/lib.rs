//! Chat models: serving them (the model host) and calling them, wire-compatible with the
//! reference's `model_host.py` and `models.py`.
//!
//! - Declare: [`ChatModelSpec::new`] (refuses names that would break the
//!   subject: `.`, `*`, `>`, whitespace, empty), a [`ChatHandler`] (any
//!   `Fn(ChatInput) -> impl Future<Output = Result<ChatMessage, BoxError>>`),
//!   and a [`ModelHost`] handed to [`abi_sdk_core::ModuleSpec::serve`].
//! - Call: [`ModelsExt::chat_model`] gives a [`ChatModel`];
//!   [`ChatModel::invoke`] sends messages and returns the AI message,
//!   [`ChatModel::request`] adds stop sequences, options and tools.
//! - Messages: [`ChatMessage`], LangChain v1 messages as the reference's
//!   codec carries them (`model_codec.py`).
//!
//! [`BoxError`]: abi_sdk_core::BoxError

mod client;
mod codec;
mod host;
mod message;
mod spec;

/// Python-exact JSON (the values messages, options and tools carry), so a
/// module needs no dependency of its own for them.
pub use abi_pyjson as json;
pub use abi_pyjson::Json;
pub use abi_sdk_core::BoundSigner;
pub use client::{ChatCall, ChatModel, DEFAULT_CHAT_TIMEOUT, ModelsExt};
pub use codec::CodecError;
pub use host::{DEFAULT_QUEUE, ModelHost};
pub use message::{ChatMessage, MessageType};
pub use spec::{ChatHandler, ChatInput, ChatModelSpec, DeclareError, DeclareErrorKind};
