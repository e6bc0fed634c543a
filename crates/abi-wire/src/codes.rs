//! The wire error codes: the stable strings a refused call carries in
//! `CallError.code`, shared by the services and the SDK.

use std::fmt;

/// The code label our services' metrics give a request answered without a
/// refusal, beside the [`ErrorCode`] strings of the refused ones.
pub const OK_LABEL: &str = "OK";

/// The stable, upper-case codes a refused call carries in `CallError.code`.
///
/// [`ErrorCode::as_str`] gives the exact strings the reference service sends,
/// and [`ErrorCode::from_wire`] reads them back, so either side can branch on a
/// code without comparing messages.
///
/// Deliberately exhaustive: a code added here is a contract change that every
/// `match` over the codes (the SDK's error kinds among them) must take up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A request field is missing, malformed or out of bounds.
    InvalidArgument,
    /// A registration disagrees with what its instance or generation declared.
    DescriptorConflict,
    /// The registering module would depend on itself.
    DependencyCycle,
    /// The caller does not own the registration, or is not an administrator.
    PermissionDenied,
    /// The registry already holds as many instances or bytes as it may.
    RegistryFull,
    /// Concurrent writers kept winning the compare-and-swap; retry.
    RegistryBusy,
    /// The instance has no live registration (its lease ran out or it was evicted).
    LeaseExpired,
    /// Eviction of an instance the registry does not hold.
    InstanceNotFound,
    /// No live instance serves the module id asked for.
    ModuleNotFound,
    /// The module is live, but not at the contract major asked for.
    IncompatibleModule,
    /// The provider declares no invocable agent of that name.
    AgentNotFound,
    /// The provider declares no chat model of that name.
    ModelNotFound,
    /// The provider declares no app of that name.
    AppNotFound,
    /// The provider is registered but not READY.
    ModuleUnavailable,
    /// The service token is missing or invalid.
    Unauthenticated,
    /// The request or the response is above the size cap.
    PayloadTooLarge,
    /// The registry could not be read or written.
    Unavailable,
    /// The provider declares no job of that name.
    JobNotFound,
    /// The service failed in a way it did not foresee.
    Internal,
    /// A quota or limit of the service is used up; retry later.
    ResourceExhausted,
    /// The document does not exist.
    DocumentNotFound,
    /// The document collection was never ensured (or was dropped).
    CollectionNotFound,
    /// A document's `if_version` did not match.
    VersionConflict,
    /// A document breaks a unique field or group of its collection.
    UniqueViolation,
    /// The document storage failed; a write's outcome may be unknown.
    StorageError,
    /// The document storage refused a query the service built (a defect).
    AdapterError,
    /// The agent holds no run with that invocation id.
    InvocationNotFound,
    /// The invocation id is taken by a different submission.
    InvocationConflict,
    /// The agent host is draining or runs as many invocations as it may.
    AgentBusy,
    /// No READY instance serves the agent.
    AgentUnavailable,
    /// The agent's handler failed.
    AgentFailed,
    /// Another run of the same conversation is still going.
    ConversationBusy,
    /// The instance that owned the run or conversation is gone.
    OwnerGone,
    /// The run is live on another instance than the one asked.
    OwnerUnavailable,
    /// The caller asked for an output format the host does not serve.
    UpgradeRequired,
    /// A streaming handler produced an event the contract refuses.
    InvalidStream,
    /// A run's output is above what its record may hold.
    OutputLimit,
    /// The chat model's handler failed or answered something else than a message.
    ModelError,
    /// The callee does not implement what the call asks for.
    Unimplemented,
    /// The stored part asked for does not exist (yet).
    NotFound,
    /// A transfer operation out of turn: a write after start, a read before
    /// it, a sequence not the next, or two operations at once.
    Conflict,
    /// An operation outlasted its deadline on the serving side (reading an
    /// overflowed request, say).
    DeadlineExceeded,
    /// A module's web app failed, or its answer could not be sent.
    AppError,
}

/// The code the reference's SDK raises itself when a wait for an agent
/// run outlasts its timeout (never sent by a service).
pub const WAIT_TIMEOUT: &str = "WAIT_TIMEOUT";
/// The code the reference's SDK fails a module's start with when its
/// dependencies are not READY in time (never sent by a service).
pub const DEPENDENCY_TIMEOUT: &str = "DEPENDENCY_TIMEOUT";

