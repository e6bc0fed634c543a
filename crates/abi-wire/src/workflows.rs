//! Workflows as the reference journals them (`naas_abi_sdk/workflows.py`): a
//! workflow is a job of kind [`KIND`]; each step of a run leaves a summary in
//! [`steps_collection`] and, once it succeeded, its result in
//! [`results_collection`], both under the id [`step_id`]. The limits and the
//! refusals' texts are the reference's, so a run journaled by one host
//! resumes on the other.

use crate::jobs::hash;

/// The job kind of a workflow.
pub const KIND: &str = "workflow";

/// A step result's JSON is at most this many bytes (UTF-8).
pub const MAX_STEP_RESULT_BYTES: usize = 256 * 1024;
/// A step key is at most this many characters.
pub const MAX_STEP_KEY_CHARS: usize = 200;
/// `map` and `map_call` fan out over at most this many items.
pub const MAX_FAN_OUT: usize = 10_000;
/// The fan-out concurrency when none is given.
pub const DEFAULT_FAN_OUT_CONCURRENCY: usize = 8;
/// A journaled error keeps at most this many characters.
pub const MAX_STEP_ERROR_CHARS: usize = 2000;
/// Compare-and-swap tries of one summary write.
pub const SUMMARY_WRITE_TRIES: usize = 5;

/// The kind of a journaled step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// `FlowContext.step`: a function run once per run.
    Step,
    /// `FlowContext.call`: a child run of another workflow.
    Call,
}

impl StepKind {
    /// The name stored in a summary's `kind`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Step => "step",
            Self::Call => "call",
        }
    }
}

/// The status of a journaled step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepStatus {
    /// Started and not finished (or its host died).
    Running,
    /// Finished with a result stored.
    Succeeded,
    /// Finished with an error (it runs again on a retry of the run).
    Failed,
    /// The run was cancelled while the step went on.
    Cancelled,
}

impl StepStatus {
    /// Every status, in declaration order.
    pub const ALL: [Self; 4] = [
        Self::Running,
        Self::Succeeded,
        Self::Failed,
        Self::Cancelled,
    ];

    /// The name stored in a summary's `status`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::Succeeded => "SUCCEEDED",
            Self::Failed => "FAILED",
            Self::Cancelled => "CANCELLED",
        }
    }

    /// The status named `name`, `None` for a name this version does not know.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// How long a parent run waits between reads of a child's record when no
/// completion notice comes (the reference's `NOTICE_FALLBACK_POLL_SECONDS`).
pub const NOTICE_FALLBACK_POLL: std::time::Duration = std::time::Duration::from_secs(5);

/// The names of the reference's workflow exceptions: a step's or a run's
/// error reads `<name>: <message>`, from a Python host or from ours.
pub mod error_type {
    /// A bad or repeated step key (not retried).
    pub const STEP_KEY: &str = "StepKeyError";
    /// The run was cancelled while a step or a call went on.
    pub const CANCELLED: &str = "WorkflowCancelled";
    /// A step result's JSON above [`super::MAX_STEP_RESULT_BYTES`] (not retried).
    pub const RESULT_TOO_LARGE: &str = "StepResultTooLarge";
    /// A step result that is not JSON (not retried).
    pub const RESULT_NOT_JSON: &str = "StepResultNotJSON";
    /// A payload the workflow's input type refuses (not retried).
    pub const INVALID_INPUT: &str = "InvalidWorkflowInput";
    /// An output the workflow's output type refuses (not retried).
    pub const INVALID_OUTPUT: &str = "InvalidWorkflowOutput";
    /// A workflow calling itself (not retried).
    pub const SELF_CALL: &str = "SelfCall";
    /// A child run that did not succeed (the parent's attempt fails; retried).
    pub const CHILD_RUN_FAILED: &str = "ChildRunFailed";
    /// A child run whose output its host truncated (not retried).
    pub const CHILD_OUTPUT_TRUNCATED: &str = "ChildOutputTruncated";
    /// A bad argument (`concurrency` 0, too many items; not retried).
    pub const VALUE: &str = "ValueError";
    /// A call input that is not a JSON object (not retried).
    pub const TYPE: &str = "TypeError";
    /// Ours: a call's child run could not be triggered or read (retried).
    pub const CHILD_RUN_ERROR: &str = "ChildRunError";
    /// Ours: the journal could not be read or written (retried).
    pub const JOURNAL: &str = "JournalError";
}

/// The step key of the `n`th call (from 1) made without a key:
/// `call:<module>.<workflow>#<n>`.
pub fn auto_call_key(module_id: &str, workflow: &str, n: usize) -> String {
    format!("call:{module_id}.{workflow}#{n}")
}

/// The idempotency key of a call's child trigger, `<run_id>/<key>/<attempt>`:
/// a host that dies between the trigger and journaling the child repeats
/// it inside the stream's duplicate window, and gets the same child run.
pub fn child_idempotency_key(run_id: &str, key: &str, attempt: i64) -> String {
    format!("{run_id}/{key}/{attempt}")
}

