//! Why the service core did not answer: the rules (or the writer's retry
//! policy) refused, or the registry could not be reached. The NATS edge turns
//! the kind, never the message text, into the reply.

use abi_registry::ErrorCode;

/// The message of `UNAVAILABLE` when the store fails (never the internals).
pub const UNAVAILABLE_MESSAGE: &str = "Registry operation failed";

/// Why a [`Discovery`](crate::discovery::Discovery) call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DiscoveryError {
    /// A rule refused the call, or every compare-and-swap of its batch
    /// conflicted (`REGISTRY_BUSY`): the caller gets this code and
    /// `"CODE: message"`, as the reference's `str(DiscoveryError)`.
    #[error(transparent)]
    Refused(#[from] abi_registry::Error),
    /// The registry could not be read or written (store failure or timeout, a
    /// snapshot that does not decode, the writer stopped). The cause was logged
    /// where it happened; the caller gets `UNAVAILABLE` and
    /// [`UNAVAILABLE_MESSAGE`] only.
    #[error("UNAVAILABLE: {UNAVAILABLE_MESSAGE}")]
    Unavailable,
}

impl DiscoveryError {
    /// The wire code the caller gets.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Refused(error) => error.code(),
            Self::Unavailable => ErrorCode::Unavailable,
        }
    }

    /// The message the caller gets, without the code.
    pub fn message(&self) -> &str {
        match self {
            Self::Refused(error) => error.message(),
            Self::Unavailable => UNAVAILABLE_MESSAGE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_reads_like_the_rules_errors() {
        // The text the core's `UNAVAILABLE` had when it was a registry error,
        // which logs and test failures still show.
        let as_registry_error =
            abi_registry::Error::new(ErrorCode::Unavailable, UNAVAILABLE_MESSAGE);
        assert_eq!(
            DiscoveryError::Unavailable.to_string(),
            as_registry_error.to_string()
        );
        assert_eq!(DiscoveryError::Unavailable.code(), ErrorCode::Unavailable);
    }
}
