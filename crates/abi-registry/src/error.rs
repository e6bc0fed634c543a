//! The error every refused operation returns: a wire code and a message.

pub use abi_wire::ErrorCode;

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
