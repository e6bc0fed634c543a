//! The step journal's documents, decided purely: what a step's start, local
//! retry, child run, and end write, given the summary stored before (read by
//! the driver) and the clock's text. The same documents as the reference's
//! `StepJournal`, field for field, so a run journaled by a Python host
//! resumes on ours and the other way round.
//!
//! A summary or result written for another trigger of the same run id (a
//! recreated jobs stream reuses sequences) has another `fired_at` and counts
//! as absent ([`Journal::prior`]). A result is written before the summary
//! that points at it, so a SUCCEEDED summary always has its result.

use abi_document_model::{Data, Value};
use abi_wire::workflows::{self as wire, StepKind, StepStatus, field};

/// The journal of one trigger of one run: its run id and `fired_at`.
#[derive(Debug, Clone, Copy)]
pub struct Journal<'a> {
    /// The run id (`<workflow>:<sequence>`).
    pub run_id: &'a str,
    /// When the stream stored the run's trigger (ISO text).
    pub fired_at: &'a str,
}

/// A call's child run, as journaled before the call waits for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// The child's module.
    pub module_id: String,
    /// The child's workflow.
    pub workflow: String,
    /// The child's run id.
    pub run_id: String,
}

impl Child {
    /// The `child` value of a summary.
    pub fn to_value(&self) -> Value {
        let mut child = Data::new();
        child.insert(
            field::CHILD_MODULE_ID.into(),
            self.module_id.as_str().into(),
        );
        child.insert(field::CHILD_WORKFLOW.into(), self.workflow.as_str().into());
        child.insert(field::CHILD_RUN_ID.into(), self.run_id.as_str().into());
        Value::Object(child)
    }

    /// The child a summary names, `None` when it names none (or a malformed one).
    pub fn from_summary(summary: &Data) -> Option<Self> {
        let Some(Value::Object(child)) = summary.get(field::CHILD) else {
            return None;
        };
        let get = |name: &str| match child.get(name) {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        Some(Self {
            module_id: get(field::CHILD_MODULE_ID)?,
            workflow: get(field::CHILD_WORKFLOW)?,
            run_id: get(field::CHILD_RUN_ID)?,
        })
    }
}

/// How a step ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finish<'a> {
    /// SUCCEEDED, FAILED or CANCELLED.
    pub status: StepStatus,
    /// The stored result's JSON, for a success.
    pub result_json: Option<&'a str>,
    /// The error, empty for a success (kept to 2000 characters).
    pub error: &'a str,
    /// Milliseconds since the start.
    pub duration_ms: i64,
    /// For a success whose result went to the claim-check store (the step
    /// opted in): the object's name. `result_json` still gives the size;
    /// no result document is written.
    pub claim_check: Option<&'a str>,
}

fn text<'d>(data: &'d Data, key: &str) -> &'d str {
    match data.get(key) {
        Some(Value::String(s)) => s,
        _ => "",
    }
}

/// The reference's `int(summary.get("attempt") or 0)` for the numbers a
/// journal holds.
pub fn attempt(data: &Data) -> i64 {
    match data.get(field::ATTEMPT) {
        Some(Value::Int(n)) => *n,
        // Python's int() truncates toward zero.
        #[allow(clippy::cast_possible_truncation)]
        Some(Value::Float(f)) if f.is_finite() => f.trunc() as i64,
        _ => 0,
    }
}

/// A step's status in a summary, `None` when it has none this version knows.
pub fn status(summary: &Data) -> Option<StepStatus> {
    StepStatus::parse(text(summary, field::STATUS))
}

