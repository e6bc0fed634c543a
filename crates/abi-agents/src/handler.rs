//! What a module author writes: an [`AgentHandler`] per declared agent
//! ([`AgentSpec`]), called with the prompt and an [`InvocationContext`].

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tokio_util::sync::CancellationToken;

/// One declared agent: its name, description and capabilities (the
/// descriptor other modules find it by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) contract_major: u32,
    pub(crate) capabilities: Vec<String>,
}

impl AgentSpec {
    /// An agent invocable over NATS (capability `agent.invoke.v1`), at
    /// contract major 1.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            contract_major: 1,
            capabilities: vec![abi_wire::agents::INVOKE_CAPABILITY.to_owned()],
        }
    }

    /// Adds a capability (default only `agent.invoke.v1`).
    #[must_use]
    pub fn capability(mut self, capability: impl Into<String>) -> Self {
        let capability = capability.into();
        if !self.capabilities.contains(&capability) {
            self.capabilities.push(capability);
        }
        self
    }

    /// Sets the agent's contract major (default 1).
    #[must_use]
    pub fn contract_major(mut self, major: u32) -> Self {
        self.contract_major = major;
        self
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The descriptor discovery carries.
    pub fn to_descriptor(&self) -> abi_proto::discovery::v1::AgentDescriptor {
        abi_proto::discovery::v1::AgentDescriptor {
            name: self.name.clone(),
            description: self.description.clone(),
            contract_major: self.contract_major,
            capabilities: self.capabilities.clone(),
        }
    }
}

/// What a handler knows about the invocation it serves.
#[derive(Debug, Clone)]
pub struct InvocationContext {
    /// The caller's invocation id.
    pub invocation_id: String,
    /// The conversation, scoped to project, module, agent and caller (the
    /// reference's hashed thread id).
    pub thread_id: String,
    /// Who called, as discovery vouched for it.
    pub caller_identity: String,
    /// Cancelled when the run is cancelled or times out; the handler's
    /// future is dropped right after, so this is for cleanup that must run
    /// first (or for work spawned elsewhere).
    pub cancelled: CancellationToken,
}

/// One streamed event: a name (at most 64 characters) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentEvent {
    /// `message` events make up a stream's result; `done` ends it.
    pub event: String,
    /// The event's text.
    pub data: String,
    /// `Some(false)` for a tool response whose tool opted out of chat
    /// sources (stored and shown only then).
    pub chat_source: Option<bool>,
}

impl AgentEvent {
    /// An event `event` with `data`.
    pub fn new(event: impl Into<String>, data: impl Into<String>) -> Self {
        Self {
            event: event.into(),
            data: data.into(),
            chat_source: None,
        }
    }

    /// A `message` event.
    pub fn message(data: impl Into<String>) -> Self {
        Self::new(abi_wire::agents::MESSAGE_EVENT, data)
    }
}

/// A handler's failure: the run ends FAILED with `code` (or `AGENT_FAILED`)
/// and the reference's fixed message (the text here goes to the logs only).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HandlerError {
    pub(crate) code: Option<String>,
    pub(crate) message: String,
}

impl HandlerError {
    /// A failure recorded as `AGENT_FAILED`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            code: None,
            message: message.into(),
        }
    }

    /// A failure recorded with the wire code `code` (as a reference handler
    /// raising an `RPCError`).
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }
}

/// What [`AgentHandler::invoke`] returns.
pub type InvokeFuture = BoxFuture<'static, Result<String, HandlerError>>;
/// What [`AgentHandler::stream`] returns.
pub type EventStream = BoxStream<'static, Result<AgentEvent, HandlerError>>;

/// Serves one agent.
pub trait AgentHandler: Send + Sync + 'static {
    /// Answers `prompt` with one text (recorded as a `message` event, then
    /// `done`).
    fn invoke(&self, prompt: String, cx: InvocationContext) -> InvokeFuture;

    /// Streams events for `prompt`, for submits in `stream` mode; `None`
    /// (the default) serves those with [`AgentHandler::invoke`] too.
    fn stream(&self, prompt: String, cx: InvocationContext) -> Option<EventStream> {
        let _ = (prompt, cx);
        None
    }
}

/// An [`AgentHandler`] from an async function of the prompt and context.
pub fn invoke_fn<F, Fut>(f: F) -> Arc<dyn AgentHandler>
where
    F: Fn(String, InvocationContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, HandlerError>> + Send + 'static,
{
    struct Invoke<F>(F);
    impl<F, Fut> AgentHandler for Invoke<F>
    where
        F: Fn(String, InvocationContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<String, HandlerError>> + Send + 'static,
    {
        fn invoke(&self, prompt: String, cx: InvocationContext) -> InvokeFuture {
            Box::pin((self.0)(prompt, cx))
        }
    }
    Arc::new(Invoke(f))
}
