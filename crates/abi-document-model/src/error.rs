//! Why a document operation failed, with the wire code each reason travels as.

use abi_wire::ErrorCode;

/// A refused or failed document operation.
///
/// Each variant is one of the reference's exception classes, and
/// [`DocumentError::code`] the code its NATS adapter answers with. Only an
/// [`DocumentError::InvalidArgument`] message reaches the caller; the others
/// travel as their code alone (messages may hold names a caller should not
/// learn from a failure, or storage details).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// The document does not exist.
    #[error("{0}")]
    DocumentNotFound(String),
    /// The collection was never ensured in that namespace (or was dropped).
    #[error("{0}")]
    CollectionNotFound(String),
    /// `if_version` did not match the stored version (or the document exists
    /// for a create-only put).
    #[error("{0}")]
    VersionConflict(String),
    /// A unique field or `unique_together` group already holds the value.
    #[error("{0}")]
    UniqueViolation(String),
    /// The request is malformed or out of bounds; the message says why.
    #[error("{0}")]
    InvalidArgument(String),
    /// The caller may not do this.
    #[error("{0}")]
    PermissionDenied(String),
    /// The storage failed (I/O, lock, connection); a write's outcome may be
    /// unknown.
    #[error("{0}")]
    Storage(String),
    /// The storage refused a query the adapter built: a defect, not a
    /// transient failure.
    #[error("{0}")]
    Adapter(String),
    /// The answer would not fit the broker's max payload (a put refused
    /// before it is stored).
    #[error("{0}")]
    PayloadTooLarge(String),
}

impl DocumentError {
    /// The code the reference answers this failure with.
    pub fn code(&self) -> ErrorCode {
        match self {
            DocumentError::DocumentNotFound(_) => ErrorCode::DocumentNotFound,
            DocumentError::CollectionNotFound(_) => ErrorCode::CollectionNotFound,
            DocumentError::VersionConflict(_) => ErrorCode::VersionConflict,
            DocumentError::UniqueViolation(_) => ErrorCode::UniqueViolation,
            DocumentError::InvalidArgument(_) => ErrorCode::InvalidArgument,
            DocumentError::PermissionDenied(_) => ErrorCode::PermissionDenied,
            DocumentError::Storage(_) => ErrorCode::StorageError,
            DocumentError::Adapter(_) => ErrorCode::AdapterError,
            DocumentError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
        }
    }

    /// An [`DocumentError::InvalidArgument`] with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        DocumentError::InvalidArgument(message.into())
    }
}