impl Journal<'_> {
    /// Whether a stored document belongs to this trigger of the run.
    pub fn is_current(&self, data: &Data) -> bool {
        text(data, field::FIRED_AT) == self.fired_at
    }

    /// The summary a step continues from: the stored one when it belongs to
    /// this trigger, else none (an empty map, as the reference's `{}`).
    pub fn prior(&self, stored: Option<&Data>) -> Data {
        match stored {
            Some(data) if self.is_current(data) => data.clone(),
            _ => Data::new(),
        }
    }

    /// The result a replayed step returns: the stored result document's JSON
    /// text when it belongs to this trigger.
    pub fn stored_result<'d>(&self, result: &'d Data) -> Option<&'d str> {
        match result.get(field::RESULT_JSON) {
            Some(Value::String(json)) if self.is_current(result) => Some(json),
            _ => None,
        }
    }

    /// The summary of a start, from the `prior` one: one more attempt, unless
    /// `reuse_running` and the prior start never finished (a call whose host
    /// died re-attaches with the same attempt, so its child trigger repeats
    /// its idempotency key, and keeps the child it journaled).
    pub fn start(
        &self,
        prior: &Data,
        key: &str,
        kind: StepKind,
        now: &str,
        reuse_running: bool,
    ) -> Data {
        let unfinished = reuse_running && status(prior) == Some(StepStatus::Running);
        let mut attempt = attempt(prior);
        if !(unfinished && attempt != 0) {
            attempt += 1;
        }
        let mut data = Data::new();
        data.insert(field::RUN_ID.into(), self.run_id.into());
        data.insert(field::KEY.into(), key.into());
        data.insert(field::KIND.into(), kind.as_str().into());
        data.insert(field::STATUS.into(), StepStatus::Running.as_str().into());
        data.insert(field::ATTEMPT.into(), Value::Int(attempt));
        data.insert(field::STARTED_AT.into(), now.into());
        data.insert(field::FINISHED_AT.into(), "".into());
        data.insert(field::DURATION_MS.into(), Value::Int(0));
        data.insert(field::ERROR.into(), "".into());
        data.insert(field::FIRED_AT.into(), self.fired_at.into());
        if unfinished && let Some(child) = prior.get(field::CHILD) {
            data.insert(field::CHILD.into(), child.clone());
        }
        data
    }

    /// The summary of a local retry of a running step: one more attempt,
    /// the error cleared.
    pub fn retry(&self, prior: &Data) -> Data {
        let mut data = prior.clone();
        data.insert(field::ATTEMPT.into(), Value::Int(attempt(prior) + 1));
        data.insert(field::ERROR.into(), "".into());
        data
    }

    /// The summary once a call journaled its child run.
    pub fn with_child(&self, prior: &Data, child: &Child) -> Data {
        let mut data = prior.clone();
        data.insert(field::CHILD.into(), child.to_value());
        data
    }

    /// The result document of a step that succeeded (written first).
    pub fn result(&self, key: &str, result_json: &str) -> Data {
        let mut data = Data::new();
        data.insert(field::RUN_ID.into(), self.run_id.into());
        data.insert(field::KEY.into(), key.into());
        data.insert(field::FIRED_AT.into(), self.fired_at.into());
        data.insert(field::RESULT_JSON.into(), result_json.into());
        data
    }

    /// The summary of a step's end, over the `prior` one.
    pub fn finish(&self, prior: &Data, key: &str, end: &Finish<'_>, now: &str) -> Data {
        let mut data = prior.clone();
        let error: String = end.error.chars().take(wire::MAX_STEP_ERROR_CHARS).collect();
        data.insert(field::RUN_ID.into(), self.run_id.into());
        data.insert(field::KEY.into(), key.into());
        data.insert(field::STATUS.into(), end.status.as_str().into());
        data.insert(field::FINISHED_AT.into(), now.into());
        data.insert(field::DURATION_MS.into(), Value::Int(end.duration_ms));
        data.insert(field::ERROR.into(), error.into());
        data.insert(field::FIRED_AT.into(), self.fired_at.into());
        if let Some(json) = end.result_json {
            let bytes = i64::try_from(json.len()).unwrap_or(i64::MAX);
            data.insert(field::RESULT_BYTES.into(), Value::Int(bytes));
        }
        if let Some(name) = end.claim_check {
            data.insert(field::RESULT_CLAIM_CHECK.into(), name.into());
        }
        data
    }

    /// The claim-check object holding the result of a SUCCEEDED summary of
    /// this trigger, when its step stored it there.
    pub fn claim_checked<'d>(&self, summary: &'d Data) -> Option<&'d str> {
        if !self.is_current(summary) || status(summary) != Some(StepStatus::Succeeded) {
            return None;
        }
        match summary.get(field::RESULT_CLAIM_CHECK) {
            Some(Value::String(name)) if !name.is_empty() => Some(name),
            _ => None,
        }
    }
}

/// What `steps` shows of a summary: its [`field::SUMMARY`] fields, never
/// the result.
pub fn summary_view(data: &Data) -> Data {
    field::SUMMARY
        .iter()
        .filter_map(|name| data.get(*name).map(|v| ((*name).to_owned(), v.clone())))
        .collect()
}

/// A run's summaries in the order they started (then by key), as the
/// reference's `read_steps` sorts them.
pub fn timeline(mut summaries: Vec<Data>) -> Vec<Data> {
    summaries.sort_by(|a, b| {
        (text(a, field::STARTED_AT), text(a, field::KEY))
            .cmp(&(text(b, field::STARTED_AT), text(b, field::KEY)))
    });
    summaries
}

#[cfg(test)]
mod tests {
    use super::*;

