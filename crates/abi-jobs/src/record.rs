//! [`RunRecord`]: a read-only, typed view of one run record (document
//! `job_runs_<h16>/<run_id>` in the job's module namespace).
//!
//! Hosts own these records and add fields over time; this view reads the
//! fields a caller needs and keeps the rest in [`RunRecord::data`], and
//! treats every field as optional.

use abi_document_model::{Data, Value};
use abi_wire::jobs::{RunStatus, field};

/// The status of a run no host has taken yet (never stored).
pub const QUEUED: &str = abi_wire::jobs::QUEUED;

/// One run's record as a host wrote it, or the `QUEUED` placeholder the
/// reference returns while no record exists.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// The run id (`<job>:<sequence>`).
    pub run_id: String,
    /// The job's name.
    pub job: String,
    /// `QUEUED`, `RUNNING`, `RETRYING`, or one of the terminal statuses.
    pub status: String,
    /// The attempt the record describes (0 when absent).
    pub attempt: i64,
    /// The handler's error, empty when none.
    pub error: String,
    /// The handler's log lines.
    pub logs: Vec<String>,
    /// The handler's result as JSON, when it finished with one.
    pub result: Option<serde_json::Value>,
    /// The record's version in the document service (0 for `QUEUED`).
    pub version: i64,
    /// Every stored field, as the host wrote it.
    pub data: Data,
}

impl RunRecord {
    /// The placeholder of a run without a record: status `QUEUED`.
    pub fn queued(run_id: &str, job: &str) -> Self {
        Self {
            run_id: run_id.to_owned(),
            job: job.to_owned(),
            status: QUEUED.to_owned(),
            attempt: 0,
            error: String::new(),
            logs: Vec::new(),
            result: None,
            version: 0,
            data: Data::new(),
        }
    }

    /// The view of a stored record; `run_id` and `job` fill the fields an
    /// incomplete record lacks.
    pub fn from_data(run_id: &str, job: &str, version: i64, data: Data) -> Self {
        let text = |key: &str| match data.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        Self {
            run_id: text(field::RUN_ID).unwrap_or_else(|| run_id.to_owned()),
            job: text(field::JOB).unwrap_or_else(|| job.to_owned()),
            status: text(field::STATUS).unwrap_or_else(|| QUEUED.to_owned()),
            attempt: match data.get(field::ATTEMPT) {
                Some(Value::Int(n)) => *n,
                _ => 0,
            },
            error: text(field::ERROR).unwrap_or_default(),
            logs: match data.get(field::LOGS) {
                Some(Value::List(lines)) => lines
                    .iter()
                    .filter_map(|l| match l {
                        Value::String(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            },
            result: data.get(field::RESULT).map(value_json),
            version,
            data,
        }
    }

    /// The status, typed; `None` for a status this version does not know
    /// (a newer peer's).
    pub fn run_status(&self) -> Option<RunStatus> {
        RunStatus::parse(&self.status)
    }

    /// Whether the run is over (its status never changes again).
    pub fn is_terminal(&self) -> bool {
        self.run_status().is_some_and(RunStatus::is_terminal)
    }

    /// Whether the stored result is the preview a host keeps of a result
    /// past `MAX_RESULT_BYTES` (`{"truncated": true, "preview": ...}`, those
    /// two keys only, as the reference tells it), not the output itself.
    pub fn result_truncated(&self) -> bool {
        match &self.result {
            Some(serde_json::Value::Object(result)) => {
                result.len() == 2
                    && result.get(field::RESULT_TRUNCATED) == Some(&serde_json::Value::Bool(true))
                    && result.contains_key(field::RESULT_PREVIEW)
            }
            _ => false,
        }
    }

    /// The whole record as JSON (the stored fields, or the reference's
    /// `{"run_id", "job", "status": "QUEUED"}` placeholder).
    pub fn to_json(&self) -> serde_json::Value {
        if self.data.is_empty() {
            let placeholder = [
                (field::RUN_ID, &self.run_id),
                (field::JOB, &self.job),
                (field::STATUS, &self.status),
            ];
            return serde_json::Value::Object(
                placeholder
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), serde_json::Value::String(v.clone())))
                    .collect(),
            );
        }
        data_json(&self.data)
    }
}

/// A document's fields as JSON: datetimes as ISO text, bytes as lists of
/// numbers (run records hold neither; this keeps the view total).
pub fn data_json(data: &Data) -> serde_json::Value {
    serde_json::Value::Object(
        data.iter()
            .map(|(k, v)| (k.clone(), value_json(v)))
            .collect(),
    )
}

fn value_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(n) => J::from(*n),
        Value::Float(x) => serde_json::Number::from_f64(*x).map_or(J::Null, J::Number),
        Value::String(s) => J::String(s.clone()),
        Value::Bytes(b) => J::Array(b.iter().map(|x| J::from(*x)).collect()),
        Value::Datetime(d) => J::String(d.isoformat()),
        Value::List(items) => J::Array(items.iter().map(value_json).collect()),
        Value::Object(data) => data_json(data),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_fall_back_and_terminal_statuses_are_known() {
        let mut data = Data::new();
        data.insert("status".into(), Value::from("SUCCEEDED"));
        data.insert(
            "logs".into(),
            Value::List(vec![Value::from("a"), Value::Int(3)]),
        );
        let mut result = Data::new();
        result.insert("n".into(), Value::Int(2));
        data.insert("result".into(), Value::Object(result));
        let record = RunRecord::from_data("ingest:4", "ingest", 3, data);
        assert_eq!(record.run_id, "ingest:4");
        assert_eq!(record.job, "ingest");
        assert!(record.is_terminal());
        assert_eq!(record.logs, ["a"]);
        assert_eq!(record.result, Some(serde_json::json!({"n": 2})));
        assert_eq!(record.to_json()["status"], "SUCCEEDED");

        let queued = RunRecord::queued("ingest:5", "ingest");
        assert!(!queued.is_terminal());
        assert_eq!(
            queued.to_json(),
            serde_json::json!({"run_id": "ingest:5", "job": "ingest", "status": "QUEUED"})
        );
    }

    #[test]
    fn only_the_hosts_preview_counts_as_a_truncated_result() {
        let with = |result: serde_json::Value| RunRecord {
            result: Some(result),
            ..RunRecord::queued("r:1", "r")
        };
        let rows = [
            (serde_json::json!({"truncated": true, "preview": "{"}), true),
            (
                serde_json::json!({"truncated": false, "preview": "{"}),
                false,
            ),
            (serde_json::json!({"truncated": true}), false),
            (
                serde_json::json!({"truncated": true, "preview": "", "n": 1}),
                false,
            ),
            (serde_json::json!([true]), false),
        ];
        for (result, truncated) in rows {
            assert_eq!(
                with(result.clone()).result_truncated(),
                truncated,
                "{result}"
            );
        }
        assert!(!RunRecord::queued("r:1", "r").result_truncated());
    }
}
