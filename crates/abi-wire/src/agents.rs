//! The agent contract's names: instance-addressed subjects, record collections, limits.
//!
//! An agent is served on four subjects per instance
//! (`abi.agent.<project>.<instance_id>.<sha256 hex of the name>.v1.<op>`, the
//! reference's `agent_subject`), and keeps one record per invocation, its
//! events' fragments and manifests, and one claim per conversation in the
//! owner module's document namespace, in collections named after the
//! project's [`hash`]. Every key below is the reference's, so a Python host
//! reads what a Rust host stored and the other way round.

use sha2::{Digest as _, Sha256};

pub use crate::jobs::hash;

/// The capability an agent declares to be invocable over NATS.
pub const INVOKE_CAPABILITY: &str = "agent.invoke.v1";
/// The only output format served (events stored apart from the record).
pub const OUTPUT_FORMAT: i32 = 2;
/// Largest request body a host decodes (the reference's 128 KiB).
pub const MAX_REQUEST_BYTES: usize = 128 * 1024;
/// Largest reply a host sends, unless the broker's `max_payload` is lower.
pub const MAX_REPLY_BYTES: usize = 512 * 1024;
/// Largest prompt, in UTF-8 bytes.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
/// Longest thread id, in characters.
pub const MAX_THREAD_ID_CHARS: usize = 256;
/// Longest deadline a submit may ask for.
pub const MAX_DEADLINE_SECS: u32 = 3600;
/// Live runs one reference host accepts at once, all agents together.
pub const MAX_ACTIVE_RUNS: usize = 200;
/// Event data pushed inline up to this (and a quarter of `max_payload`);
/// larger data is only announced by its part count.
pub const INLINE_UPDATE_BYTES: usize = 32 * 1024;
/// The error message of a run stopped by a cancel or a deadline.
pub const STOPPED_MESSAGE: &str = "Execution stopped; completed side effects are not undone";
/// The error message of a run whose handler failed.
pub const FAILED_MESSAGE: &str = "Agent execution failed; inspect provider logs";
/// Largest run record (its JSON text).
pub const MAX_RECORD_BYTES: usize = 384 * 1024;
/// Size of one stored fragment of event data or of the result.
pub const PART_BYTES: usize = 8192;
/// Longest event name.
pub const MAX_EVENT_NAME_CHARS: usize = 64;
/// Most events a status reply lists after its cursor.
pub const MAX_VIEW_EVENTS: usize = 64;
/// How long discovery's answer for (caller token, agent) is reused for
/// status, event and cancel calls (never past the token's expiry).
pub const AUTHORIZATION_SECS: f64 = 5.0;
/// Most cached authorizations.
pub const MAX_AUTHORIZATIONS: usize = 1024;
/// How long a host keeps the owner membership it read from discovery.
pub const MEMBERSHIP_SECS: f64 = 1.0;
/// A streamed run (or one without a deadline) idle this long is timed out.
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 300;
/// The deadline `invoke`/`stream` ask for when the caller sets no timeout.
pub const DEFAULT_DEADLINE_SECS: u32 = 300;
/// A watching caller reads Status after this long without a pushed update.
pub const QUIET_SECS: u64 = 5;
/// The data of the `done` event the host adds.
pub const DONE_DATA: &str = "[DONE]";
/// The event name of a message (joined into a stream's result).
pub const MESSAGE_EVENT: &str = "message";
/// The event name that ends a stream.
pub const DONE_EVENT: &str = "done";
/// The two submit modes.
pub const MODES: [&str; 2] = ["invoke", "stream"];
crate::run_status::run_status! {
    /// The status of an agent run (record field `status`).
    pub enum RunStatus {
        /// Stored, not started yet.
        Accepted => "ACCEPTED", false,
        /// The handler is going.
        Running => "RUNNING", false,
        /// A cancel or the deadline arrived; the handler is being stopped.
        Cancelling => "CANCELLING", false,
        /// The handler returned its result.
        Succeeded => "SUCCEEDED", true,
        /// The handler failed (`error_code` says how).
        Failed => "FAILED", true,
        /// A caller cancelled the run.
        Cancelled => "CANCELLED", true,
        /// The run's deadline passed.
        TimedOut => "TIMED_OUT", true,
    }
}

/// The statuses after which a run never changes.
pub const TERMINAL_STATUSES: [&str; 4] = [
    RunStatus::Succeeded.as_str(),
    RunStatus::Failed.as_str(),
    RunStatus::Cancelled.as_str(),
    RunStatus::TimedOut.as_str(),
];
/// Every status a run record holds; `FINALIZING` is only shown (terminal,
/// still in the owner's memory).
pub const RUN_STATUSES: [&str; 7] = [
    RunStatus::Accepted.as_str(),
    RunStatus::Running.as_str(),
    RunStatus::Cancelling.as_str(),
    RunStatus::Succeeded.as_str(),
    RunStatus::Failed.as_str(),
    RunStatus::Cancelled.as_str(),
    RunStatus::TimedOut.as_str(),
];
/// The status shown for a finished run still in its owner's memory.
pub const FINALIZING: &str = "FINALIZING";

