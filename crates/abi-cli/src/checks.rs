//! Checks of what the command line says, before anything is sent: each
//! refuses with exit 2 and names what is allowed (a typo must not turn into
//! an empty table or a timeout).

use crate::error::Failure;

/// `value` of `flag` as one of `allowed` (any case), in the allowed spelling.
///
/// # Errors
///
/// Exit 2 listing the allowed values.
pub fn one_of(flag: &str, value: &str, allowed: &[&str]) -> Result<String, Failure> {
    allowed
        .iter()
        .find(|a| a.eq_ignore_ascii_case(value))
        .map(|a| (*a).to_owned())
        .ok_or_else(|| {
            Failure::usage(format!(
                "{flag} {value:?} is not one of {}",
                allowed.join(", ")
            ))
        })
}

/// A project name, as discovery names its subjects and bucket.
///
/// # Errors
///
/// Exit 2 with the pattern.
pub fn project(project: &str) -> Result<(), Failure> {
    if abi_wire::names::token(project, 64) {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "--project {project:?} (ABI_PROJECT) must be 1 to 64 of [A-Za-z0-9_-]"
    )))
}

/// A module id.
///
/// # Errors
///
/// Exit 2 with the pattern.
pub fn module_id(module: &str) -> Result<(), Failure> {
    if abi_wire::names::name(module) {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "{module:?} is not a module id: 1 to 256 of [A-Za-z0-9_.:-], starting with a letter, digit or '_'"
    )))
}

/// A JSON object given on the command line as text, or as `@<path>` to
/// read it from a file (large payloads do not fit an argument); `what`
/// names the argument in the exit-2 error.
///
/// # Errors
///
/// The file cannot be read, the text is not JSON, or not an object.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn json_object(
    what: &str,
    arg: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, Failure> {
    let text = match arg.strip_prefix('@') {
        Some(path) => tokio::fs::read_to_string(path)
            .await
            .map_err(|e| Failure::usage(format!("{what} {arg}: {e}")))?,
        None => arg.to_owned(),
    };
    let parsed: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Failure::usage(format!("{what} is not JSON: {e}")))?;
    match parsed {
        serde_json::Value::Object(object) => Ok(object),
        _ => Err(Failure::usage(format!("{what} must be a JSON object"))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn each_check_names_what_is_allowed() {
        use abi_wire::jobs::{FAILED, QUEUED, RUNNING};
        let statuses = [QUEUED, RUNNING, FAILED];
        assert_eq!(one_of("--status", "failed", &statuses).unwrap(), FAILED);
        let refused = one_of("--status", "BOGUS", &statuses).unwrap_err();
        assert_eq!(refused.exit, crate::error::EXIT_USAGE);
        assert_eq!(
            refused.message,
            "--status \"BOGUS\" is not one of QUEUED, RUNNING, FAILED"
        );
        assert!(project("demo_1-x").is_ok());
        for bad in ["a.b", "", "x y", &"p".repeat(65)] {
            assert!(project(bad).is_err(), "{bad:?}");
        }
        assert!(module_id("acme.billing:v2").is_ok());
        for bad in ["bad id!", "", ".x"] {
            assert!(module_id(bad).is_err(), "{bad:?}");
        }
    }
}
