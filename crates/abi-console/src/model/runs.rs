//! Rows of the run lists: a job run or an agent run as a line of a table
//! (status, attempt, when, how long, the first line of its error), from
//! its stored record. Pure.

use abi_wire::jobs::{self, RunStatus};
use serde::Serialize;
use serde_json::Value;

/// A job run as a row.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RunRow {
    /// `<job>:<sequence>`.
    pub run_id: String,
    /// Its status.
    pub status: String,
    /// The attempt the record describes.
    pub attempt: i64,
    /// The job's `max_attempts` as recorded.
    pub max_attempts: i64,
    /// What triggered it: `manual`, `schedule`, `event`.
    pub trigger: String,
    /// When the attempt started (ISO 8601), empty before.
    pub started_at: String,
    /// When it ended, empty before.
    pub finished_at: String,
    /// Seconds from start to end (or to `now` while it runs).
    pub duration_secs: Option<f64>,
    /// The instance that ran (or runs) it.
    pub instance: String,
    /// The first line of its error.
    pub error: String,
    /// Whether it ended badly (FAILED, TIMED_OUT): shown highlighted.
    pub failed: bool,
    /// Whether it ended (its status never changes again).
    pub ended: bool,
}

impl RunRow {
    /// The row of a run record (its JSON), with `now` (seconds since the
    /// Unix epoch) for a run still going.
    pub fn from_record(record: &Value, now: f64) -> Self {
        let text = |key: &str| text(record, key);
        let int = |key: &str| record.get(key).and_then(Value::as_i64).unwrap_or(0);
        let status = text(jobs::field::STATUS);
        let started_at = text(jobs::field::STARTED_AT);
        let finished_at = text(jobs::field::FINISHED_AT);
        let ended = RunStatus::parse(&status).is_some_and(RunStatus::is_terminal);
        let duration_secs = epoch(&started_at).and_then(|start| {
            let end = if ended { epoch(&finished_at)? } else { now };
            Some(((end - start) * 1000.0).round() / 1000.0)
        });
        Self {
            run_id: text(jobs::field::RUN_ID),
            failed: matches!(
                RunStatus::parse(&status),
                Some(RunStatus::Failed | RunStatus::TimedOut)
            ),
            status,
            attempt: int(jobs::field::ATTEMPT),
            max_attempts: int(jobs::field::MAX_ATTEMPTS),
            trigger: record
                .get(jobs::field::TRIGGER)
                .and_then(|t| t.get(jobs::field::TRIGGER_KIND))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            started_at,
            finished_at,
            duration_secs,
            instance: text(jobs::field::INSTANCE),
            error: text(jobs::field::ERROR)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned(),
            ended,
        }
    }
}

/// An agent run as a row.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AgentRunRow {
    /// The invocation id.
    pub invocation_id: String,
    /// The agent.
    pub agent: String,
    /// Its status.
    pub status: String,
    /// Who submitted it.
    pub caller: String,
    /// The instance that runs it.
    pub owner: String,
    /// When it was submitted.
    pub submitted_at: String,
    /// When it ended.
    pub finished_at: String,
    /// The last event's sequence number.
    pub last_sequence: i64,
    /// The error code, when it failed.
    pub error_code: String,
    /// Whether it ended badly.
    pub failed: bool,
    /// Whether it ended.
    pub ended: bool,
}

impl AgentRunRow {
    /// The row of an agent run record (its JSON).
    pub fn from_record(record: &Value) -> Self {
        use abi_wire::agents::{RunStatus as AgentStatus, field};
        let text = |key: &str| text(record, key);
        let status = text(field::STATUS);
        Self {
            invocation_id: text(field::INVOCATION_ID),
            agent: text(field::AGENT_NAME),
            failed: matches!(
                AgentStatus::parse(&status),
                Some(AgentStatus::Failed | AgentStatus::TimedOut)
            ),
            ended: abi_wire::agents::is_terminal(&status),
            status,
            caller: text(field::CALLER),
            owner: text(field::OWNER),
            submitted_at: text(field::SUBMITTED_AT),
            finished_at: text(field::FINISHED_AT),
            last_sequence: record
                .get(field::LAST_SEQUENCE)
                .and_then(Value::as_i64)
                .unwrap_or(0),
            error_code: text(field::ERROR_CODE),
        }
    }
}

/// A text field of a record, empty when absent.
fn text(record: &Value, key: &str) -> String {
    record
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// An ISO 8601 time as seconds since the Unix epoch.
fn epoch(text: &str) -> Option<f64> {
    let at: jiff::Timestamp = text.parse().ok()?;
    Some(at.as_millisecond() as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_row_says_how_long_and_whether_it_failed() {
        type Case<'a> = (&'a str, Value, Option<f64>, bool, &'a str);
        let cases: [Case; 3] = [
            (
                "ended",
                json!({"run_id": "ingest:3", "status": RunStatus::Failed.as_str(), "attempt": 2,
                       "max_attempts": 3, "started_at": "2026-12-05T10:00:00+00:00",
                       "finished_at": "2026-12-05T10:00:01.5+00:00",
                       "error": "boom\nTraceback ...", "trigger": {"kind": jobs::MANUAL_TRIGGER}}),
                Some(1.5),
                true,
                "boom",
            ),
            (
                "running",
                json!({"run_id": "ingest:4", "status": RunStatus::Running.as_str(),
                       "started_at": "2026-12-05T10:00:00Z"}),
                Some(10.0),
                false,
                "",
            ),
            (
                "queued",
                json!({"run_id": "ingest:5", "status": RunStatus::Queued.as_str()}),
                None,
                false,
                "",
            ),
        ];
        let now = 1_796_464_810.0; // 2026-12-05T10:00:10Z
        for (what, record, duration, failed, error) in &cases {
            let row = RunRow::from_record(record, now);
            assert_eq!(row.duration_secs, *duration, "{what}");
            assert_eq!(row.failed, *failed, "{what}");
            assert_eq!(row.error, *error, "{what}");
        }
        let ended = RunRow::from_record(&cases[0].1, now);
        assert_eq!(
            (ended.attempt, ended.max_attempts, ended.trigger.as_str()),
            (2, 3, jobs::MANUAL_TRIGGER)
        );
    }

    #[test]
    fn an_agent_row_reads_the_reference_fields() {
        use abi_wire::agents::{RunStatus as AgentStatus, field};
        let row = AgentRunRow::from_record(&json!({
            field::INVOCATION_ID: "inv-1", field::AGENT_NAME: "echo",
            field::STATUS: AgentStatus::Failed.as_str(), field::CALLER: "api",
            field::OWNER: "i-1", field::LAST_SEQUENCE: 4,
        }));
        assert_eq!(row.agent, "echo");
        assert!(row.failed);
        assert_eq!(row.last_sequence, 4);
    }
}
