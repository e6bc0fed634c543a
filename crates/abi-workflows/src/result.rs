//! A step's result as the journal stores it: JSON text of at most
//! [`MAX_STEP_RESULT_BYTES`], as the reference's `encode_result` writes it
//! (`json.dumps` with its default separators and ASCII escapes). One
//! difference: object keys come out sorted, where Python keeps a dict's
//! insertion order; both hosts read the text back to the same value, and
//! the text is byte-identical whenever the keys were in order.

use abi_pyjson::python_str_repr;
use abi_sdk_core::documents::json::to_py;
use abi_wire::workflows::MAX_STEP_RESULT_BYTES;

/// Why a step's result cannot be journaled (both are non-retryable: the
/// same step would return the same value again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepResultError {
    /// The JSON is above the limit; the reference's message.
    #[error(
        "Step {key} returned {size} bytes of JSON; a step result is at most {limit} bytes. \
         Store large data in object storage and return a reference to it.",
        key = python_str_repr(key),
        limit = MAX_STEP_RESULT_BYTES
    )]
    TooLarge {
        /// The step key.
        key: String,
        /// The JSON's size in bytes.
        size: usize,
        /// The JSON itself (a step that opted in stores it as a claim check).
        json: String,
    },
}

/// The JSON text journaled for `value`, the result of step `key`.
///
/// # Errors
///
/// [`StepResultError::TooLarge`] above [`MAX_STEP_RESULT_BYTES`].
pub fn encode_result(key: &str, value: &serde_json::Value) -> Result<String, StepResultError> {
    let encoded = abi_pyjson::dumps_default(&to_py(value));
    if encoded.len() > MAX_STEP_RESULT_BYTES {
        return Err(StepResultError::TooLarge {
            key: key.to_owned(),
            size: encoded.len(),
            json: encoded,
        });
    }
    Ok(encoded)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn results_are_pythons_json_and_refused_above_the_limit() {
        assert_eq!(
            encode_result("k", &json!({"a": [1, 2.5, null], "b": "é"})).unwrap(),
            r#"{"a": [1, 2.5, null], "b": "\u00e9"}"#
        );
        let at_limit = "x".repeat(MAX_STEP_RESULT_BYTES - 2);
        assert!(encode_result("k", &json!(at_limit)).is_ok());
        let above = "x".repeat(MAX_STEP_RESULT_BYTES - 1);
        let err = encode_result("big", &json!(above)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Step 'big' returned 262145 bytes of JSON; a step result is at most 262144 \
             bytes. Store large data in object storage and return a reference to it."
        );
    }
}
