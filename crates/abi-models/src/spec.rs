//! Declaring a chat model: [`ChatModelSpec`] (its name, checked here) and
//! its [`ChatHandler`], which gets a [`ChatInput`] and answers an AI message.

use std::collections::BTreeMap;
use std::future::Future;

use abi_pyjson::Json;
use futures::future::BoxFuture;

use super::message::ChatMessage;
use abi_sdk_core::{BoxError, Error, kind_display};

/// Why a chat model cannot be declared.
pub type DeclareError = Error<DeclareErrorKind>;

/// What [`DeclareError`] says is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeclareErrorKind {
    /// The name is empty or holds `.`, `*`, `>` or whitespace: it is one
    /// token of the model's subject, and would route wrongly.
    InvalidName,
    /// The host already serves a model of that name.
    Duplicate,
}

kind_display!(DeclareErrorKind {
    InvalidName => "invalid model name",
    Duplicate => "duplicate model",
});

/// A chat model a module serves: name, description, and whether its
/// handler takes tool definitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatModelSpec {
    name: String,
    description: String,
    accepts_tools: bool,
}

impl ChatModelSpec {
    /// A chat model called `name`, without description, refusing tools.
    ///
    /// # Errors
    ///
    /// [`DeclareErrorKind::InvalidName`] for a name that is empty or holds
    /// `.`, `*`, `>`, whitespace or control characters (the reference
    /// accepts them and then routes calls to the wrong subject).
    pub fn new(name: impl Into<String>) -> Result<Self, DeclareError> {
        let name = name.into();
        if let Some(problem) = abi_wire::models::model_name_problem(&name) {
            return Err(DeclareError::new(
                DeclareErrorKind::InvalidName,
                format!("cannot declare chat model {name:?}: {problem}"),
            ));
        }
        Ok(Self {
            name,
            description: String::new(),
            accepts_tools: false,
        })
    }

    /// Sets the description discovery shows (default empty).
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Whether the handler takes tool definitions (default `false`: a chat
    /// that carries tools is answered `UNIMPLEMENTED`, as the reference does
    /// for a handler without a `tools` parameter).
    #[must_use]
    pub fn accepts_tools(mut self, accepts: bool) -> Self {
        self.accepts_tools = accepts;
        self
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model's description.
    pub fn description_text(&self) -> &str {
        &self.description
    }

    /// Whether the handler takes tool definitions.
    pub fn takes_tools(&self) -> bool {
        self.accepts_tools
    }
}

/// One chat as the handler gets it: every field of the request, checked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatInput {
    /// The conversation, 1 to 1024 messages.
    pub messages: Vec<ChatMessage>,
    /// Stop sequences (the reference drops them; they reach the handler here).
    pub stop: Vec<String>,
    /// The caller's options (`options_json`: temperature, ...); the
    /// reference drops them, they reach the handler here.
    pub options: BTreeMap<String, Json>,
    /// Tool definitions (JSON objects, at most 128); empty unless the model
    /// [`ChatModelSpec::accepts_tools`].
    pub tools: Vec<BTreeMap<String, Json>>,
    /// Tool options (`tool_choice`, ...), only with tools.
    pub tool_options: BTreeMap<String, Json>,
}

/// What answers a chat model's chats.
///
/// A closure `Fn(ChatInput) -> impl Future<Output = Result<ChatMessage,
/// BoxError>>` is one. The answer must be an `ai` (or `AIMessageChunk`)
/// message, e.g. [`ChatMessage::ai`]; anything else, and an error, answers
/// `MODEL_ERROR` (the error is logged, never sent).
pub trait ChatHandler: Send + Sync + 'static {
    /// Answers one chat.
    fn chat(&self, input: ChatInput) -> BoxFuture<'static, Result<ChatMessage, BoxError>>;
}

impl<F, Fut> ChatHandler for F
where
    F: Fn(ChatInput) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ChatMessage, BoxError>> + Send + 'static,
{
    fn chat(&self, input: ChatInput) -> BoxFuture<'static, Result<ChatMessage, BoxError>> {
        Box::pin(self(input))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_that_would_route_wrongly_are_refused_at_declaration() {
        for bad in ["", "gpt.4", "a*", "x>", "two words"] {
            let err = ChatModelSpec::new(bad).unwrap_err();
            assert_eq!(err.kind(), DeclareErrorKind::InvalidName);
            assert!(err.message().contains("cannot declare chat model"), "{err}");
        }
        let spec = ChatModelSpec::new("echo")
            .unwrap()
            .description("d")
            .accepts_tools(true);
        assert_eq!(
            (spec.name(), spec.description_text(), spec.takes_tools()),
            ("echo", "d", true)
        );
    }
}
