//! The agent host's documents, field for field the reference's: run records
//! (`agent_runs_*/<key>`: the ACCEPTED record [`Accepted`], every later write
//! an [`Update`]), event fragments and manifests, and conversation claims.
//! Reads are tolerant as the reference's `dict.get` reads: a missing or
//! mistyped field reads as empty. No other file names a record field.

use abi_document_model::{Data, Datetime, Value};
use abi_wire::ErrorCode;
use abi_wire::agents::{RunStatus, field};

/// A text field, `""` when absent.
pub(crate) fn text(data: &Data, field: &str) -> String {
    match data.get(field) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// An integer field, 0 when absent.
pub(crate) fn int(data: &Data, field: &str) -> i64 {
    match data.get(field) {
        Some(Value::Int(i)) => *i,
        Some(Value::Float(f)) => *f as i64,
        _ => 0,
    }
}

/// The record's status.
pub(crate) fn status(data: &Data) -> String {
    text(data, field::STATUS)
}

/// Ends a record FAILED now with `code` and `message` (what a host writes
/// for a run it settles without running it).
pub(crate) fn fail(data: &mut Data, code: ErrorCode, message: impl Into<String>) {
    data.insert(
        field::STATUS.into(),
        Value::from(RunStatus::Failed.as_str()),
    );
    data.insert(field::ERROR_CODE.into(), Value::from(code.as_str()));
    data.insert(field::ERROR_MESSAGE.into(), Value::String(message.into()));
    data.insert(field::FINISHED_AT.into(), Value::from(now()));
}

/// `last_sequence`, or the length of a legacy record's `events` list.
pub(crate) fn last_sequence(data: &Data) -> i64 {
    match data.get(field::LAST_SEQUENCE) {
        Some(_) => int(data, field::LAST_SEQUENCE),
        None => match data.get(field::EVENTS) {
            Some(Value::List(l)) => l.len() as i64,
            _ => 0,
        },
    }
}

/// About how many bytes `json.dumps` gives for `data` (the record cap).
pub(crate) fn json_size(data: &Data) -> usize {
    data.iter()
        .map(|(k, v)| k.len() + 4 + value_size(v) + 2)
        .sum::<usize>()
        + 2
}

fn value_size(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(_) => 5,
        Value::Int(_) | Value::Float(_) => 20,
        // Non-ASCII goes out as \uXXXX escapes: at most six bytes a char.
        Value::String(s) => s.len() + 2 + s.chars().filter(|c| !c.is_ascii()).count() * 4,
        Value::Bytes(b) => b.len() * 2 + 2,
        Value::Datetime(_) => 34,
        Value::List(l) => l.iter().map(|v| value_size(v) + 2).sum::<usize>() + 2,
        Value::Object(d) => json_size(d),
    }
}

/// Now, as the records spell a time.
pub(crate) fn now() -> String {
    Datetime::now().isoformat()
}

/// The record a submit creates (ACCEPTED), field for field the reference's.
#[derive(Debug, Clone)]
pub(crate) struct Accepted<'a> {
    pub(crate) agent_name: &'a str,
    pub(crate) invocation_id: &'a str,
    pub(crate) thread_id: &'a str,
    pub(crate) caller: &'a str,
    pub(crate) fingerprint: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) submitted_at: &'a str,
}

