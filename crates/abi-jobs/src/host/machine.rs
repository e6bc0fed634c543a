//! What a delivery does, decided from what it knows: the run record it read
//! (or none), the job's attempts, whether this host runs the run right now,
//! and the clock; and what an ended attempt becomes (its status, a retry,
//! the delivery's acknowledgement). Pure: no I/O, so every case is a row in
//! a table test; the driver (`delivery.rs`) carries the decision out.
//!
//! One departure from the reference's `_handle_delivery`: a record RUNNING
//! under an owner that heartbeat within the ack wait (or under this very
//! host) starts no attempt. The broker redelivers a trigger whose host keeps
//! sending `+WPI` only when it lost its own delivery state (nats-server
//! killed and restarted: its consumer state is synced every two minutes by
//! default), and a second attempt then would run a live run twice. The
//! trigger stays pending instead until the owner finishes (the next delivery
//! retires it) or its heartbeats stop (the next delivery takes over).

use std::time::Duration;

use abi_document_model::{Data, Datetime, Predicate, Value};
use abi_wire::jobs::{self as wire, Ack, RunStatus, field};

use super::recorded::Recorded;

/// The shortest wait before a delivery held back by a live owner comes again.
pub(super) const MIN_OWNER_WAIT: Duration = Duration::from_secs(1);

/// What a delivery knows besides the record.
#[derive(Debug, Clone, Copy)]
pub(super) struct Facts<'a> {
    /// The trigger's `fired_at`, as hosts write it.
    pub(super) fired_at: &'a str,
    /// The job's `max_attempts`.
    pub(super) max_attempts: u32,
    /// Whether this host runs the run right now.
    pub(super) running_here: bool,
    /// How long a heartbeat proves its owner alive (the consumer's ack wait:
    /// a host that keeps its delivery heartbeats more often than that).
    pub(super) owner_fresh_for: Duration,
    /// Now, microseconds since the epoch.
    pub(super) now_micros: i64,
}

/// What to do with a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// The run ended: answer the delivery with [`retire_ack`] of its status.
    Retire(RunStatus),
    /// Its last attempt started and never ended: term the delivery (the
    /// reaper fails the run once its heartbeats stop).
    Exhausted,
    /// A live owner runs it: keep the trigger pending, delivered again after
    /// the wait.
    AwaitOwner {
        /// How long until the owner's heartbeat is stale, at least [`MIN_OWNER_WAIT`].
        wait: Duration,
    },
    /// Start this attempt.
    Start {
        /// The attempt, from 1.
        attempt: i64,
        /// Whether the record is an older trigger's (a recreated stream
        /// reuses sequences): replaced, not continued.
        replace: bool,
    },
}

/// How long since the record's owner last proved alive, when it says.
fn heartbeat_age(record: &Recorded<'_>, now_micros: i64) -> Option<Duration> {
    let seen = Datetime::parse_iso(record.last_seen()).ok()?.unix_micros();
    let age = u64::try_from(now_micros.saturating_sub(seen)).unwrap_or(0);
    Some(Duration::from_micros(age))
}

/// Decides a delivery given the record it found (`None`: there is none).
pub(super) fn on_delivery(record: Option<&Data>, facts: Facts<'_>) -> Decision {
    let Some(data) = record else {
        return Decision::Start {
            attempt: 1,
            replace: false,
        };
    };
    let record = Recorded::of(data);
    if !record.fired_at.is_empty() && record.fired_at != facts.fired_at {
        return Decision::Start {
            attempt: 1,
            replace: true,
        };
    }
    let status = record.status;
    if let Some(ended) = status.filter(|s| s.is_terminal()) {
        return Decision::Retire(ended);
    }
    if status == Some(RunStatus::Running) {
        if facts.running_here {
            return Decision::AwaitOwner {
                wait: facts.owner_fresh_for.max(MIN_OWNER_WAIT),
            };
        }
        if let Some(age) = heartbeat_age(&record, facts.now_micros)
            && age < facts.owner_fresh_for
        {
            return Decision::AwaitOwner {
                wait: (facts.owner_fresh_for - age).max(MIN_OWNER_WAIT),
            };
        }
    }
    let attempt = record.attempt.unwrap_or(0).saturating_add(1);
    if attempt > i64::from(facts.max_attempts) {
        return Decision::Exhausted;
    }
    Decision::Start {
        attempt,
        replace: false,
    }
}

