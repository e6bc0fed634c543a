//! Wire error codes and the error every refused operation returns.

use std::fmt;

/// The stable, upper-case codes a refused call carries in `CallError.code`.
///
/// [`ErrorCode::as_str`] gives the exact strings the reference service sends,
/// and [`ErrorCode::from_wire`] reads them back, so either side can branch on a
/// code without comparing messages.
#[non_exhaustive]
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
}

impl ErrorCode {
    /// Every code, in declaration order (for tests and tools).
    pub const ALL: [ErrorCode; 17] = [
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

/// A refused operation: a wire code and a message for people.
///
/// `Display` gives `"CODE: message"`, the exact text the reference puts in
/// `CallError.message`, so a reply built from it matches the reference byte
/// for byte.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct Error {
    code: ErrorCode,
    message: String,
}

impl Error {
    /// An error with `code` and a message for people.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The wire code callers branch on.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message alone, without the `"CODE: "` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Fails with `code` and `message` unless `ok` holds (the rules' one-line guard).
pub(crate) fn require(ok: bool, code: ErrorCode, message: &str) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::new(code, message))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
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

    #[test]
    fn display_is_code_colon_message_like_the_reference() {
        let err = Error::new(ErrorCode::ModuleNotFound, "billing");
        assert_eq!(err.to_string(), "MODULE_NOT_FOUND: billing");
        assert_eq!(err.code(), ErrorCode::ModuleNotFound);
        assert_eq!(err.message(), "billing");
    }

    #[test]
    fn require_passes_or_fails_with_the_given_code() {
        assert!(require(true, ErrorCode::InvalidArgument, "x").is_ok());
        let err = require(false, ErrorCode::RegistryFull, "full").unwrap_err();
        assert_eq!(err.code(), ErrorCode::RegistryFull);
        assert_eq!(err.message(), "full");
    }
}
