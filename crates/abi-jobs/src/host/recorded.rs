//! The run record's codec: what the host's decisions read of a stored
//! record ([`Recorded`]: every field they look at, typed, read in one place,
//! so no decision spells a field's name or its default) and the record an
//! attempt's start writes ([`Started`], the reference's fields). The record
//! itself stays a document: fields this version does not know (a newer
//! peer's) are kept as they are.

use abi_document_model::{Data, Value};
use abi_wire::jobs::{RunStatus, field};

/// The record an attempt writes when it starts (RUNNING), field for field
/// the reference's.
#[derive(Debug, Clone)]
pub(super) struct Started<'a> {
    pub(super) job: &'a str,
    pub(super) run_id: &'a str,
    pub(super) module_id: &'a str,
    pub(super) attempt: i64,
    pub(super) max_attempts: i64,
    /// `{"kind"[, "scheduler"]}` as a document value.
    pub(super) trigger: Value,
    pub(super) payload: Value,
    pub(super) instance: &'a str,
    pub(super) sequence: u64,
    pub(super) fired_at: &'a str,
    /// Also the first heartbeat.
    pub(super) started_at: &'a str,
}

impl Started<'_> {
    /// The record's fields.
    pub(super) fn to_data(&self) -> Data {
        let text = |v: &str| Value::String(v.to_owned());
        [
            (field::JOB, text(self.job)),
            (field::RUN_ID, text(self.run_id)),
            (field::MODULE_ID, text(self.module_id)),
            (field::STATUS, text(RunStatus::Running.as_str())),
            (field::ATTEMPT, Value::Int(self.attempt)),
            (field::MAX_ATTEMPTS, Value::Int(self.max_attempts)),
            (field::TRIGGER, self.trigger.clone()),
            (field::PAYLOAD, self.payload.clone()),
            (field::INSTANCE, text(self.instance)),
            (
                field::SEQUENCE,
                Value::Int(i64::try_from(self.sequence).unwrap_or(i64::MAX)),
            ),
            (field::FIRED_AT, text(self.fired_at)),
            (field::STARTED_AT, text(self.started_at)),
            (field::HEARTBEAT_AT, text(self.started_at)),
            (field::TRACE_ID, text("")),
            (field::ERROR, text("")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// The fields of a run record a decision reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Recorded<'a> {
    /// The status; `None` when absent or unknown to this version.
    pub(super) status: Option<RunStatus>,
    /// The attempts started so far, when the record says.
    pub(super) attempt: Option<i64>,
    /// The job's attempts when the run was started, when the record says.
    pub(super) max_attempts: Option<i64>,
    /// The trigger's `fired_at` ("" when absent).
    pub(super) fired_at: &'a str,
    /// When the latest attempt started ("" when absent).
    pub(super) started_at: &'a str,
    /// The latest attempt's last heartbeat ("" when absent).
    pub(super) heartbeat_at: &'a str,
    /// When a RETRYING run's next attempt is due ("" when absent).
    pub(super) retry_at: &'a str,
    /// Who re-drives a RETRYING run ("" for any host); `None` when the record
    /// has no such field (a Python host's records do not).
    pub(super) retry_owner: Option<&'a str>,
    /// The trigger's stream sequence, when the record says.
    pub(super) sequence: Option<i64>,
}

fn text<'a>(data: &'a Data, key: &str) -> Option<&'a str> {
    match data.get(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn int(data: &Data, key: &str) -> Option<i64> {
    match data.get(key) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    }
}

impl<'a> Recorded<'a> {
    /// The view of `data`.
    pub(super) fn of(data: &'a Data) -> Self {
        Self {
            status: text(data, field::STATUS).and_then(RunStatus::parse),
            attempt: int(data, field::ATTEMPT),
            max_attempts: int(data, field::MAX_ATTEMPTS),
            fired_at: text(data, field::FIRED_AT).unwrap_or(""),
            started_at: text(data, field::STARTED_AT).unwrap_or(""),
            heartbeat_at: text(data, field::HEARTBEAT_AT).unwrap_or(""),
            retry_at: text(data, field::RETRY_AT).unwrap_or(""),
            retry_owner: text(data, field::RETRY_OWNER),
            sequence: int(data, field::SEQUENCE),
        }
    }

    /// When the run's owner last proved alive: its heartbeat, else its
    /// start ("" when neither).
    pub(super) fn last_seen(&self) -> &'a str {
        match self.heartbeat_at {
            "" => self.started_at,
            seen => seen,
        }
    }

    /// The trigger's stream sequence: the record's, else the one in the run
    /// id `run_id` (`<job>:<sequence>`).
    pub(super) fn trigger_sequence(&self, run_id: &str) -> Option<u64> {
        match self.sequence {
            Some(n) if n > 0 => u64::try_from(n).ok(),
            _ => abi_wire::jobs::parse_run_id(run_id).map(|(_, sequence)| sequence),
        }
    }

    /// When a retry is due: its `retry_at`, else when it was last seen.
    pub(super) fn retry_due(&self) -> &'a str {
        match self.retry_at {
            "" => self.last_seen(),
            due => due,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_writes_the_references_fields_and_reads_back() {
        let start = Started {
            job: "ingest",
            run_id: "ingest:7",
            module_id: "acme",
            attempt: 2,
            max_attempts: 3,
            trigger: Value::Object(Data::new()),
            payload: Value::Object(Data::new()),
            instance: "rust-1",
            sequence: 7,
            fired_at: "F",
            started_at: "S",
        };
        let data = start.to_data();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "attempt",
                "error",
                "fired_at",
                "heartbeat_at",
                "instance",
                "job",
                "max_attempts",
                "module_id",
                "payload",
                "run_id",
                "sequence",
                "started_at",
                "status",
                "trace_id",
                "trigger",
            ]
        );
        let view = Recorded::of(&data);
        assert_eq!(view.status, Some(RunStatus::Running));
        assert_eq!((view.attempt, view.max_attempts), (Some(2), Some(3)));
        assert_eq!((view.fired_at, view.last_seen()), ("F", "S"));
        assert_eq!(view.trigger_sequence("ingest:1"), Some(7));
        assert_eq!(view.retry_owner, None, "a start names no retry owner");
    }

    #[test]
    fn a_record_reads_with_the_defaults_the_decisions_expect() {
        let mut data = Data::new();
        assert_eq!(
            Recorded::of(&data),
            Recorded {
                status: None,
                attempt: None,
                max_attempts: None,
                fired_at: "",
                started_at: "",
                heartbeat_at: "",
                retry_at: "",
                retry_owner: None,
                sequence: None,
            }
        );
        for (k, v) in [
            (field::STATUS, Value::from("RETRYING")),
            (field::ATTEMPT, Value::Int(2)),
            (field::STARTED_AT, Value::from("T1")),
            (field::RETRY_OWNER, Value::from("")),
            (field::SEQUENCE, Value::Int(9)),
            (field::MAX_ATTEMPTS, Value::from("3")),
        ] {
            data.insert(k.into(), v);
        }
        let view = Recorded::of(&data);
        assert_eq!(view.status, Some(RunStatus::Retrying));
        assert_eq!(view.attempt, Some(2));
        assert_eq!(view.max_attempts, None, "a string is no count");
        assert_eq!(view.retry_owner, Some(""), "present and empty: any host");
        assert_eq!(view.sequence, Some(9));
        assert_eq!(view.trigger_sequence("j:4"), Some(9), "the record's");
        assert_eq!(Recorded::of(&Data::new()).trigger_sequence("j:4"), Some(4));
        assert_eq!(view.last_seen(), "T1", "no heartbeat: the start");
        assert_eq!(view.retry_due(), "T1", "no retry_at: when last seen");
        data.insert(field::STATUS.into(), Value::from("SOMETHING_NEW"));
        assert_eq!(Recorded::of(&data).status, None);
    }
}