    const J: Journal<'static> = Journal {
        run_id: "flow:1",
        fired_at: "F1",
    };

    fn with(pairs: &[(&str, Value)]) -> Data {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn a_start_counts_attempts_and_a_reattaching_call_keeps_its_own() {
        let child = Child {
            module_id: "m".into(),
            workflow: "w".into(),
            run_id: "w:4".into(),
        };
        let running = |n: i64| {
            with(&[
                (field::STATUS, StepStatus::Running.as_str().into()),
                (field::ATTEMPT, Value::Int(n)),
                (field::CHILD, child.to_value()),
            ])
        };
        let failed = with(&[
            (field::STATUS, StepStatus::Failed.as_str().into()),
            (field::ATTEMPT, Value::Int(2)),
            (field::CHILD, child.to_value()),
        ]);
        // (case, prior, reuse_running, attempt, child kept)
        let rows = [
            ("first start", Data::new(), false, 1, false),
            ("first call", Data::new(), true, 1, false),
            ("a step started again", running(1), false, 2, false),
            ("a call re-attaching", running(1), true, 1, true),
            (
                "a call after a failed attempt",
                failed.clone(),
                true,
                3,
                false,
            ),
            ("a step after a failed attempt", failed, false, 3, false),
            (
                "a running summary without attempts",
                running(0),
                true,
                1,
                true,
            ),
        ];
        for (case, prior, reuse, expected, kept) in rows {
            let data = J.start(&prior, "k", StepKind::Call, "T", reuse);
            assert_eq!(
                data.get(field::ATTEMPT),
                Some(&Value::Int(expected)),
                "{case}"
            );
            assert_eq!(Child::from_summary(&data).is_some(), kept, "{case}");
            assert_eq!(status(&data), Some(StepStatus::Running), "{case}");
            assert_eq!(text(&data, field::FINISHED_AT), "", "{case}");
        }
    }

    #[test]
    fn another_triggers_journal_counts_as_absent() {
        let other = with(&[
            (field::FIRED_AT, "F0".into()),
            (field::STATUS, StepStatus::Succeeded.as_str().into()),
            (field::RESULT_JSON, "1".into()),
        ]);
        assert!(J.prior(Some(&other)).is_empty());
        assert_eq!(J.stored_result(&other), None);
        let ours = with(&[
            (field::FIRED_AT, "F1".into()),
            (field::RESULT_JSON, "1".into()),
        ]);
        assert_eq!(J.prior(Some(&ours)), ours);
        assert_eq!(J.stored_result(&ours), Some("1"));
        assert!(J.prior(None).is_empty());
    }

    #[test]
    fn an_end_keeps_two_thousand_characters_of_error_and_counts_result_bytes() {
        let started = J.start(&Data::new(), "k", StepKind::Step, "T0", false);
        let long = "é".repeat(3000);
        let failed = J.finish(
            &started,
            "k",
            &Finish {
                status: StepStatus::Failed,
                result_json: None,
                error: &long,
                duration_ms: 12,
                claim_check: None,
            },
            "T1",
        );
        assert_eq!(text(&failed, field::ERROR).chars().count(), 2000);
        assert!(!failed.contains_key(field::RESULT_BYTES));
        let done = J.finish(
            &started,
            "k",
            &Finish {
                status: StepStatus::Succeeded,
                result_json: Some("\"é\""),
                error: "",
                duration_ms: 3,
                claim_check: None,
            },
            "T1",
        );
        assert_eq!(done.get(field::RESULT_BYTES), Some(&Value::Int(4)));
        assert_eq!(text(&done, field::STARTED_AT), "T0", "kept from the start");
        assert_eq!(
            summary_view(&done).len(),
            9,
            "every summary field but child"
        );
    }

    #[test]
    fn a_claim_checked_result_is_named_in_the_summary_of_its_trigger_only() {
        let started = J.start(&Data::new(), "big", StepKind::Step, "T0", false);
        let done = J.finish(
            &started,
            "big",
            &Finish {
                status: StepStatus::Succeeded,
                result_json: Some("\"xxxx\""),
                error: "",
                duration_ms: 3,
                claim_check: Some("obj1"),
            },
            "T1",
        );
        assert_eq!(done.get(field::RESULT_BYTES), Some(&Value::Int(6)));
        assert_eq!(J.claim_checked(&done), Some("obj1"));
        let other = Journal {
            run_id: "flow:3",
            fired_at: "F2",
        };
        assert_eq!(other.claim_checked(&done), None, "another trigger's");
        assert_eq!(J.claim_checked(&started), None, "not SUCCEEDED");
        let restarted = J.start(&done, "big", StepKind::Step, "T2", false);
        assert_eq!(J.claim_checked(&restarted), None, "a new start drops it");
    }

    #[test]
    fn the_timeline_is_by_start_then_key() {
        let at = |t: &str, k: &str| with(&[(field::STARTED_AT, t.into()), (field::KEY, k.into())]);
        let sorted = timeline(vec![at("T2", "a"), at("T1", "b"), at("T1", "a")]);
        let keys: Vec<(&str, &str)> = sorted
            .iter()
            .map(|d| (text(d, field::STARTED_AT), text(d, field::KEY)))
            .collect();
        assert_eq!(keys, [("T1", "a"), ("T1", "b"), ("T2", "a")]);
    }
}
