//! [`Refusal`]: a refused agent operation, its code and message as they go
//! out, from the machine's refusals and from store errors.

use abi_proto::common::v1 as common;
use abi_wire::ErrorCode;
use tracing::error;

use abi_sdk_core::{CallError, CallErrorKind};

/// A refusal: its code and message as they go out.
#[derive(Debug)]
pub(super) struct Refusal {
    code: String,
    message: String,
}

impl Refusal {
    /// `code` with the reference's `"CODE: message"` text.
    pub(super) fn new(code: ErrorCode, message: &str) -> Self {
        Self {
            code: code.as_str().to_owned(),
            message: format!("{code}: {message}"),
        }
    }

    pub(super) fn plain(code: &str, message: &str) -> Self {
        Self {
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }

    pub(super) fn into_error(self) -> common::CallError {
        common::CallError {
            code: self.code,
            message: self.message,
            ..Default::default()
        }
    }
}

impl From<super::machine::Refused> for Refusal {
    fn from((code, message): super::machine::Refused) -> Self {
        Refusal::new(code, message)
    }
}

impl From<CallError> for Refusal {
    fn from(e: CallError) -> Self {
        match (e.kind(), e.code()) {
            (CallErrorKind::DocumentNotFound, _) => Refusal::plain(
                ErrorCode::InvocationNotFound.as_str(),
                "Invocation not found",
            ),
            (_, Some(code)) => Refusal::plain(code, &format!("{code}: {}", e.message())),
            _ => {
                error!(error = %e, "agent operation failed");
                Refusal::plain(
                    ErrorCode::Unavailable.as_str(),
                    "Agent operation failed; reconcile submission by invocation ID",
                )
            }
        }
    }
}