/// The delivery of a run that ended: acked when it ended well
/// (`SUCCEEDED`, `SKIPPED`, `CANCELLED`), termed otherwise.
pub(super) fn retire_ack(status: RunStatus) -> Ack {
    if ended_well(status) {
        Ack::Ack
    } else {
        Ack::Term
    }
}

fn ended_well(status: RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Succeeded | RunStatus::Skipped | RunStatus::Cancelled
    )
}

/// How an attempt ended, as its supervisor saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ended {
    /// The attempt's own status (`SUCCEEDED`, `SKIPPED`, `FAILED`,
    /// `TIMED_OUT`, `CANCELLED`).
    pub(super) status: RunStatus,
    /// The handler's error, empty when none.
    pub(super) error: String,
    /// Whether another attempt may fix it.
    pub(super) retryable: bool,
    /// The attempt, from 1.
    pub(super) attempt: u32,
    /// The job's `max_attempts`.
    pub(super) max_attempts: u32,
    /// Whether the trigger expires before the retry's backoff ends.
    pub(super) expires_before_retry: bool,
}

/// What an ended attempt becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Becomes {
    /// The run's status.
    pub(super) status: RunStatus,
    /// The record's error.
    pub(super) error: String,
    /// The answer to the delivery once the record is saved. A retry is
    /// acked, not nak'ed with its delay: a nak'ed trigger stays pending and
    /// holds a `max_ack_pending` slot through the backoff (the driver
    /// re-drives it from the stream).
    pub(super) ack: Ack,
}

/// Decides what an ended attempt becomes: another attempt while attempts
/// are left and the failure is retryable (unless the trigger would expire
/// first), else the attempt's own status.
pub(super) fn on_outcome(ended: Ended) -> Becomes {
    let retry = !ended_well(ended.status) && ended.attempt < ended.max_attempts && ended.retryable;
    if !retry {
        return Becomes {
            status: ended.status,
            ack: retire_ack(ended.status),
            error: ended.error,
        };
    }
    if ended.expires_before_retry {
        return Becomes {
            status: RunStatus::Failed,
            error: format!(
                "Trigger expired before it could be retried; {}",
                ended.error
            ),
            ack: Ack::Term,
        };
    }
    Becomes {
        status: RunStatus::Retrying,
        error: ended.error,
        ack: Ack::Ack,
    }
}

/// What a cancel does to a run this host does not run right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnCancel {
    /// It runs elsewhere, or it ended: its host (or nobody) acts.
    Nothing,
    /// It waits for a retry: record it `CANCELLED` over that record.
    CancelRetrying,
    /// No record: if its trigger is still stored, it is queued; record it
    /// `CANCELLED` (create-only) and the delivery retires it unrun.
    CancelIfQueued,
}

/// Decides a cancel from the run's record (`None`: there is none).
pub(super) fn on_cancel(record: Option<&Data>) -> OnCancel {
    match record {
        None => OnCancel::CancelIfQueued,
        Some(data) if Recorded::of(data).status == Some(RunStatus::Retrying) => {
            OnCancel::CancelRetrying
        }
        Some(_) => OnCancel::Nothing,
    }
}

/// Whether a `RUNNING` or `RETRYING` run no live host holds can still finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lost {
    /// Something can still finish it (a fresh heartbeat, a retry not due).
    No,
    /// Its host stopped on its last attempt: fail it with this error.
    Yes(String),
    /// Fail it with this error once its trigger left the stream (else a
    /// redelivery still runs it).
    IfTriggerGone(String),
}

/// Decides whether a run is lost. `now` and `cutoff` (now less the
/// lost-after time) are ISO texts: they compare as strings, as the
/// reference compares them.
pub(super) fn on_lost(data: &Data, now: &str, cutoff: &str) -> Lost {
    let record = Recorded::of(data);
    let last_seen = record.last_seen();
    if record.status == Some(RunStatus::Retrying) {
        let due = record.retry_due();
        if due.is_empty() || due > now {
            return Lost::No;
        }
        return Lost::IfTriggerGone("Trigger expired before it could be retried".to_owned());
    }
    if last_seen.is_empty() || last_seen >= cutoff {
        return Lost::No;
    }
    let lost = format!("Lost: no heartbeat since {last_seen}");
    if record.attempt.unwrap_or(1) >= record.max_attempts.unwrap_or(1) {
        return Lost::Yes(format!("{lost} (its host stopped before the run finished)"));
    }
    Lost::IfTriggerGone(format!(
        "{lost}, and its trigger expired before it could be retried"
    ))
}

