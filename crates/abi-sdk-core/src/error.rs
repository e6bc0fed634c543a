//! Errors: one generic [`Error<K>`] carrying a small kind enum per operation.
//!
//! Callers branch on [`Error::kind`], never on the message. The wire code the
//! service sent (when there was one) stays available through [`Error::code`]
//! for logs, including codes this SDK does not know yet.

use std::fmt;

use abi_wire::ErrorCode;

/// The boxed error a module's own code returns from hooks and hosts.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error of kind `K`, with a short message and an optional cause.
pub struct Error<K> {
    kind: K,
    message: String,
    code: Option<String>,
    source: Option<BoxError>,
}

impl<K: Copy> Error<K> {
    /// A new error of `kind` with a human-readable `message`.
    pub fn new(kind: K, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            code: None,
            source: None,
        }
    }

    /// Attaches the error that caused this one.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// The same error with `message` in place of the service's (which, for
    /// some codes, is only the code itself).
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Records the wire code the service answered with.
    #[must_use]
    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// What went wrong, to branch on.
    pub fn kind(&self) -> K {
        self.kind
    }

    /// The wire code (`"LEASE_EXPIRED"`, ...) when a service sent one.
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// The human-readable message (for logs, never for branching).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl<K: fmt::Debug> fmt::Debug for Error<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.kind)
            .field("code", &self.code)
            .field("message", &self.message)
            .field("source", &self.source)
            .finish()
    }
}

impl<K: fmt::Display> fmt::Display for Error<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.code {
            // The reference words many messages "CODE: text": the code once.
            Some(code) => {
                let message = self
                    .message
                    .strip_prefix(code.as_str())
                    .and_then(|rest| rest.strip_prefix(": "))
                    .unwrap_or(&self.message);
                write!(f, "{} ({code}): {message}", self.kind)
            }
            None => write!(f, "{}: {}", self.kind, self.message),
        }
    }
}

impl<K: fmt::Debug + fmt::Display> std::error::Error for Error<K> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Implements `Display` for a kind enum from a table of descriptions (the
/// error kinds of this crate and of the host crates share it).
#[macro_export]
macro_rules! kind_display {
    ($kind:ty { $($variant:ident => $text:literal),* $(,)? }) => {
        impl ::std::fmt::Display for $kind {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(match self { $(Self::$variant => $text),* })
            }
        }
    };
}
pub(crate) use crate::kind_display;