impl ErrorCode {
    /// Every code, in declaration order (for tests and tools).
    pub const ALL: [ErrorCode; 43] = [
        ErrorCode::InvalidArgument,
        ErrorCode::DescriptorConflict,
        ErrorCode::DependencyCycle,
        ErrorCode::PermissionDenied,
        ErrorCode::RegistryFull,
        ErrorCode::RegistryBusy,
        ErrorCode::LeaseExpired,
        ErrorCode::InstanceNotFound,
        ErrorCode::ModuleNotFound,
        ErrorCode::IncompatibleModule,
        ErrorCode::AgentNotFound,
        ErrorCode::ModelNotFound,
        ErrorCode::AppNotFound,
        ErrorCode::ModuleUnavailable,
        ErrorCode::Unauthenticated,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unavailable,
        ErrorCode::JobNotFound,
        ErrorCode::Internal,
        ErrorCode::ResourceExhausted,
        ErrorCode::DocumentNotFound,
        ErrorCode::CollectionNotFound,
        ErrorCode::VersionConflict,
        ErrorCode::UniqueViolation,
        ErrorCode::StorageError,
        ErrorCode::AdapterError,
        ErrorCode::InvocationNotFound,
        ErrorCode::InvocationConflict,
        ErrorCode::AgentBusy,
        ErrorCode::AgentUnavailable,
        ErrorCode::AgentFailed,
        ErrorCode::ConversationBusy,
        ErrorCode::OwnerGone,
        ErrorCode::OwnerUnavailable,
        ErrorCode::UpgradeRequired,
        ErrorCode::InvalidStream,
        ErrorCode::OutputLimit,
        ErrorCode::ModelError,
        ErrorCode::Unimplemented,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::DeadlineExceeded,
        ErrorCode::AppError,
    ];

    /// The code as it travels on the wire, e.g. `"LEASE_EXPIRED"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::DescriptorConflict => "DESCRIPTOR_CONFLICT",
            ErrorCode::DependencyCycle => "DEPENDENCY_CYCLE",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::RegistryFull => "REGISTRY_FULL",
            ErrorCode::RegistryBusy => "REGISTRY_BUSY",
            ErrorCode::LeaseExpired => "LEASE_EXPIRED",
            ErrorCode::InstanceNotFound => "INSTANCE_NOT_FOUND",
            ErrorCode::ModuleNotFound => "MODULE_NOT_FOUND",
            ErrorCode::IncompatibleModule => "INCOMPATIBLE_MODULE",
            ErrorCode::AgentNotFound => "AGENT_NOT_FOUND",
            ErrorCode::ModelNotFound => "MODEL_NOT_FOUND",
            ErrorCode::AppNotFound => "APP_NOT_FOUND",
            ErrorCode::ModuleUnavailable => "MODULE_UNAVAILABLE",
            ErrorCode::Unauthenticated => "UNAUTHENTICATED",
            ErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::JobNotFound => "JOB_NOT_FOUND",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorCode::DocumentNotFound => "DOCUMENT_NOT_FOUND",
            ErrorCode::CollectionNotFound => "COLLECTION_NOT_FOUND",
            ErrorCode::VersionConflict => "VERSION_CONFLICT",
            ErrorCode::UniqueViolation => "UNIQUE_VIOLATION",
            ErrorCode::StorageError => "STORAGE_ERROR",
            ErrorCode::AdapterError => "ADAPTER_ERROR",
            ErrorCode::InvocationNotFound => "INVOCATION_NOT_FOUND",
            ErrorCode::InvocationConflict => "INVOCATION_CONFLICT",
            ErrorCode::AgentBusy => "AGENT_BUSY",
            ErrorCode::AgentUnavailable => "AGENT_UNAVAILABLE",
            ErrorCode::AgentFailed => "AGENT_FAILED",
            ErrorCode::ConversationBusy => "CONVERSATION_BUSY",
            ErrorCode::OwnerGone => "OWNER_GONE",
            ErrorCode::OwnerUnavailable => "OWNER_UNAVAILABLE",
            ErrorCode::UpgradeRequired => "UPGRADE_REQUIRED",
            ErrorCode::InvalidStream => "INVALID_STREAM",
            ErrorCode::OutputLimit => "OUTPUT_LIMIT",
            ErrorCode::ModelError => "MODEL_ERROR",
            ErrorCode::Unimplemented => "UNIMPLEMENTED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::DeadlineExceeded => "DEADLINE_EXCEEDED",
            ErrorCode::AppError => "APP_ERROR",
        }
    }

    /// The code a wire string names, or `None` for a code this version does not know.
    pub fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|code| code.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_string() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(code));
            assert_eq!(code.to_string(), code.as_str());
        }
        assert_eq!(ErrorCode::from_wire("lease_expired"), None);
        assert_eq!(ErrorCode::from_wire(""), None);
    }
}