/// The fields of the documents an agent host keeps, as the reference
/// names them: the run record, the conversation claim, an event's
/// manifest and its fragments.
pub mod field {
    /// Run record: the agent's name.
    pub const AGENT_NAME: &str = "agent_name";
    /// Run record: the caller's invocation id.
    pub const INVOCATION_ID: &str = "invocation_id";
    /// Run record: the conversation the caller named.
    pub const THREAD_ID: &str = "thread_id";
    /// Run record: the identity that submitted.
    pub const CALLER: &str = "caller";
    /// Run record: what makes a resubmission the same submission.
    pub const FINGERPRINT: &str = "fingerprint";
    /// Run record and claim: the instance that owns the run.
    pub const OWNER: &str = "owner";
    /// Run record: the [`super::RunStatus`].
    pub const STATUS: &str = "status";
    /// Run record: events stored inline (older records).
    pub const EVENTS: &str = "events";
    /// Run record: the output format the run answers in.
    pub const OUTPUT_FORMAT: &str = "output_format";
    /// Run record: the last event's sequence.
    pub const LAST_SEQUENCE: &str = "last_sequence";
    /// Run record: how many fragments the result has.
    pub const RESULT_PARTS: &str = "result_parts";
    /// Run record: the result, when inline.
    pub const RESULT: &str = "result";
    /// Run record: why the run failed (an error code).
    pub const ERROR_CODE: &str = "error_code";
    /// Run record: the failure's message.
    pub const ERROR_MESSAGE: &str = "error_message";
    /// Run record: when it was submitted (ISO text).
    pub const SUBMITTED_AT: &str = "submitted_at";
    /// Run record: when it ended (ISO text).
    pub const FINISHED_AT: &str = "finished_at";
    /// Run record: the trace it belongs to.
    pub const TRACE_ID: &str = "trace_id";
    /// Claim: the run record the conversation is claimed by.
    pub const INVOCATION_KEY: &str = "invocation_key";
    /// Manifest: the event's name.
    pub const EVENT: &str = "event";
    /// Manifest: how many fragments its data has.
    pub const PARTS: &str = "parts";
    /// Manifest: whether the event came from a chat source.
    pub const CHAT_SOURCE: &str = "chat_source";
    /// Fragment: its bytes.
    pub const DATA: &str = "data";
}

crate::rpc::reply!(
    abi_proto::agent::v1::SubmitResponse,
    abi_proto::agent::v1::StatusResponse,
    abi_proto::agent::v1::CancelResponse,
    abi_proto::agent::v1::EventResponse,
);

/// Whether `status` is terminal.
pub fn is_terminal(status: &str) -> bool {
    RunStatus::parse(status).is_some_and(RunStatus::is_terminal)
}

/// One of the four operations of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Start (or rejoin) an invocation.
    Submit,
    /// Read an invocation's state and events.
    Status,
    /// Stop an invocation.
    Cancel,
    /// Read one stored fragment.
    Event,
}

impl Operation {
    /// Every operation, in the reference's subscription order.
    pub const ALL: [Operation; 4] = [
        Operation::Submit,
        Operation::Status,
        Operation::Cancel,
        Operation::Event,
    ];

    /// The subject's last token.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Submit => "submit",
            Operation::Status => "status",
            Operation::Cancel => "cancel",
            Operation::Event => "event",
        }
    }
}

/// The subject of `operation` of agent `name` on one instance.
pub fn subject(project: &str, instance_id: &str, name: &str, operation: Operation) -> String {
    let digest = hex::encode(Sha256::digest(name.as_bytes()));
    format!(
        "abi.agent.{project}.{instance_id}.{digest}.v1.{}",
        operation.as_str()
    )
}

/// Every submit to `project`'s agents, as a wildcard (an observer's
/// subscription: the console refreshes agent runs as they are submitted).
pub fn all_submits(project: &str) -> String {
    format!("abi.agent.{project}.*.*.v1.{}", Operation::Submit.as_str())
}

/// The instance id of a [`subject`] of `project`.
pub fn instance_of_subject<'a>(project: &str, subject: &'a str) -> Option<&'a str> {
    let rest = subject.strip_prefix(&format!("abi.agent.{project}."))?;
    rest.split('.').next().filter(|i| !i.is_empty())
}

fn suffix(project: &str) -> String {
    hash(&[project])[..16].to_owned()
}

/// Where agent hosts keep one record per invocation.
pub fn runs_collection(project: &str) -> String {
    format!("agent_runs_{}", suffix(project))
}

/// Where invocations' event fragments and manifests are kept.
pub fn events_collection(project: &str) -> String {
    format!("agent_events_{}", suffix(project))
}

/// Where conversation claims are kept.
pub fn claims_collection(project: &str) -> String {
    format!("agent_claims_{}", suffix(project))
}

