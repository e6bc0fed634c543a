//! The chat model contract's names: subjects, limits, message types
//! (`naas_abi_sdk/model_host.py`, `model_codec.py`).
//!
//! A chat model is served on one subject per model and instance; the model
//! name is **not** hashed there, so a name must be one subject token
//! ([`model_name_problem`]).

/// The largest request body a model host reads (512 KiB); larger ones, and
/// overflowed ones ([`crate::overflow::REQUEST_HEADER`]), are
/// refused with `PAYLOAD_TOO_LARGE`.
pub const MAX_REQUEST_BYTES: usize = 512 * 1024;

/// The most messages one chat may carry (at least one is required).
pub const MAX_MESSAGES: usize = 1024;

/// The most tool definitions one chat may carry.
pub const MAX_TOOLS: usize = 128;

/// Chats a host runs at once (the reference's `ConcurrentCalls` default).
pub const DEFAULT_MAX_CONCURRENCY: usize = 64;

/// The `kind` of a chat model in a `ModelDescriptor` and a `ModelRef`.
pub const CHAT_KIND: &str = "chat";

/// The subject a chat model `name` of instance `instance_id` answers on:
/// `abi.mod.<project>.<instance_id>.model.<name>.chat`.
pub fn chat_subject(project: &str, instance_id: &str, name: &str) -> String {
    format!("abi.mod.{project}.{instance_id}.model.{name}.chat")
}

/// Every chat of `project`'s models, as a wildcard (an observer's
/// subscription: the console counts chats per model and replica).
pub fn all_chats(project: &str) -> String {
    chat_subject(project, "*", "*")
}

/// The (instance id, model name) of a [`chat_subject`] of `project`.
pub fn parse_chat_subject<'a>(project: &str, subject: &'a str) -> Option<(&'a str, &'a str)> {
    let rest = subject.strip_prefix(&format!("abi.mod.{project}."))?;
    let rest = rest.strip_suffix(".chat")?;
    let (instance, name) = rest.split_once(".model.")?;
    (!instance.contains('.') && !name.contains('.')).then_some((instance, name))
}

/// Why `name` cannot be a model name, or `None` when it can: the name is
/// one token of [`chat_subject`], so it must be nonempty and hold no `.`,
/// `*`, `>` nor whitespace (the reference accepts such names and then
/// routes them wrongly).
pub fn model_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("a model name must not be empty")
    } else if name.contains('.') {
        Some("a model name must not contain '.' (it is one subject token)")
    } else if name.contains(['*', '>']) {
        Some("a model name must not contain the subject wildcards '*' or '>'")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("a model name must not contain whitespace or control characters")
    } else {
        None
    }
}

/// The LangChain v1 message types the codec carries (`MESSAGE_TYPES`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageType {
    /// `human`.
    Human,
    /// `ai`.
    Ai,
    /// `system`.
    System,
    /// `tool`.
    Tool,
    /// `function`.
    Function,
    /// `chat` (a message with a free role).
    Chat,
    /// `remove`.
    Remove,
    /// `HumanMessageChunk`.
    HumanChunk,
    /// `AIMessageChunk`.
    AiChunk,
    /// `SystemMessageChunk`.
    SystemChunk,
    /// `ToolMessageChunk`.
    ToolChunk,
    /// `FunctionMessageChunk`.
    FunctionChunk,
    /// `ChatMessageChunk`.
    ChatChunk,
}

impl MessageType {
    /// Every type, in the reference's order.
    pub const ALL: [MessageType; 13] = [
        Self::Human,
        Self::Ai,
        Self::System,
        Self::Tool,
        Self::Function,
        Self::Chat,
        Self::Remove,
        Self::HumanChunk,
        Self::AiChunk,
        Self::SystemChunk,
        Self::ToolChunk,
        Self::FunctionChunk,
        Self::ChatChunk,
    ];

    /// The type's wire name (`ChatMessage.type`, the data's `type`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::Ai => "ai",
            Self::System => "system",
            Self::Tool => "tool",
            Self::Function => "function",
            Self::Chat => "chat",
            Self::Remove => "remove",
            Self::HumanChunk => "HumanMessageChunk",
            Self::AiChunk => "AIMessageChunk",
            Self::SystemChunk => "SystemMessageChunk",
            Self::ToolChunk => "ToolMessageChunk",
            Self::FunctionChunk => "FunctionMessageChunk",
            Self::ChatChunk => "ChatMessageChunk",
        }
    }

    /// The type named `name`, if the codec carries it.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// The same type without the chunk: `AIMessageChunk` is `ai`.
    pub fn base(self) -> Self {
        match self {
            Self::HumanChunk => Self::Human,
            Self::AiChunk => Self::Ai,
            Self::SystemChunk => Self::System,
            Self::ToolChunk => Self::Tool,
            Self::FunctionChunk => Self::Function,
            Self::ChatChunk => Self::Chat,
            other => other,
        }
    }
}

impl std::fmt::Display for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_has_the_name_as_one_token() {
        assert_eq!(
            chat_subject("default", "i-1", "echo"),
            "abi.mod.default.i-1.model.echo.chat"
        );
        assert_eq!(
            parse_chat_subject("default", &chat_subject("default", "i-1", "echo")),
            Some(("i-1", "echo"))
        );
        assert_eq!(all_chats("default"), "abi.mod.default.*.model.*.chat");
        assert_eq!(
            parse_chat_subject("default", "abi.mod.default.i-1.app.echo.http"),
            None
        );
    }

    #[test]
    fn names_that_break_routing_are_refused() {
        for bad in ["", "a.b", "a*", ">", "a b", "a\tb", "x\u{0}"] {
            assert!(model_name_problem(bad).is_some(), "{bad:?}");
        }
        for good in ["echo", "gpt-4o_mini", "é", "a:b"] {
            assert_eq!(model_name_problem(good), None, "{good:?}");
        }
    }

    #[test]
    fn types_round_trip_and_chunks_have_a_base() {
        for t in MessageType::ALL {
            assert_eq!(MessageType::parse(t.as_str()), Some(t));
        }
        assert_eq!(MessageType::AiChunk.base(), MessageType::Ai);
        assert_eq!(MessageType::parse("developer"), None);
    }
}