/// What the retry sweep knows besides the record: who this host is, and
/// the clock as ISO texts (they compare as strings, as the reference
/// compares them).
#[derive(Debug, Clone, Copy)]
pub(super) struct Sweep<'a> {
    /// This host's instance id.
    pub(super) me: &'a str,
    /// Now.
    pub(super) now: &'a str,
    /// Now less the ack wait: another host's retry due before this is
    /// abandoned.
    pub(super) owner_stale_before: &'a str,
    /// Now less the lost-after time: a RUNNING run heartbeating before this
    /// is lost.
    pub(super) lost_before: &'a str,
    /// Whether this host takes new work (not while it stops: a claimed
    /// retry would wait for yet another host).
    pub(super) accepting: bool,
}

/// Whether the sweep takes over the run `data` (id `run_id`) and re-drives
/// it from its trigger's stream sequence: a RETRYING run of another host
/// that let it pass an ack wait (or of no host, at once), or a lost RUNNING
/// run, and only ours to take: the record carries the retry owner field
/// (a Python host's records do not, and its own host re-runs them).
pub(super) fn take_over(data: &Data, run_id: &str, sweep: Sweep<'_>) -> Option<u64> {
    let record = Recorded::of(data);
    let owner = record.retry_owner?;
    if !sweep.accepting {
        return None;
    }
    let last_seen = record.last_seen();
    let due = match record.status {
        Some(RunStatus::Retrying) if owner != sweep.me => {
            let at = record.retry_due();
            let by = if owner.is_empty() {
                sweep.now
            } else {
                sweep.owner_stale_before
            };
            !at.is_empty() && at <= by
        }
        Some(RunStatus::Running) => !last_seen.is_empty() && last_seen < sweep.lost_before,
        _ => false,
    };
    if !due {
        return None;
    }
    record.trigger_sequence(run_id)
}

/// Whether a retry this host scheduled still waits for this host: the run
/// is RETRYING and this host owns its retry. Anything else means it was
/// cancelled, taken over or finished meanwhile.
pub(super) fn retry_is_mine(data: &Data, me: &str) -> bool {
    let record = Recorded::of(data);
    record.status == Some(RunStatus::Retrying) && record.retry_owner == Some(me)
}

/// The record of a retry whose trigger left the stream first: FAILED.
pub(super) fn retry_expired(mut data: Data, now: &str) -> Data {
    data.insert(field::STATUS.into(), RunStatus::Failed.as_str().into());
    data.insert(
        field::ERROR.into(),
        "Trigger expired before it could be retried".into(),
    );
    data.insert(field::FINISHED_AT.into(), now.into());
    data
}

/// Whether a delivery must look for a run still going before it starts
/// (tick coalescing): only a schedule's tick, of a job that coalesces.
pub(super) fn coalesces(job_coalesces: bool, trigger_kind: &str) -> bool {
    job_coalesces && trigger_kind == wire::SCHEDULE_TRIGGER
}

/// The two ways another run of `job` counts as going when a tick fired at
/// `fired`, as queries on the run records (so runs of every host count,
/// Python ones too): RUNNING, started at or before the tick and heartbeating
/// after `alive_since` (one ack wait ago: a run whose host died stops
/// counting); or started at or before the tick and finished after it.
/// Timestamps compare as text, in the reference's format.
pub(super) fn going_when_fired(job: &str, fired: &str, alive_since: &str) -> [Vec<Predicate>; 2] {
    [
        vec![
            Predicate::new(field::JOB, "eq", job),
            Predicate::new(field::STATUS, "eq", RunStatus::Running.as_str()),
            Predicate::new(field::STARTED_AT, "lte", fired),
            Predicate::new(field::HEARTBEAT_AT, "gt", alive_since),
        ],
        vec![
            Predicate::new(field::JOB, "eq", job),
            Predicate::new(field::STARTED_AT, "lte", fired),
            Predicate::new(field::FINISHED_AT, "gt", fired),
        ],
    ]
}