/// The fields of a step summary and a step result document.
pub mod field {
    /// The run the step belongs to (indexed in both collections).
    pub const RUN_ID: &str = "run_id";
    /// The step key.
    pub const KEY: &str = "key";
    /// [`super::StepKind`].
    pub const KIND: &str = "kind";
    /// [`super::StepStatus`].
    pub const STATUS: &str = "status";
    /// The step's starts so far, local retries included.
    pub const ATTEMPT: &str = "attempt";
    /// When the latest start began (ISO text).
    pub const STARTED_AT: &str = "started_at";
    /// When it finished (empty while running).
    pub const FINISHED_AT: &str = "finished_at";
    /// Milliseconds from start to finish (0 while running).
    pub const DURATION_MS: &str = "duration_ms";
    /// The error of a failed or cancelled step, at most 2000 characters.
    pub const ERROR: &str = "error";
    /// The run's trigger time: a journal of another trigger of the same run
    /// id (a recreated stream reuses sequences) counts as absent.
    pub const FIRED_AT: &str = "fired_at";
    /// A call's child run: `{module_id, workflow, run_id}`.
    pub const CHILD: &str = "child";
    /// The size of the stored result's JSON.
    pub const RESULT_BYTES: &str = "result_bytes";
    /// The result document's JSON text.
    pub const RESULT_JSON: &str = "result_json";
    /// Ours only, in a SUCCEEDED summary: the claim-check object holding a
    /// result above [`super::MAX_STEP_RESULT_BYTES`] (no result document is
    /// written; a Python host finds none and runs the step again).
    pub const RESULT_CLAIM_CHECK: &str = "result_claim_check";
    /// A child's module (inside [`CHILD`]).
    pub const CHILD_MODULE_ID: &str = "module_id";
    /// A child's workflow (inside [`CHILD`]).
    pub const CHILD_WORKFLOW: &str = "workflow";
    /// A child's run id (inside [`CHILD`]).
    pub const CHILD_RUN_ID: &str = "run_id";

    /// The fields `steps` lists, in the reference's order (never the result).
    pub const SUMMARY: [&str; 10] = [
        KEY,
        KIND,
        STATUS,
        ATTEMPT,
        STARTED_AT,
        FINISHED_AT,
        DURATION_MS,
        ERROR,
        CHILD,
        RESULT_BYTES,
    ];
}

/// The step summaries of `project`: `workflow_steps_<hash(project)[:16]>`.
pub fn steps_collection(project: &str) -> String {
    format!("workflow_steps_{}", &hash(&[project])[..16])
}

/// The step results of `project`: `workflow_results_<hash(project)[:16]>`.
pub fn results_collection(project: &str) -> String {
    format!("workflow_results_{}", &hash(&[project])[..16])
}

/// A step's document id in both collections: `<run_id>#<key>` (job names
/// have no `#`, so the first one splits them).
pub fn step_id(run_id: &str, key: &str) -> String {
    format!("{run_id}#{key}")
}

/// Why a step key is refused, with the reference's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StepKeyError {
    /// The key is empty.
    #[error("A step key is a non-empty string")]
    Empty,
    /// The key holds a control character (it ends up in a message id header).
    #[error("A step key has no control characters")]
    Control,
    /// The key is longer than [`MAX_STEP_KEY_CHARS`].
    #[error("A step key is at most 200 characters")]
    TooLong,
}

/// Checks a step key as the reference does, in its order.
///
/// # Errors
///
/// [`StepKeyError`] for an empty key, a control character (below 0x20 or
/// DEL) or more than [`MAX_STEP_KEY_CHARS`] characters.
pub fn check_step_key(key: &str) -> Result<&str, StepKeyError> {
    if key.is_empty() {
        return Err(StepKeyError::Empty);
    }
    if key
        .chars()
        .any(|c| u32::from(c) < 0x20 || u32::from(c) == 0x7F)
    {
        return Err(StepKeyError::Control);
    }
    if key.chars().count() > MAX_STEP_KEY_CHARS {
        return Err(StepKeyError::TooLong);
    }
    Ok(key)
}

/// The key of item `index` of a fan-out `key`: `key[index]`.
pub fn item_key(key: &str, index: usize) -> String {
    format!("{key}[{index}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collections_are_the_references() {
        assert_eq!(
            steps_collection("default"),
            "workflow_steps_ed954e41fa3f395c"
        );
        assert_eq!(
            results_collection("default"),
            "workflow_results_ed954e41fa3f395c"
        );
        assert_eq!(step_id("flow:3", "fetch[2]"), "flow:3#fetch[2]");
        assert_eq!(item_key("fetch", 2), "fetch[2]");
        assert_eq!(auto_call_key("acme.b", "sum", 2), "call:acme.b.sum#2");
        assert_eq!(child_idempotency_key("flow:3", "k", 1), "flow:3/k/1");
    }

    #[test]
    fn step_keys_are_checked_in_the_references_order() {
        let long = "k".repeat(MAX_STEP_KEY_CHARS);
        let too_long = "é".repeat(MAX_STEP_KEY_CHARS + 1);
        let rows: [(&str, Result<(), StepKeyError>); 7] = [
            ("fetch", Ok(())),
            (&long, Ok(())),
            ("", Err(StepKeyError::Empty)),
            ("a\nb", Err(StepKeyError::Control)),
            ("a\u{7f}", Err(StepKeyError::Control)),
            (&too_long, Err(StepKeyError::TooLong)),
            ("tab\there", Err(StepKeyError::Control)),
        ];
        for (key, expected) in rows {
            assert_eq!(check_step_key(key).map(|_| ()), expected, "{key:?}");
        }
        assert_eq!(
            StepKeyError::TooLong.to_string(),
            format!("A step key is at most {MAX_STEP_KEY_CHARS} characters")
        );
    }

    #[test]
    fn step_statuses_round_trip() {
        for status in StepStatus::ALL {
            assert_eq!(StepStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(StepStatus::parse("QUEUED"), None);
        assert_eq!(StepKind::Call.as_str(), "call");
    }
}
