//! [`AgentError`]: why a call to an agent, or the run it started, failed.

use abi_wire::ErrorCode;
use abi_wire::agents::RunStatus;
use std::fmt;

use super::Invocation;
use abi_sdk_core::{CallError, CallErrorKind};

/// What went wrong, to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AgentErrorKind {
    /// A call was refused or failed ([`AgentError::code`] has the wire code).
    Call(CallErrorKind),
    /// The submit may or may not have been accepted: reconcile with the
    /// handle ([`AgentError::into_invocation`]) by its invocation id.
    SubmissionUncertain,
    /// The wait ended before the run did; it may still be running.
    WaitTimeout,
    /// The run has no registered owner: its outcome is unknown (it is
    /// never replayed).
    OwnerUnavailable,
    /// The run ended `FAILED` ([`AgentError::code`]: `AGENT_FAILED`,
    /// `CONVERSATION_BUSY`, `INVALID_STREAM`, ...).
    Failed,
    /// The run's owner left discovery mid-run (`OWNER_GONE`).
    OwnerGone,
    /// The run was cancelled.
    Cancelled,
    /// The run passed its deadline or idle timeout.
    TimedOut,
    /// An argument was out of range; nothing was sent.
    InvalidArgument,
}

impl fmt::Display for AgentErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Call(kind) => write!(f, "{kind}"),
            Self::SubmissionUncertain => f.write_str("submission uncertain"),
            Self::WaitTimeout => f.write_str("wait timed out"),
            Self::OwnerUnavailable => f.write_str("owner unavailable"),
            Self::Failed => f.write_str("run failed"),
            Self::OwnerGone => f.write_str("owner gone"),
            Self::Cancelled => f.write_str("run cancelled"),
            Self::TimedOut => f.write_str("run timed out"),
            Self::InvalidArgument => f.write_str("invalid argument"),
        }
    }
}

/// An agent call's or run's failure.
pub struct AgentError(Box<Inner>);

struct Inner {
    kind: AgentErrorKind,
    code: Option<String>,
    message: String,
    invocation: Option<Box<Invocation>>,
    source: Option<CallError>,
}

impl AgentError {
    pub(crate) fn new(kind: AgentErrorKind, message: impl Into<String>) -> Self {
        Self(Box::new(Inner {
            kind,
            code: None,
            message: message.into(),
            invocation: None,
            source: None,
        }))
    }

    pub(crate) fn with_code(mut self, code: impl Into<String>) -> Self {
        self.0.code = Some(code.into());
        self
    }

    pub(crate) fn uncertain(invocation: Invocation, cause: CallError) -> Self {
        let message = format!(
            "Invocation {}: submission outcome is unknown; query its status before retrying",
            invocation.invocation_id()
        );
        Self(Box::new(Inner {
            kind: AgentErrorKind::SubmissionUncertain,
            code: cause.code().map(str::to_owned),
            message,
            invocation: Some(Box::new(invocation)),
            source: Some(cause),
        }))
    }

    /// A run that ended `status` with `code` and `message`.
    pub(crate) fn ended(status: &str, code: &str, message: &str) -> Self {
        let kind = match (RunStatus::parse(status), ErrorCode::from_wire(code)) {
            (Some(RunStatus::Cancelled), _) => AgentErrorKind::Cancelled,
            (Some(RunStatus::TimedOut), _) => AgentErrorKind::TimedOut,
            (_, Some(ErrorCode::OwnerGone)) => AgentErrorKind::OwnerGone,
            _ => AgentErrorKind::Failed,
        };
        let code = if code.is_empty() { status } else { code };
        let message = if message.is_empty() { status } else { message };
        Self::new(kind, message).with_code(code)
    }

    /// What went wrong.
    pub fn kind(&self) -> AgentErrorKind {
        self.0.kind
    }

    /// The wire code (`AGENT_BUSY`, `AGENT_FAILED`, `TIMED_OUT`, ...), when there is one.
    pub fn code(&self) -> Option<&str> {
        self.0.code.as_deref()
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The handle of an uncertain submission, to reconcile by its id.
    pub fn into_invocation(self) -> Option<Invocation> {
        self.0.invocation.map(|b| *b)
    }
}

impl From<CallError> for AgentError {
    fn from(e: CallError) -> Self {
        Self(Box::new(Inner {
            kind: AgentErrorKind::Call(e.kind()),
            code: e.code().map(str::to_owned),
            message: e.message().to_owned(),
            invocation: None,
            source: Some(e),
        }))
    }
}

impl fmt::Debug for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentError")
            .field("kind", &self.0.kind)
            .field("code", &self.0.code)
            .field("message", &self.0.message)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.code {
            // The reference words many messages "CODE: text": the code once.
            Some(code) => {
                let message = self
                    .0
                    .message
                    .strip_prefix(code.as_str())
                    .and_then(|rest| rest.strip_prefix(": "))
                    .unwrap_or(&self.0.message);
                write!(f, "{} ({code}): {message}", self.0.kind)
            }
            None => write!(f, "{}: {}", self.0.kind, self.0.message),
        }
    }
}

impl std::error::Error for AgentError {
    /// The cause, unless this error already says all it says (a call's
    /// refusal: same kind, code and message), so a chain of causes never
    /// repeats itself.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .source
            .as_ref()
            .filter(|e| !(e.message() == self.0.message && e.code() == self.0.code.as_deref()))
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