/// Why a discovery call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallErrorKind {
    /// No instance of the module is registered (`MODULE_NOT_FOUND`).
    ModuleNotFound,
    /// Instances exist, none at the requested contract major (`INCOMPATIBLE_MODULE`).
    IncompatibleModule,
    /// Instances exist, none is READY (`MODULE_UNAVAILABLE`).
    ModuleUnavailable,
    /// The module did not declare this dependency; nothing was sent.
    NotDeclared,
    /// No agent of that name on a ready instance (`AGENT_NOT_FOUND`).
    AgentNotFound,
    /// No model of that name on a ready instance (`MODEL_NOT_FOUND`).
    ModelNotFound,
    /// No job of that name on a ready instance (`JOB_NOT_FOUND`).
    JobNotFound,
    /// No app of that name on a ready instance (`APP_NOT_FOUND`).
    AppNotFound,
    /// No registration with that instance id (`INSTANCE_NOT_FOUND`).
    InstanceNotFound,
    /// The registration is gone; register again (`LEASE_EXPIRED`).
    LeaseExpired,
    /// The token is missing or invalid (`UNAUTHENTICATED`).
    Unauthenticated,
    /// The identity may not do this (`PERMISSION_DENIED`).
    PermissionDenied,
    /// The request was refused as malformed (`INVALID_ARGUMENT`).
    InvalidArgument,
    /// A registration cannot change its identity (`DESCRIPTOR_CONFLICT`).
    DescriptorConflict,
    /// The declared dependencies form a cycle (`DEPENDENCY_CYCLE`).
    DependencyCycle,
    /// The registry holds as much as it may (`REGISTRY_FULL`).
    RegistryFull,
    /// Too many concurrent writes; retry (`REGISTRY_BUSY`).
    RegistryBusy,
    /// The registry could not be reached or written (`UNAVAILABLE`).
    Unavailable,
    /// The service failed (`INTERNAL`).
    Internal,
    /// The service is out of capacity (`RESOURCE_EXHAUSTED`).
    ResourceExhausted,
    /// The request or reply is above the size limit (`PAYLOAD_TOO_LARGE`).
    PayloadTooLarge,
    /// The document does not exist (`DOCUMENT_NOT_FOUND`).
    DocumentNotFound,
    /// The document collection does not exist (`COLLECTION_NOT_FOUND`).
    CollectionNotFound,
    /// The document is not at the version named (`VERSION_CONFLICT`).
    VersionConflict,
    /// The document breaks a unique field or group (`UNIQUE_VIOLATION`).
    UniqueViolation,
    /// The document storage failed; a write may or may not have happened (`STORAGE_ERROR`).
    StorageError,
    /// The document storage refused the service's query (`ADAPTER_ERROR`).
    AdapterError,
    /// No run with that invocation id (`INVOCATION_NOT_FOUND`).
    InvocationNotFound,
    /// The invocation id belongs to another submission (`INVOCATION_CONFLICT`).
    InvocationConflict,
    /// The agent host is draining or full; retry elsewhere or later (`AGENT_BUSY`).
    AgentBusy,
    /// No READY instance serves the agent (`AGENT_UNAVAILABLE`).
    AgentUnavailable,
    /// The agent's handler failed (`AGENT_FAILED`).
    AgentFailed,
    /// Another run of the conversation is still going (`CONVERSATION_BUSY`).
    ConversationBusy,
    /// The owning instance is gone (`OWNER_GONE`).
    OwnerGone,
    /// The run lives on another instance (`OWNER_UNAVAILABLE`).
    OwnerUnavailable,
    /// The output format asked for is not served (`UPGRADE_REQUIRED`).
    UpgradeRequired,
    /// The handler streamed an event the contract refuses (`INVALID_STREAM`).
    InvalidStream,
    /// The run's output is too large for its record (`OUTPUT_LIMIT`).
    OutputLimit,
    /// The model's handler failed (`MODEL_ERROR`).
    ModelError,
    /// The callee does not implement this (`UNIMPLEMENTED`).
    Unimplemented,
    /// The stored part does not exist (`NOT_FOUND`).
    NotFound,
    /// A transfer operation out of turn (`CONFLICT`).
    Conflict,
    /// The serving side ran out of time (`DEADLINE_EXCEEDED`).
    DeadlineExceeded,
    /// The module's web app failed (`APP_ERROR`).
    AppError,
    /// No such job run: no record, and no trigger of the job stored at its
    /// sequence (decided by the caller; no wire code).
    RunNotFound,
    /// Nobody serves the subject (no discovery service running).
    NoResponders,
    /// The NATS connection failed.
    Transport,
    /// The reply could not be decoded.
    Decode,
    /// No reply before the deadline. The remote mutation may still have happened.
    TimedOut,
    /// A token could not be signed.
    Token,
    /// A code this SDK does not know (see [`Error::code`]).
    Other,
}

