//! The one error of a transfer: a wire code and the reference's message.

use abi_wire::ErrorCode;

/// A refused or failed transfer operation, as it travels in a reply's
/// `CallError` (`code`, `message`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct TransferError {
    /// The wire code.
    pub code: ErrorCode,
    /// What went wrong, in the reference's words where it has them.
    pub message: String,
}

impl TransferError {
    /// An error of `code` saying `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A transfer operation out of turn.
    pub(crate) fn conflict(message: &str) -> Self {
        Self::new(ErrorCode::Conflict, message)
    }

    /// A session this host does not hold (expired, closed, never opened).
    pub(crate) fn gone() -> Self {
        Self::new(ErrorCode::NotFound, "Transfer expired or closed")
    }

    /// A value above the overflow limit, naming both limits: the broker's
    /// (which made it overflow) and the overflow's own.
    pub fn too_large(size: usize, max_payload: usize) -> Self {
        Self::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "{size} bytes exceeds the broker's {max_payload}-byte max payload and the {}-byte \
                 overflow limit; use streaming or a storage reference",
                abi_wire::overflow::MAX_VALUE_BYTES
            ),
        )
    }

    /// A session opened by another caller.
    pub(crate) fn not_callers() -> Self {
        Self::new(
            ErrorCode::PermissionDenied,
            "Transfer belongs to another caller",
        )
    }

    /// A malformed or unsupported transfer request.
    pub(crate) fn invalid() -> Self {
        Self::new(
            ErrorCode::InvalidArgument,
            "Invalid transfer or operation payload",
        )
    }

    /// The session table is full.
    pub(crate) fn capacity() -> Self {
        Self::new(
            ErrorCode::ResourceExhausted,
            "Transfer session capacity reached",
        )
    }
}