/// The record of a coalesced tick, from the fields its run would have
/// started with: SKIPPED at `now`, never started, no attempt spent (the
/// attempt stays `attempts_used`), naming the run `other` that was going.
pub(super) fn coalesced(mut fields: Data, attempts_used: i64, other: &str, now: &str) -> Data {
    fields.remove(field::STARTED_AT);
    fields.remove(field::HEARTBEAT_AT);
    for (k, v) in [
        (field::STATUS, Value::from(RunStatus::Skipped.as_str())),
        (field::ATTEMPT, Value::Int(attempts_used)),
        (field::LOGS, Value::List(Vec::new())),
        (field::RESULT, Value::Null),
        (
            field::SKIP_REASON,
            format!("Coalesced: fired while run {other} was still going").into(),
        ),
        (field::FINISHED_AT, now.into()),
    ] {
        fields.insert(k.to_owned(), v);
    }
    fields
}

/// What an attempt does once its RUNNING record, decided, was not stored
/// after all (its commit failed, or its durable answer never came).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterLostClaim {
    /// The handler ran to an outcome: write it where the RUNNING record
    /// would have gone, so a completed run is recorded, not run again.
    WriteOutcome,
    /// The handler was stopped first (handed back, taken over): redeliver
    /// the trigger later, using no attempt, as a start that failed.
    Redeliver,
}