kind_display!(CallErrorKind {
    ModuleNotFound => "module not found",
    IncompatibleModule => "incompatible module",
    ModuleUnavailable => "module unavailable",
    NotDeclared => "module dependency not declared",
    AgentNotFound => "agent not found",
    ModelNotFound => "model not found",
    JobNotFound => "job not found",
    AppNotFound => "app not found",
    InstanceNotFound => "instance not found",
    LeaseExpired => "lease expired",
    Unauthenticated => "unauthenticated",
    PermissionDenied => "permission denied",
    InvalidArgument => "invalid argument",
    DescriptorConflict => "descriptor conflict",
    DependencyCycle => "dependency cycle",
    RegistryFull => "registry full",
    RegistryBusy => "registry busy",
    Unavailable => "unavailable",
    Internal => "internal error",
    ResourceExhausted => "resource exhausted",
    PayloadTooLarge => "payload too large",
    DocumentNotFound => "document not found",
    CollectionNotFound => "collection not found",
    VersionConflict => "version conflict",
    UniqueViolation => "unique violation",
    StorageError => "storage error",
    AdapterError => "storage adapter error",
    InvocationNotFound => "invocation not found",
    InvocationConflict => "invocation conflict",
    AgentBusy => "agent busy",
    AgentUnavailable => "agent unavailable",
    AgentFailed => "agent failed",
    ConversationBusy => "conversation busy",
    OwnerGone => "owner gone",
    OwnerUnavailable => "owner unavailable",
    UpgradeRequired => "upgrade required",
    InvalidStream => "invalid stream",
    OutputLimit => "output limit",
    ModelError => "model error",
    Unimplemented => "unimplemented",
    NotFound => "not found",
    Conflict => "conflict",
    DeadlineExceeded => "deadline exceeded",
    AppError => "app failed",
    RunNotFound => "run not found",
    NoResponders => "no responders",
    Transport => "transport error",
    Decode => "malformed reply",
    TimedOut => "timed out",
    Token => "token error",
    Other => "call failed",
});

impl CallErrorKind {
    /// The kind for a wire code, [`CallErrorKind::Other`] when unknown.
    pub fn from_code(code: &str) -> Self {
        ErrorCode::from_wire(code).map_or(Self::Other, Self::from)
    }

    /// Whether repeating the same call later may succeed.
    ///
    /// These are the failures a lease session rides out with backoff; every
    /// other kind needs a change on the caller's side first.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            Self::Unavailable
                | Self::RegistryBusy
                | Self::Internal
                | Self::ResourceExhausted
                | Self::NoResponders
                | Self::Transport
                | Self::TimedOut
        )
    }
}

impl From<ErrorCode> for CallErrorKind {
    /// The kind of a wire code: every code has its own kind (the match is
    /// exhaustive, so a code added to the contract must be given one).
    fn from(code: ErrorCode) -> Self {
        match code {
            ErrorCode::ModuleNotFound => Self::ModuleNotFound,
            ErrorCode::IncompatibleModule => Self::IncompatibleModule,
            ErrorCode::ModuleUnavailable => Self::ModuleUnavailable,
            ErrorCode::AgentNotFound => Self::AgentNotFound,
            ErrorCode::ModelNotFound => Self::ModelNotFound,
            ErrorCode::JobNotFound => Self::JobNotFound,
            ErrorCode::AppNotFound => Self::AppNotFound,
            ErrorCode::InstanceNotFound => Self::InstanceNotFound,
            ErrorCode::LeaseExpired => Self::LeaseExpired,
            ErrorCode::Unauthenticated => Self::Unauthenticated,
            ErrorCode::PermissionDenied => Self::PermissionDenied,
            ErrorCode::InvalidArgument => Self::InvalidArgument,
            ErrorCode::DescriptorConflict => Self::DescriptorConflict,
            ErrorCode::DependencyCycle => Self::DependencyCycle,
            ErrorCode::RegistryFull => Self::RegistryFull,
            ErrorCode::RegistryBusy => Self::RegistryBusy,
            ErrorCode::Unavailable => Self::Unavailable,
            ErrorCode::Internal => Self::Internal,
            ErrorCode::ResourceExhausted => Self::ResourceExhausted,
            ErrorCode::PayloadTooLarge => Self::PayloadTooLarge,
            ErrorCode::DocumentNotFound => Self::DocumentNotFound,
            ErrorCode::CollectionNotFound => Self::CollectionNotFound,
            ErrorCode::VersionConflict => Self::VersionConflict,
            ErrorCode::UniqueViolation => Self::UniqueViolation,
            ErrorCode::StorageError => Self::StorageError,
            ErrorCode::AdapterError => Self::AdapterError,
            ErrorCode::InvocationNotFound => Self::InvocationNotFound,
            ErrorCode::InvocationConflict => Self::InvocationConflict,
            ErrorCode::AgentBusy => Self::AgentBusy,
            ErrorCode::AgentUnavailable => Self::AgentUnavailable,
            ErrorCode::AgentFailed => Self::AgentFailed,
            ErrorCode::ConversationBusy => Self::ConversationBusy,
            ErrorCode::OwnerGone => Self::OwnerGone,
            ErrorCode::OwnerUnavailable => Self::OwnerUnavailable,
            ErrorCode::UpgradeRequired => Self::UpgradeRequired,
            ErrorCode::InvalidStream => Self::InvalidStream,
            ErrorCode::OutputLimit => Self::OutputLimit,
            ErrorCode::ModelError => Self::ModelError,
            ErrorCode::Unimplemented => Self::Unimplemented,
            ErrorCode::NotFound => Self::NotFound,
            ErrorCode::Conflict => Self::Conflict,
            ErrorCode::DeadlineExceeded => Self::DeadlineExceeded,
            ErrorCode::AppError => Self::AppError,
        }
    }
}