/// An invocation's record id.
pub fn invocation_key(name: &str, invocation_id: &str) -> String {
    hash(&[name, invocation_id])
}

/// A conversation's claim id.
pub fn claim_key(name: &str, caller: &str, thread_id: &str) -> String {
    hash(&[name, caller, thread_id])
}

/// What makes a resubmission the same submission.
pub fn fingerprint(
    caller: &str,
    thread_id: &str,
    prompt: &str,
    mode: &str,
    deadline_secs: u32,
) -> String {
    hash(&[caller, thread_id, prompt, mode, &deadline_secs.to_string()])
}

/// The thread id a handler sees: the conversation, scoped to project,
/// module, agent and caller.
pub fn context_thread_id(
    project: &str,
    module_id: &str,
    name: &str,
    caller: &str,
    thread_id: &str,
) -> String {
    hash(&[project, module_id, name, caller, thread_id])
}

/// The id of an event's manifest (`sequence` 0 is the result).
pub fn manifest_id(key: &str, sequence: u64) -> String {
    format!("{key}:{sequence}")
}

/// The id of one fragment of an event's data.
pub fn part_id(key: &str, sequence: u64, part: u64) -> String {
    format!("{key}:{sequence}:{part}")
}

/// An invocation id: `[A-Za-z0-9_.:-]{1,128}`.
pub fn is_invocation_id(value: &str) -> bool {
    (1..=128).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

/// An updates inbox: `(_INBOX|_INBOX_MODULES)\.[A-Za-z0-9_.-]{1,240}`.
pub fn is_updates_inbox(value: &str) -> bool {
    // `_INBOX_MODULES.` first: `_INBOX` would also match its prefix.
    let rest = value
        .strip_prefix("_INBOX_MODULES.")
        .or_else(|| value.strip_prefix("_INBOX."));
    let tail_ok = |t: &str| {
        (1..=240).contains(&t.len())
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    };
    rest.is_some_and(tail_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Golden values printed by the reference (`naas_abi_sdk.agent.agent_subject`,
    // `agent_host._hash`, `agent_runs_collection`, `agent_events_collection`).
    #[test]
    fn names_match_the_reference() {
        assert_eq!(
            subject("default", "inst-1", "echo", Operation::Submit),
            "abi.agent.default.inst-1.092c79e8f80e559e404bcf660c48f3522b67aba9ff1484b0367e1a4ddef7431d.v1.submit"
        );
        assert_eq!(
            subject("p", "i_2", "écho agent", Operation::Event),
            "abi.agent.p.i_2.504e5675b8ae460848e08134699d307992505e5228da5d83184eac28096a9140.v1.event"
        );
        assert_eq!(runs_collection("default"), "agent_runs_ed954e41fa3f395c");
        let submit = subject("default", "inst-1", "echo", Operation::Submit);
        assert_eq!(instance_of_subject("default", &submit), Some("inst-1"));
        assert_eq!(all_submits("default"), "abi.agent.default.*.*.v1.submit");
        assert_eq!(
            events_collection("default"),
            "agent_events_ed954e41fa3f395c"
        );
        assert_eq!(
            claims_collection("default"),
            "agent_claims_ed954e41fa3f395c"
        );
        assert_eq!(
            invocation_key("echo", "inv-1"),
            "0b6e76199cc35de5c238193882275cc02be487af1df6623bfb24f28a6acde39e"
        );
        assert_eq!(
            fingerprint("caller", "t1", "héllo \"x\"", "stream", 300),
            "b092a8ce3685e8028b445b205056e727d5a3add30bbbd7eceea8ff408f2d45f0"
        );
        assert_eq!(
            context_thread_id("default", "acme.billing", "echo", "caller", "t1"),
            "d814aca0c7ceff9f2b7d4610a54b7b3295a482b2c078d91334c02cefa25bc040"
        );
        assert_eq!(
            claim_key("echo", "caller", "t1"),
            "64314c6aa93c928a52b60ddc95566e2f785d3f12f5d34c8135694c510fdf8973"
        );
        assert_eq!(part_id("k", 3, 1), "k:3:1");
        assert_eq!(manifest_id("k", 0), "k:0");
    }

    #[test]
    fn identifier_patterns_are_the_reference_regexes() {
        assert!(is_invocation_id("a.b:c-d_9"));
        assert!(!is_invocation_id(""));
        assert!(!is_invocation_id("a b"));
        assert!(!is_invocation_id(&"x".repeat(129)));
        assert!(is_updates_inbox("_INBOX.abc.def"));
        assert!(is_updates_inbox("_INBOX_MODULES.x-1"));
        assert!(!is_updates_inbox("_INBOX."));
        assert!(!is_updates_inbox("abi.agent.x"));
        assert!(!is_updates_inbox("_INBOX.a*"));
        assert!(!is_updates_inbox(&format!("_INBOX.{}", "a".repeat(241))));
    }
}