/// [`AfterLostClaim`] for an attempt whose handler `finished` (or not).
pub(super) fn after_lost_claim(finished: bool) -> AfterLostClaim {
    if finished {
        AfterLostClaim::WriteOutcome
    } else {
        AfterLostClaim::Redeliver
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use abi_wire::jobs as wire;

    #[test]
    fn a_lost_claim_records_a_finished_run_and_redelivers_a_stopped_one() {
        let table = [
            (true, AfterLostClaim::WriteOutcome),
            (false, AfterLostClaim::Redeliver),
        ];
        for (finished, then) in table {
            assert_eq!(after_lost_claim(finished), then, "finished: {finished}");
        }
    }

    fn text<'a>(data: &'a Data, key: &str) -> &'a str {
        match data.get(key) {
            Some(Value::String(s)) => s,
            _ => "",
        }
    }

    const FIRED: &str = "2026-12-01T10:00:00.000001+00:00";
    /// 2026-12-01T10:01:00+00:00.
    const NOW: i64 = 1_796_119_260_000_000;

    fn at(seconds_before_now: i64) -> String {
        Datetime::from_unix_micros(NOW - seconds_before_now * 1_000_000)
            .unwrap()
            .isoformat()
    }

    fn record(status: &str, attempt: i64, heartbeat: Option<i64>) -> Data {
        let mut data = Data::new();
        data.insert(field::STATUS.into(), status.into());
        data.insert(field::ATTEMPT.into(), Value::Int(attempt));
        data.insert(field::FIRED_AT.into(), FIRED.into());
        data.insert(field::STARTED_AT.into(), at(100).into());
        if let Some(age) = heartbeat {
            data.insert(field::HEARTBEAT_AT.into(), at(age).into());
        }
        data
    }

    fn facts(running_here: bool) -> Facts<'static> {
        Facts {
            fired_at: FIRED,
            max_attempts: 3,
            running_here,
            owner_fresh_for: Duration::from_secs(30),
            now_micros: NOW,
        }
    }

    fn start(attempt: i64) -> Decision {
        Decision::Start {
            attempt,
            replace: false,
        }
    }

    #[test]
    fn the_clock_in_the_table_is_the_one_named() {
        assert_eq!(at(0), "2026-12-01T10:01:00+00:00");
    }

    #[test]
    fn every_delivery_case_decides_as_the_table_says() {
        let older_trigger = {
            let mut data = record(wire::RUNNING, 2, Some(1));
            data.insert(field::FIRED_AT.into(), "2025-01-01T00:00:00+00:00".into());
            data
        };
        let no_fired_at = {
            let mut data = record(wire::RETRYING, 1, Some(40));
            data.remove(field::FIRED_AT);
            data
        };
        let unreadable_heartbeat = {
            let mut data = record(wire::RUNNING, 1, None);
            data.insert(field::HEARTBEAT_AT.into(), "yesterday".into());
            data
        };
        let about_stale = {
            let mut data = record(wire::RUNNING, 1, None);
            let seen = Datetime::from_unix_micros(NOW - 29_900_000).unwrap();
            data.insert(field::HEARTBEAT_AT.into(), seen.isoformat().into());
            data
        };
        let secs = Duration::from_secs;
        let rows: Vec<(&str, Option<Data>, bool, Decision)> = vec![
            ("no record: attempt 1", None, false, start(1)),
            (
                "an older trigger's record is replaced",
                Some(older_trigger),
                false,
                Decision::Start {
                    attempt: 1,
                    replace: true,
                },
            ),
            (
                "succeeded: retired",
                Some(record(wire::SUCCEEDED, 1, Some(500))),
                false,
                Decision::Retire(RunStatus::Succeeded),
            ),
            (
                "failed: retired",
                Some(record(wire::FAILED, 3, Some(500))),
                false,
                Decision::Retire(RunStatus::Failed),
            ),
            (
                "cancelled while queued: retired",
                Some(record(wire::CANCELLED, 0, None)),
                false,
                Decision::Retire(RunStatus::Cancelled),
            ),
            (
                "running under a live owner (heartbeat 5 s old): waits out its freshness",
                Some(record(wire::RUNNING, 1, Some(5))),
                false,
                Decision::AwaitOwner { wait: secs(25) },
            ),
            (
                "running under a live owner on its last attempt: waits, never terms",
                Some(record(wire::RUNNING, 3, Some(5))),
                false,
                Decision::AwaitOwner { wait: secs(25) },
            ),
            (
                "running with a heartbeat about to go stale: waits at least a second",
                Some(about_stale),
                false,
                Decision::AwaitOwner {
                    wait: MIN_OWNER_WAIT,
                },
            ),
            (
                "running here, however old its last heartbeat: waits an ack wait",
                Some(record(wire::RUNNING, 1, Some(400))),
                true,
                Decision::AwaitOwner { wait: secs(30) },
            ),
            (
                "running without heartbeats for an ack wait: taken over as attempt 2",
                Some(record(wire::RUNNING, 1, Some(30))),
                false,
                start(2),
            ),
            (
                "running, no heartbeat field, started long ago: taken over",
                Some(record(wire::RUNNING, 1, None)),
                false,
                start(2),
            ),
            (
                "running with an unreadable heartbeat: taken over",
                Some(unreadable_heartbeat),
                false,
                start(2),
            ),
            (
                "a stale last attempt: exhausted",
                Some(record(wire::RUNNING, 3, Some(31))),
                false,
                Decision::Exhausted,
            ),
            (
                "retrying (a Python host's nak): the next attempt",
                Some(record(wire::RETRYING, 1, Some(2))),
                false,
                start(2),
            ),
            (
                "retrying on its last attempt's count: exhausted",
                Some(record(wire::RETRYING, 3, Some(2))),
                false,
                Decision::Exhausted,
            ),
            (
                "a record without fired_at is the same trigger's",
                Some(no_fired_at),
                false,
                start(2),
            ),
        ];
        for (case, data, running_here, expected) in rows {
            let got = on_delivery(data.as_ref(), facts(running_here));
            assert_eq!(got, expected, "{case}");
        }
    }

    #[test]
    fn a_fresh_owner_is_judged_by_started_at_when_it_never_heartbeat() {
        let mut data = record(wire::RUNNING, 1, None);
        data.insert(field::STARTED_AT.into(), at(2).into());
        assert_eq!(
            on_delivery(Some(&data), facts(false)),
            Decision::AwaitOwner {
                wait: Duration::from_secs(28)
            }
        );
    }

    /// One row per way an attempt ends, as the end-to-end tests see them:
    /// success, skip, cancel, a retryable failure with attempts left, the
    /// last attempt, a non-retryable failure, a timeout, and a retry the
    /// trigger would not live to see.
    #[test]
    fn an_ended_attempt_becomes_a_status_an_ack_and_maybe_a_retry() {
        use RunStatus::*;
        let ended = |status, retryable, attempt, expires| Ended {
            status,
            error: "boom".into(),
            retryable,
            attempt,
            max_attempts: 3,
            expires_before_retry: expires,
        };
        // The error passes through untouched, but for an expired retry.
        let rows = [
            (
                "success",
                ended(Succeeded, true, 1, false),
                Succeeded,
                Ack::Ack,
                "boom",
            ),
            (
                "skip",
                ended(Skipped, true, 1, false),
                Skipped,
                Ack::Ack,
                "boom",
            ),
            (
                "cancel is never retried",
                ended(Cancelled, true, 1, false),
                Cancelled,
                Ack::Ack,
                "boom",
            ),
            (
                "failure with attempts left",
                ended(Failed, true, 1, false),
                Retrying,
                Ack::Ack,
                "boom",
            ),
            (
                "timeout with attempts left",
                ended(TimedOut, true, 2, false),
                Retrying,
                Ack::Ack,
                "boom",
            ),
            (
                "the last attempt",
                ended(Failed, true, 3, false),
                Failed,
                Ack::Term,
                "boom",
            ),
            (
                "timeout on the last attempt",
                ended(TimedOut, true, 3, false),
                TimedOut,
                Ack::Term,
                "boom",
            ),
            (
                "non-retryable",
                ended(Failed, false, 1, false),
                Failed,
                Ack::Term,
                "boom",
            ),
            (
                "the trigger expires before the retry",
                ended(Failed, true, 1, true),
                Failed,
                Ack::Term,
                "Trigger expired before it could be retried; boom",
            ),
            (
                "expiry is moot without a retry",
                ended(Failed, false, 1, true),
                Failed,
                Ack::Term,
                "boom",
            ),
        ];
        for (case, ended, status, ack, error) in rows {
            let got = on_outcome(ended);
            assert_eq!(
                got,
                Becomes {
                    status,
                    error: error.to_owned(),
                    ack
                },
                "{case}"
            );
        }
        for status in RunStatus::ALL.iter().filter(|s| s.is_terminal()) {
            let expected = if matches!(status, Succeeded | Skipped | Cancelled) {
                Ack::Ack
            } else {
                Ack::Term
            };
            assert_eq!(retire_ack(*status), expected, "{status}");
        }
    }

    #[test]
    fn a_cancel_acts_on_queued_and_retrying_runs_only() {
        let rows = [
            (
                "no record: queued if its trigger is stored",
                None,
                OnCancel::CancelIfQueued,
            ),
            (
                "retrying",
                Some(record(wire::RETRYING, 1, Some(5))),
                OnCancel::CancelRetrying,
            ),
            (
                "running elsewhere: its host cancels",
                Some(record(wire::RUNNING, 1, Some(5))),
                OnCancel::Nothing,
            ),
            (
                "ended",
                Some(record(wire::SUCCEEDED, 1, Some(5))),
                OnCancel::Nothing,
            ),
            (
                "cancelled already",
                Some(record(wire::CANCELLED, 0, None)),
                OnCancel::Nothing,
            ),
        ];
        for (case, data, expected) in rows {
            assert_eq!(on_cancel(data.as_ref()), expected, "{case}");
        }
    }

    #[test]
    fn a_run_is_lost_once_its_heartbeats_or_its_retry_are_overdue() {
        let now = at(0);
        let cutoff = at(120);
        let with = |status: &str, attempt: i64, extra: &[(&str, String)]| {
            let mut data = Data::new();
            data.insert(field::STATUS.into(), status.into());
            data.insert(field::ATTEMPT.into(), Value::Int(attempt));
            data.insert(field::MAX_ATTEMPTS.into(), Value::Int(3));
            for (k, v) in extra {
                data.insert((*k).into(), v.as_str().into());
            }
            data
        };
        let stale = at(600);
        let rows = [
            (
                "running, heartbeat fresh",
                with(wire::RUNNING, 1, &[(field::HEARTBEAT_AT, at(10))]),
                Lost::No,
            ),
            ("running, never seen", with(wire::RUNNING, 1, &[]), Lost::No),
            (
                "running, stale, attempts left",
                with(wire::RUNNING, 1, &[(field::HEARTBEAT_AT, stale.clone())]),
                Lost::IfTriggerGone(format!(
                    "Lost: no heartbeat since {stale}, and its trigger expired before it could be retried"
                )),
            ),
            (
                "running, stale since start, last attempt",
                with(wire::RUNNING, 3, &[(field::STARTED_AT, stale.clone())]),
                Lost::Yes(format!(
                    "Lost: no heartbeat since {stale} (its host stopped before the run finished)"
                )),
            ),
            (
                "retrying, due later",
                with(wire::RETRYING, 1, &[(field::RETRY_AT, at(-60))]),
                Lost::No,
            ),
            (
                "retrying, overdue",
                with(wire::RETRYING, 1, &[(field::RETRY_AT, at(1))]),
                Lost::IfTriggerGone("Trigger expired before it could be retried".to_owned()),
            ),
            (
                "retrying, no date at all",
                with(wire::RETRYING, 1, &[]),
                Lost::No,
            ),
        ];
        for (case, data, expected) in rows {
            assert_eq!(on_lost(&data, &now, &cutoff), expected, "{case}");
        }
    }

    #[test]
    fn the_sweep_takes_over_only_abandoned_retries_and_lost_runs_of_ours() {
        let sweep = Sweep {
            me: "me",
            now: "2026-01-01T00:10:00",
            owner_stale_before: "2026-01-01T00:09:30",
            lost_before: "2026-01-01T00:05:00",
            accepting: true,
        };
        let record = |pairs: &[(&str, &str)], sequence: Option<i64>| {
            let mut data = Data::new();
            for (k, v) in pairs {
                data.insert((*k).into(), Value::from(*v));
            }
            if let Some(n) = sequence {
                data.insert(field::SEQUENCE.into(), Value::Int(n));
            }
            data
        };
        let retrying = |owner: &str, at: &str| {
            vec![
                (field::STATUS, wire::RETRYING),
                (field::RETRY_OWNER, owner),
                (field::RETRY_AT, at),
            ]
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect::<Vec<_>>()
        };
        // (case, record fields, stored sequence, taken over with)
        type Row<'a> = (&'a str, Vec<(&'a str, String)>, Option<i64>, Option<u64>);
        let rows: Vec<Row> = vec![
            (
                "another host's retry, an ack wait late",
                retrying("other", "2026-01-01T00:09:00"),
                Some(7),
                Some(7),
            ),
            (
                "another host's retry, not yet an ack wait late",
                retrying("other", "2026-01-01T00:09:45"),
                Some(7),
                None,
            ),
            (
                "an unowned retry, due",
                retrying("", "2026-01-01T00:09:59"),
                Some(7),
                Some(7),
            ),
            (
                "an unowned retry, not due",
                retrying("", "2026-01-01T00:11:00"),
                Some(7),
                None,
            ),
            (
                "our own retry (its timer runs it)",
                retrying("me", "2026-01-01T00:00:00"),
                Some(7),
                None,
            ),
            (
                "a retry without a due time",
                retrying("other", ""),
                Some(7),
                None,
            ),
            (
                "the sequence from the run id",
                retrying("other", "2026-01-01T00:09:00"),
                None,
                Some(42),
            ),
            (
                "a lost run",
                vec![
                    (field::STATUS, wire::RUNNING.to_owned()),
                    (field::RETRY_OWNER, "other".to_owned()),
                    (field::HEARTBEAT_AT, "2026-01-01T00:04:00".to_owned()),
                ],
                Some(7),
                Some(7),
            ),
            (
                "a running run heartbeating",
                vec![
                    (field::STATUS, wire::RUNNING.to_owned()),
                    (field::RETRY_OWNER, "other".to_owned()),
                    (field::HEARTBEAT_AT, "2026-01-01T00:09:00".to_owned()),
                ],
                Some(7),
                None,
            ),
            (
                "a Python host's record (no retry owner)",
                vec![
                    (field::STATUS, wire::RETRYING.to_owned()),
                    (field::RETRY_AT, "2026-01-01T00:00:00".to_owned()),
                ],
                Some(7),
                None,
            ),
            (
                "a finished run",
                vec![
                    (field::STATUS, wire::SUCCEEDED.to_owned()),
                    (field::RETRY_OWNER, "".to_owned()),
                ],
                Some(7),
                None,
            ),
        ];
        for (case, fields, sequence, expected) in rows {
            let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let data = record(&pairs, sequence);
            assert_eq!(take_over(&data, "ingest:42", sweep), expected, "{case}");
        }
        let due = record(
            &[
                (field::STATUS, wire::RETRYING),
                (field::RETRY_OWNER, ""),
                (field::RETRY_AT, "2026-01-01T00:00:00"),
            ],
            Some(7),
        );
        let stopping = Sweep {
            accepting: false,
            ..sweep
        };
        assert_eq!(
            take_over(&due, "ingest:7", stopping),
            None,
            "a stopping host takes none"
        );
    }

    #[test]
    fn a_scheduled_retry_runs_only_while_it_is_still_ours() {
        let record = |status: &str, owner: &str| {
            let mut data = Data::new();
            data.insert(field::STATUS.into(), Value::from(status));
            data.insert(field::RETRY_OWNER.into(), Value::from(owner));
            data
        };
        assert!(retry_is_mine(&record(wire::RETRYING, "me"), "me"));
        assert!(
            !retry_is_mine(&record(wire::RETRYING, "other"), "me"),
            "taken over"
        );
        assert!(
            !retry_is_mine(&record(wire::RETRYING, ""), "me"),
            "released"
        );
        assert!(
            !retry_is_mine(&record(wire::CANCELLED, "me"), "me"),
            "cancelled meanwhile"
        );
        let failed = retry_expired(record(wire::RETRYING, "me"), "2026-01-01T00:00:00");
        assert_eq!(text(&failed, field::STATUS), "FAILED");
        assert_eq!(text(&failed, field::FINISHED_AT), "2026-01-01T00:00:00");
        assert_eq!(
            text(&failed, field::ERROR),
            "Trigger expired before it could be retried"
        );
    }

    #[test]
    fn only_a_coalescing_jobs_schedule_ticks_look_for_a_run_going() {
        let rows = [
            (true, wire::SCHEDULE_TRIGGER, true),
            (true, "manual", false),
            (true, "event", false),
            (false, wire::SCHEDULE_TRIGGER, false),
        ];
        for (job_coalesces, kind, expected) in rows {
            assert_eq!(
                coalesces(job_coalesces, kind),
                expected,
                "{job_coalesces} {kind}"
            );
        }
    }

    #[test]
    fn a_run_is_going_when_it_heartbeats_or_finished_after_the_tick() {
        let [running, finished] = going_when_fired("ingest", "T1", "T0");
        let shape = |where_: &[Predicate]| -> Vec<(String, String, Value)> {
            where_
                .iter()
                .map(|p| (p.field.clone(), p.operator.clone(), p.value.clone()))
                .collect()
        };
        let row = |f: &str, op: &str, v: &str| (f.to_owned(), op.to_owned(), Value::from(v));
        assert_eq!(
            shape(&running),
            [
                row(field::JOB, "eq", "ingest"),
                row(field::STATUS, "eq", wire::RUNNING),
                row(field::STARTED_AT, "lte", "T1"),
                row(field::HEARTBEAT_AT, "gt", "T0"),
            ]
        );
        assert_eq!(
            shape(&finished),
            [
                row(field::JOB, "eq", "ingest"),
                row(field::STARTED_AT, "lte", "T1"),
                row(field::FINISHED_AT, "gt", "T1"),
            ]
        );
    }

    #[test]
    fn a_coalesced_tick_is_skipped_unstarted_and_spends_no_attempt() {
        let mut started = Data::new();
        for (k, v) in [
            (field::RUN_ID, "ingest:9"),
            (field::STATUS, wire::RUNNING),
            (field::STARTED_AT, "2026-01-01T00:00:00"),
            (field::HEARTBEAT_AT, "2026-01-01T00:00:00"),
            (field::FIRED_AT, "2026-01-01T00:00:00"),
        ] {
            started.insert(k.into(), Value::from(v));
        }
        let skipped = coalesced(started, 0, "ingest:8", "2026-01-01T00:00:01");
        assert_eq!(text(&skipped, field::STATUS), wire::SKIPPED);
        assert_eq!(skipped.get(field::ATTEMPT), Some(&Value::Int(0)));
        assert!(!skipped.contains_key(field::STARTED_AT));
        assert!(!skipped.contains_key(field::HEARTBEAT_AT));
        assert_eq!(skipped.get(field::LOGS), Some(&Value::List(Vec::new())));
        assert_eq!(skipped.get(field::RESULT), Some(&Value::Null));
        assert_eq!(
            text(&skipped, field::SKIP_REASON),
            "Coalesced: fired while run ingest:8 was still going"
        );
        assert_eq!(text(&skipped, field::FINISHED_AT), "2026-01-01T00:00:01");
        assert_eq!(
            text(&skipped, field::FIRED_AT),
            "2026-01-01T00:00:00",
            "kept"
        );
        assert_eq!(text(&skipped, field::RUN_ID), "ingest:9", "kept");
    }
}