impl Accepted<'_> {
    /// The record's fields.
    pub(crate) fn to_data(&self) -> Data {
        let text = |v: &str| Value::String(v.to_owned());
        [
            (field::AGENT_NAME, text(self.agent_name)),
            (field::INVOCATION_ID, text(self.invocation_id)),
            (field::THREAD_ID, text(self.thread_id)),
            (field::CALLER, text(self.caller)),
            (field::FINGERPRINT, text(self.fingerprint)),
            (field::OWNER, text(self.owner)),
            (field::STATUS, text(RunStatus::Accepted.as_str())),
            (field::EVENTS, Value::List(Vec::new())),
            (
                field::OUTPUT_FORMAT,
                Value::Int(i64::from(abi_wire::agents::OUTPUT_FORMAT)),
            ),
            (field::LAST_SEQUENCE, Value::Int(0)),
            (field::RESULT_PARTS, Value::Int(0)),
            (field::RESULT, text("")),
            (field::ERROR_CODE, text("")),
            (field::ERROR_MESSAGE, text("")),
            (field::SUBMITTED_AT, text(self.submitted_at)),
            (field::TRACE_ID, text("")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// A write over a run record by its owner: the fields it sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Update<'a> {
    /// A status and nothing else (RUNNING, CANCELLING).
    Status(RunStatus),
    /// The cursor past event `last_sequence`, committed.
    Cursor { last_sequence: i64 },
    /// The run succeeded with its result in `result_parts` fragments (and,
    /// for an invoke, the cursor past its two events).
    Succeeded {
        result_parts: i64,
        last_sequence: Option<i64>,
    },
    /// The run ended `status` with an error code and message.
    Ended {
        status: RunStatus,
        code: &'a str,
        message: &'a str,
    },
}

impl Update<'_> {
    /// The status this write sets, if it sets one.
    pub(crate) fn status(&self) -> Option<RunStatus> {
        match self {
            Update::Status(status) | Update::Ended { status, .. } => Some(*status),
            Update::Succeeded { .. } => Some(RunStatus::Succeeded),
            Update::Cursor { .. } => None,
        }
    }

    /// Sets this write's fields over `data`; a terminal write with no
    /// `finished_at` yet gets `now`.
    pub(crate) fn apply(&self, data: &mut Data, now: impl FnOnce() -> String) {
        let mut set = |key: &str, value: Value| {
            data.insert(key.to_owned(), value);
        };
        match self {
            Update::Status(status) => set(field::STATUS, Value::from(status.as_str())),
            Update::Cursor { last_sequence } => {
                set(field::LAST_SEQUENCE, Value::Int(*last_sequence))
            }
            Update::Succeeded {
                result_parts,
                last_sequence,
            } => {
                if let Some(last) = last_sequence {
                    set(field::LAST_SEQUENCE, Value::Int(*last));
                }
                set(field::STATUS, Value::from(RunStatus::Succeeded.as_str()));
                set(field::RESULT_PARTS, Value::Int(*result_parts));
            }
            Update::Ended {
                status,
                code,
                message,
            } => {
                set(field::STATUS, Value::from(status.as_str()));
                set(field::ERROR_CODE, Value::from(*code));
                set(field::ERROR_MESSAGE, Value::from(*message));
            }
        }
        if self.status().is_some_and(RunStatus::is_terminal)
            && !data.contains_key(field::FINISHED_AT)
        {
            data.insert(field::FINISHED_AT.into(), Value::String(now()));
        }
    }
}

/// An event fragment document: `chunk` of an event's (or the result's) text.
pub(crate) fn fragment(chunk: &[u8]) -> Data {
    Data::from([(field::DATA.to_owned(), Value::Bytes(chunk.to_vec()))])
}

/// The bytes of a fragment document (a text one's UTF-8; none when it holds
/// neither).
pub(crate) fn fragment_bytes(data: &Data) -> Vec<u8> {
    match data.get(field::DATA) {
        Some(Value::Bytes(b)) => b.clone(),
        Some(Value::String(s)) => s.clone().into_bytes(),
        _ => Vec::new(),
    }
}

/// An event's manifest document: its name, its fragment count and, when the
/// event is not a chat source, that flag.
pub(crate) fn manifest(event: &str, parts: i64, chat_source: Option<bool>) -> Data {
    let mut data = Data::from([
        (field::EVENT.to_owned(), Value::from(event)),
        (field::PARTS.to_owned(), Value::Int(parts)),
    ]);
    if chat_source == Some(false) {
        data.insert(field::CHAT_SOURCE.into(), Value::Bool(false));
    }
    data
}

/// A conversation claim document: which invocation holds it, and its owner.
pub(crate) fn claim(invocation_key: &str, owner: &str) -> Data {
    Data::from([
        (
            field::INVOCATION_KEY.to_owned(),
            Value::from(invocation_key),
        ),
        (field::OWNER.to_owned(), Value::from(owner)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_update_sets_its_fields_and_ends_with_a_finish_time() {
        let now = || "NOW".to_owned();
        let table: [(Update<'_>, &[&str]); 5] = [
            (Update::Status(RunStatus::Running), &["status"]),
            (Update::Cursor { last_sequence: 3 }, &["last_sequence"]),
            (
                Update::Succeeded {
                    result_parts: 1,
                    last_sequence: None,
                },
                &["finished_at", "result_parts", "status"],
            ),
            (
                Update::Succeeded {
                    result_parts: 1,
                    last_sequence: Some(2),
                },
                &["finished_at", "last_sequence", "result_parts", "status"],
            ),
            (
                Update::Ended {
                    status: RunStatus::Cancelled,
                    code: RunStatus::Cancelled.as_str(),
                    message: "m",
                },
                &["error_code", "error_message", "finished_at", "status"],
            ),
        ];
        for (update, want) in table {
            let mut data = Data::new();
            update.apply(&mut data, now);
            let keys: Vec<&str> = data.keys().map(String::as_str).collect();
            assert_eq!(keys, want, "{update:?}");
            assert_eq!(
                update.status().map(RunStatus::as_str),
                data.get(field::STATUS).and_then(|v| match v {
                    Value::String(s) => Some(s.as_str()),
                    _ => None,
                }),
            );
        }
        let mut ended = Data::from([(field::FINISHED_AT.to_owned(), Value::from("EARLIER"))]);
        Update::Status(RunStatus::Failed).apply(&mut ended, now);
        assert_eq!(
            text(&ended, field::FINISHED_AT),
            "EARLIER",
            "a finish time stays"
        );
    }

    #[test]
    fn documents_read_back_as_written() {
        let accepted = Accepted {
            agent_name: "a",
            invocation_id: "i",
            thread_id: "t",
            caller: "c",
            fingerprint: "f",
            owner: "o",
            submitted_at: "s",
        }
        .to_data();
        assert_eq!(accepted.len(), 16, "the reference's sixteen fields");
        assert_eq!(status(&accepted), RunStatus::Accepted.as_str());
        assert_eq!(last_sequence(&accepted), 0);
        assert_eq!(fragment_bytes(&fragment(b"xy")), b"xy");
        let textual = Data::from([(field::DATA.to_owned(), Value::from("t"))]);
        assert_eq!(fragment_bytes(&textual), b"t");
        assert_eq!(int(&manifest("message", 2, Some(false)), field::PARTS), 2);
        assert!(!manifest("done", 1, None).contains_key(field::CHAT_SOURCE));
        assert_eq!(text(&claim("k", "o"), field::INVOCATION_KEY), "k");
    }
}
