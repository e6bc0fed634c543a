//! A workflow's input and output checked against its declared JSON Schemas
//! (better than the reference, which checks only through its pydantic
//! types): a payload its input schema refuses fails the run at attempt 1
//! (`InvalidWorkflowInput`, not retried), and so does an output its output
//! schema refuses (`InvalidWorkflowOutput`). [`TypedWorkflow::typed`]
//! derives both schemas from the Rust types with `schemars`.

use abi_sdk_core::job_spec::{JobSpec, JobSpecError};
use schemars::JsonSchema;

/// The checks of one workflow's declared schemas, compiled once.
#[derive(Debug)]
pub(crate) struct SchemaChecks {
    input: Compiled,
    output: Compiled,
}

/// A schema that does not compile, or a value it refuses: the message.
pub(crate) type Refusal = String;

/// A declared schema compiled: `None` when none was declared, the refusal
/// when it does not compile (every run then fails with it).
type Compiled = Result<Option<jsonschema::Validator>, Refusal>;

fn compile(text: &str, what: &str) -> Compiled {
    if text.is_empty() {
        return Ok(None);
    }
    let schema: serde_json::Value = serde_json::from_str(text)
        .map_err(|err| format!("The workflow's {what} schema is not JSON: {err}"))?;
    jsonschema::validator_for(&schema)
        .map(Some)
        .map_err(|err| format!("The workflow's {what} schema does not compile: {err}"))
}

fn check(compiled: &Compiled, value: &serde_json::Value) -> Result<(), Refusal> {
    let validator = match compiled {
        Ok(Some(validator)) => validator,
        Ok(None) => return Ok(()),
        Err(refusal) => return Err(refusal.clone()),
    };
    validator.validate(value).map_err(|err| {
        let at = err.instance_path().to_string();
        if at.is_empty() {
            err.to_string()
        } else {
            format!("{err} (at {at})")
        }
    })
}

impl SchemaChecks {
    /// The checks of `spec`'s declared schemas (none for a schema left empty).
    pub(crate) fn of(spec: &JobSpec) -> Self {
        Self {
            input: compile(spec.input_schema_json(), "input"),
            output: compile(spec.output_schema_json(), "output"),
        }
    }

    /// Whether the input schema takes `payload`.
    pub(crate) fn input(&self, payload: &serde_json::Value) -> Result<(), Refusal> {
        check(&self.input, payload)
    }

    /// Whether the output schema takes `output`.
    pub(crate) fn output(&self, output: &serde_json::Value) -> Result<(), Refusal> {
        check(&self.output, output)
    }
}

/// Workflow declarations whose schemas come from their Rust types.
pub trait TypedWorkflow: Sized {
    /// The declaration as a workflow (`JobSpec::as_workflow`) with the input
    /// and output schemas `schemars` derives from `I` and `O` (so callers and
    /// `abictl workflows --json` see them, and every run is checked against
    /// them).
    ///
    /// # Errors
    ///
    /// A schema above the reference's size limit.
    fn typed<I: JsonSchema, O: JsonSchema>(self) -> Result<JobSpec, JobSpecError>;
}

impl TypedWorkflow for JobSpec {
    fn typed<I: JsonSchema, O: JsonSchema>(self) -> Result<JobSpec, JobSpecError> {
        let input = serde_json::Value::from(schemars::schema_for!(I));
        let output = serde_json::Value::from(schemars::schema_for!(O));
        self.input_schema(&input)?
            .output_schema(&output)
            .map(JobSpec::as_workflow)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[derive(JsonSchema, serde::Deserialize)]
    #[allow(dead_code)]
    struct Input {
        n: i64,
    }

    #[test]
    fn typed_declarations_check_what_their_types_take() {
        let spec = JobSpec::new("flow").unwrap().typed::<Input, i64>().unwrap();
        assert_eq!(spec.to_descriptor().kind, "workflow");
        let checks = SchemaChecks::of(&spec);
        assert!(checks.input(&json!({"n": 2})).is_ok());
        let refused = checks.input(&json!({"n": "two"})).unwrap_err();
        assert!(refused.contains("/n"), "{refused}");
        assert!(
            checks
                .input(&json!({}))
                .unwrap_err()
                .contains("\"n\" is a required property")
        );
        assert!(checks.output(&json!(3)).is_ok());
        assert!(checks.output(&json!("3")).is_err());
    }

    #[test]
    fn an_undeclared_schema_takes_anything_and_a_bad_one_is_named() {
        let plain = JobSpec::new("job").unwrap();
        let checks = SchemaChecks::of(&plain);
        assert!(checks.input(&json!([1])).is_ok());
        let bad = JobSpec::new("flow")
            .unwrap()
            .input_schema(&json!({"type": 12}))
            .unwrap();
        let refused = SchemaChecks::of(&bad).input(&json!({})).unwrap_err();
        assert!(
            refused.starts_with("The workflow's input schema does not compile"),
            "{refused}"
        );
    }
}