/// A failed discovery call (lookups, registration, eviction).
pub type CallError = Error<CallErrorKind>;

impl CallError {
    /// Whether repeating the same call later may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_codes_map_to_kinds_and_unknown_codes_stay_readable() {
        assert_eq!(
            CallErrorKind::from_code("MODULE_UNAVAILABLE"),
            CallErrorKind::ModuleUnavailable
        );
        let err = CallError::new(CallErrorKind::from_code("SOMETHING_NEW"), "x")
            .with_code("SOMETHING_NEW");
        assert_eq!(err.kind(), CallErrorKind::Other);
        assert_eq!(err.code(), Some("SOMETHING_NEW"));
        assert!(err.to_string().contains("SOMETHING_NEW"));
    }

    #[test]
    fn every_wire_code_has_its_own_kind() {
        let mut kinds = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            let kind = CallErrorKind::from_code(code.as_str());
            assert_ne!(kind, CallErrorKind::Other, "{code} falls into Other");
            assert!(
                kinds.insert(kind),
                "{code} shares its kind with another code"
            );
        }
    }

    #[test]
    fn only_transient_failures_are_retryable() {
        for kind in [
            CallErrorKind::Unavailable,
            CallErrorKind::RegistryBusy,
            CallErrorKind::Internal,
            CallErrorKind::ResourceExhausted,
            CallErrorKind::TimedOut,
        ] {
            assert!(kind.is_retryable(), "{kind:?}");
        }
        for kind in [
            CallErrorKind::LeaseExpired,
            CallErrorKind::PermissionDenied,
            CallErrorKind::ModuleNotFound,
            CallErrorKind::DescriptorConflict,
        ] {
            assert!(!kind.is_retryable(), "{kind:?}");
        }
    }

    #[test]
    fn a_code_the_message_repeats_is_printed_once() {
        let refused = CallError::new(
            CallErrorKind::PermissionDenied,
            "PERMISSION_DENIED: api may not evict",
        )
        .with_code(ErrorCode::PermissionDenied.as_str());
        assert_eq!(
            refused.to_string(),
            "permission denied (PERMISSION_DENIED): api may not evict"
        );
        let plain = CallError::new(CallErrorKind::DocumentNotFound, "no document \"x\"")
            .with_code(ErrorCode::DocumentNotFound.as_str());
        assert_eq!(
            plain.to_string(),
            "document not found (DOCUMENT_NOT_FOUND): no document \"x\""
        );
    }
}
