//! The run record's codec: what the host's decisions read of a stored
//! record ([`Recorded`]: every field they look at, typed, read in one place,
//! so no decision spells a field's name or its default) and the record an
//! attempt's start writes ([`Started`], the reference's fields). The record
//! itself stays a document: fields this version does not know (a newer
//! peer's) are kept as they are.

use abi_document_model::{Data, Value};
use abi_wire::jobs::{HANDED_BACK, RunStatus, field};

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
    /// The record's fields. Listed in key order, the map's own: collected,
    /// they are then checked in order once rather than sorted.
    pub(super) fn into_data(self) -> Data {
        let text = |v: &str| Value::String(v.to_owned());
        [
            (field::ATTEMPT, Value::Int(self.attempt)),
            (field::ERROR, text("")),
            (field::FIRED_AT, text(self.fired_at)),
            (field::HEARTBEAT_AT, text(self.started_at)),
            (field::INSTANCE, text(self.instance)),
            (field::JOB, text(self.job)),
            (field::MAX_ATTEMPTS, Value::Int(self.max_attempts)),
            (field::MODULE_ID, text(self.module_id)),
            (field::PAYLOAD, self.payload),
            (field::RUN_ID, text(self.run_id)),
            (
                field::SEQUENCE,
                Value::Int(i64::try_from(self.sequence).unwrap_or(i64::MAX)),
            ),
            (field::STARTED_AT, text(self.started_at)),
            (field::STATUS, text(RunStatus::Running.as_str())),
            (field::TRACE_ID, text("")),
            (field::TRIGGER, self.trigger),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// A write over an existing record: the fields it sets, every other field
/// kept as stored. Each variant is one of the host's writes, field for field
/// the reference's where it has the same write.
#[derive(Debug, Clone)]
pub(super) enum Change<'a> {
    /// A RUNNING attempt's heartbeat, with its logs so far.
    Heartbeat { logs: Value, at: &'a str },
    /// An attempt handed back by a host's shutdown: RETRYING now, its attempt
    /// not spent (`attempt` is the count before it started).
    HandedBack {
        attempt: i64,
        logs: Value,
        at: &'a str,
        /// Whether any host's upkeep may re-drive it (the record names no
        /// owner), as when this host re-drove it itself.
        release_owner: bool,
    },
    /// An attempt's end, as [`super::machine::on_outcome`] decided it.
    Ended(Ended<'a>),
    /// A RETRYING run cancelled before its next attempt.
    Cancelled { at: &'a str },
    /// A run whose owner was lost, failed by the reaper with `error`.
    Reaped { error: &'a str, at: &'a str },
    /// A RETRYING run taken over by host `owner`, due now.
    RetryTakenOver { owner: &'a str, at: &'a str },
}

/// What an ended attempt writes.
#[derive(Debug, Clone)]
pub(super) struct Ended<'a> {
    pub(super) status: RunStatus,
    pub(super) error: &'a str,
    pub(super) logs: Value,
    /// When RETRYING: when the next attempt is due and the host re-driving it.
    pub(super) retry: Option<(String, &'a str)>,
    /// When terminal: the time it ended.
    pub(super) finished_at: Option<&'a str>,
    /// When SUCCEEDED or SKIPPED: the stored result (a preview past the cap).
    pub(super) result: Option<Value>,
    /// When SKIPPED: the reason the handler gave.
    pub(super) skip_reason: Option<&'a str>,
}

impl Change<'_> {
    /// The fields this write sets.
    pub(super) fn fields(self) -> Data {
        let mut data = Data::new();
        self.apply(&mut data);
        data
    }

    /// Sets this write's fields over `data`.
    pub(super) fn apply(self, data: &mut Data) {
        let mut set = |key: &str, value: Value| {
            data.insert(key.to_owned(), value);
        };
        let text = |v: &str| Value::String(v.to_owned());
        match self {
            Change::Heartbeat { logs, at } => {
                set(field::LOGS, logs);
                set(field::HEARTBEAT_AT, text(at));
            }
            Change::HandedBack {
                attempt,
                logs,
                at,
                release_owner,
            } => {
                set(field::STATUS, text(RunStatus::Retrying.as_str()));
                set(field::ATTEMPT, Value::Int(attempt));
                set(field::ERROR, text(HANDED_BACK));
                set(field::RETRY_AT, text(at));
                set(field::HEARTBEAT_AT, text(at));
                set(field::LOGS, logs);
                if release_owner {
                    set(field::RETRY_OWNER, text(""));
                }
            }
            Change::Ended(end) => {
                set(field::STATUS, text(end.status.as_str()));
                set(field::LOGS, end.logs);
                set(field::ERROR, text(end.error));
                if let Some((due, owner)) = end.retry {
                    set(field::RETRY_AT, Value::String(due));
                    set(field::RETRY_OWNER, text(owner));
                }
                if let Some(at) = end.finished_at {
                    set(field::FINISHED_AT, text(at));
                }
                if let Some(result) = end.result {
                    set(field::RESULT, result);
                }
                if let Some(reason) = end.skip_reason {
                    set(field::SKIP_REASON, text(reason));
                }
            }
            Change::Cancelled { at } => {
                set(field::STATUS, text(RunStatus::Cancelled.as_str()));
                set(field::FINISHED_AT, text(at));
            }
            Change::Reaped { error, at } => {
                set(field::STATUS, text(RunStatus::Failed.as_str()));
                set(field::ERROR, text(error));
                set(field::FINISHED_AT, text(at));
            }
            Change::RetryTakenOver { owner, at } => {
                set(field::STATUS, text(RunStatus::Retrying.as_str()));
                set(field::RETRY_OWNER, text(owner));
                set(field::RETRY_AT, text(at));
            }
        }
    }
}

/// The record a cancel writes for a run that never started (its trigger
/// still queued): CANCELLED at attempt 0.
#[derive(Debug, Clone)]
pub(super) struct CancelledQueued<'a> {
    pub(super) job: &'a str,
    pub(super) run_id: &'a str,
    pub(super) module_id: &'a str,
    pub(super) max_attempts: i64,
    pub(super) instance: &'a str,
    pub(super) sequence: u64,
    pub(super) at: &'a str,
}

impl CancelledQueued<'_> {
    /// The record's fields.
    pub(super) fn to_data(&self) -> Data {
        let text = |v: &str| Value::String(v.to_owned());
        [
            (field::CREATED_AT, text(self.at)),
            (field::JOB, text(self.job)),
            (field::RUN_ID, text(self.run_id)),
            (field::MODULE_ID, text(self.module_id)),
            (field::STATUS, text(RunStatus::Cancelled.as_str())),
            (field::ATTEMPT, Value::Int(0)),
            (field::MAX_ATTEMPTS, Value::Int(self.max_attempts)),
            (field::INSTANCE, text(self.instance)),
            (
                field::SEQUENCE,
                Value::Int(i64::try_from(self.sequence).unwrap_or(i64::MAX)),
            ),
            (field::ERROR, text("")),
            (field::FINISHED_AT, text(self.at)),
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
        let data = start.into_data();
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

    fn keys(change: Change<'_>) -> Vec<String> {
        change.fields().into_keys().collect()
    }

    #[test]
    fn each_write_sets_exactly_its_fields() {
        let logs = || Value::List(vec![]);
        let ended = |status, retry: bool, terminal: bool| Ended {
            status,
            error: "",
            logs: logs(),
            retry: retry.then(|| ("R".to_owned(), "me")),
            finished_at: terminal.then_some("F"),
            result: None,
            skip_reason: None,
        };
        let table: [(Change<'_>, &[&str]); 8] = [
            (
                Change::Heartbeat {
                    logs: logs(),
                    at: "T",
                },
                &["heartbeat_at", "logs"],
            ),
            (
                Change::HandedBack {
                    attempt: 1,
                    logs: logs(),
                    at: "T",
                    release_owner: false,
                },
                &[
                    "attempt",
                    "error",
                    "heartbeat_at",
                    "logs",
                    "retry_at",
                    "status",
                ],
            ),
            (
                Change::HandedBack {
                    attempt: 1,
                    logs: logs(),
                    at: "T",
                    release_owner: true,
                },
                &[
                    "attempt",
                    "error",
                    "heartbeat_at",
                    "logs",
                    "retry_at",
                    "retry_owner",
                    "status",
                ],
            ),
            (
                Change::Ended(ended(RunStatus::Retrying, true, false)),
                &["error", "logs", "retry_at", "retry_owner", "status"],
            ),
            (
                Change::Ended(Ended {
                    result: Some(Value::Int(1)),
                    skip_reason: Some("why"),
                    ..ended(RunStatus::Skipped, false, true)
                }),
                &[
                    "error",
                    "finished_at",
                    "logs",
                    "result",
                    "skip_reason",
                    "status",
                ],
            ),
            (Change::Cancelled { at: "T" }, &["finished_at", "status"]),
            (
                Change::Reaped {
                    error: "lost",
                    at: "T",
                },
                &["error", "finished_at", "status"],
            ),
            (
                Change::RetryTakenOver {
                    owner: "me",
                    at: "T",
                },
                &["retry_at", "retry_owner", "status"],
            ),
        ];
        for (change, want) in table {
            let label = format!("{change:?}");
            assert_eq!(keys(change), want, "{label}");
        }
        let mut data = Data::new();
        data.insert(field::JOB.into(), Value::from("kept"));
        Change::Reaped {
            error: "lost",
            at: "T",
        }
        .apply(&mut data);
        let view = Recorded::of(&data);
        assert_eq!(view.status, Some(RunStatus::Failed));
        assert_eq!(
            data.get(field::JOB),
            Some(&Value::from("kept")),
            "other fields stay"
        );
        let handed = Change::HandedBack {
            attempt: 2,
            logs: logs(),
            at: "T",
            release_owner: true,
        }
        .fields();
        let view = Recorded::of(&handed);
        assert_eq!(
            (view.status, view.attempt),
            (Some(RunStatus::Retrying), Some(2))
        );
        assert_eq!((view.retry_owner, view.retry_due()), (Some(""), "T"));
        assert_eq!(handed.get(field::ERROR), Some(&Value::from(HANDED_BACK)));
        let queued = CancelledQueued {
            job: "j",
            run_id: "j:3",
            module_id: "m",
            max_attempts: 3,
            instance: "i",
            sequence: 3,
            at: "T",
        }
        .to_data();
        let view = Recorded::of(&queued);
        assert_eq!(
            (view.status, view.attempt),
            (Some(RunStatus::Cancelled), Some(0))
        );
        assert_eq!(view.trigger_sequence("j:3"), Some(3));
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
