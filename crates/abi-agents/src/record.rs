//! Reading agent run records (`agent_runs_*/<key>`), tolerant as the
//! reference's `dict.get` reads: a missing or mistyped field reads as empty.

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
    data.insert(
        field::FINISHED_AT.into(),
        Value::from(Datetime::now().isoformat()),
    );
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
