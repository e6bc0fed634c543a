//! Jobs on the wire (the reference SDK's `jobs.py`, `job_host.py`): the
//! stream `ABI_JOBS_<project>`, one trigger subject and one durable pull
//! consumer per job, schedule subjects, the per-module cancel subject, core
//! NATS completion notices, run ids, the run-record collection, and the
//! headers triggers carry.
//!
//! Module and job names enter subjects hashed: [`hash`] is the reference's
//! `_hash(*values)`, SHA-256 of `json.dumps(values, ensure_ascii=True)` (a
//! JSON array with Python's default `", "` separator), so a Python host and
//! a Rust host of one job meet on the same subjects and consumer.

use sha2::{Digest as _, Sha256};

/// The header naming what produced a trigger: `manual`, `schedule`, `event`.
pub const TRIGGER_HEADER: &str = "Abi-Job-Trigger";
/// The header of a schedule's input hash (only when an input is set).
pub const INPUT_HASH_HEADER: &str = "Abi-Job-Input-Hash";
/// The `kind` of a job descriptor (`workflow` for workflows).
pub const JOB_KINDS: [&str; 2] = [PLAIN_KIND, crate::workflows::KIND];
/// The kind of a job that is not a workflow (a descriptor without a kind is one).
pub const PLAIN_KIND: &str = "job";
/// The NATS header giving a stored message its own time to live.
pub const TTL_HEADER: &str = "Nats-TTL";
/// The [`TRIGGER_HEADER`] value of a trigger a caller sent.
pub const MANUAL_TRIGGER: &str = "manual";
/// The trigger kind of bridged events.
pub const EVENT_TRIGGER: &str = "event";
/// How long a manual trigger waits in the stream for a host (`Nats-TTL`).
pub const MANUAL_TRIGGER_TTL: &str = "168h";
/// How long an event trigger waits in the stream for a host.
pub const EVENT_TRIGGER_TTL: &str = "24h";
/// The object store large trigger payloads travel through (claim checks).
pub const CLAIM_CHECK_BUCKET: &str = "abi_claim_checks";
/// The header naming a claim-checked payload's object (its body is empty).
pub const CLAIM_CHECK_HEADER: &str = "Abi-Claim-Check";
/// The header of a claim-checked payload's size in bytes.
pub const CLAIM_CHECK_SIZE_HEADER: &str = "Abi-Claim-Check-Size";
/// How long a claim-checked payload is kept (the reference's 7 days).
pub const CLAIM_CHECK_TTL_SECS: u64 = 7 * 24 * 3600;
/// The largest payload a claim check carries (the reference's
/// `MAX_VALUE_BYTES`, 256 MiB); beyond it a caller sends a storage reference.
pub const CLAIM_CHECK_MAX_BYTES: usize = 256 * 1024 * 1024;
/// The largest chunk of a claim-checked object; smaller when half the
/// broker's `max_payload` is less.
pub const CLAIM_CHECK_MAX_CHUNK_BYTES: usize = 128 * 1024;
/// The claim-check store's description (the reference's).
pub const CLAIM_CHECK_DESCRIPTION: &str = "NATS messages above the broker limit (claim check)";
/// Largest run result stored whole (JSON bytes); beyond it a preview.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;
/// Most triggers one job declares.
pub const MAX_TRIGGERS: usize = 16;
crate::run_status::run_status! {
    /// The status of a job run (record field `status`). `Queued` is never
    /// stored: it is what a caller sees before a host took the trigger.
    pub enum RunStatus {
        /// No host has taken the trigger yet.
        Queued => "QUEUED", false,
        /// The handler is going.
        Running => "RUNNING", false,
        /// Waiting for the next attempt.
        Retrying => "RETRYING", false,
        /// The handler returned.
        Succeeded => "SUCCEEDED", true,
        /// The handler (or tick coalescing) skipped the run.
        Skipped => "SKIPPED", true,
        /// The last attempt failed, or nothing will finish the run.
        Failed => "FAILED", true,
        /// The last attempt ran out of time.
        TimedOut => "TIMED_OUT", true,
        /// A caller cancelled the run.
        Cancelled => "CANCELLED", true,
    }
}

/// Every job-run status string, in [`RunStatus::ALL`]'s order.
pub const RUN_STATUSES: [&str; 8] = [
    QUEUED, RUNNING, RETRYING, SUCCEEDED, SKIPPED, FAILED, TIMED_OUT, CANCELLED,
];
/// The statuses after which a run never changes.
pub const TERMINAL_STATUSES: [&str; 5] = [SUCCEEDED, SKIPPED, FAILED, TIMED_OUT, CANCELLED];
/// [`RunStatus::Queued`]'s string.
pub const QUEUED: &str = RunStatus::Queued.as_str();
/// [`RunStatus::Running`]'s string.
pub const RUNNING: &str = RunStatus::Running.as_str();
/// [`RunStatus::Retrying`]'s string.
pub const RETRYING: &str = RunStatus::Retrying.as_str();
/// [`RunStatus::Succeeded`]'s string.
pub const SUCCEEDED: &str = RunStatus::Succeeded.as_str();
/// [`RunStatus::Skipped`]'s string.
pub const SKIPPED: &str = RunStatus::Skipped.as_str();
/// [`RunStatus::Failed`]'s string.
pub const FAILED: &str = RunStatus::Failed.as_str();
/// [`RunStatus::TimedOut`]'s string.
pub const TIMED_OUT: &str = RunStatus::TimedOut.as_str();
/// [`RunStatus::Cancelled`]'s string.
pub const CANCELLED: &str = RunStatus::Cancelled.as_str();

/// The fields of a run record that both hosts (ours and the reference's)
/// write and read.
pub mod field {
    /// The job's name.
    pub const JOB: &str = "job";
    /// The run id (`<job>:<sequence>`).
    pub const RUN_ID: &str = "run_id";
    /// The module that serves the job.
    pub const MODULE_ID: &str = "module_id";
    /// One of [`super::RUN_STATUSES`] but `QUEUED`.
    pub const STATUS: &str = "status";
    /// The handler starts recorded so far.
    pub const ATTEMPT: &str = "attempt";
    /// The job's attempts.
    pub const MAX_ATTEMPTS: &str = "max_attempts";
    /// The trigger: `kind` (`manual`, `schedule`, `event`) and, for a tick, `scheduler`.
    pub const TRIGGER: &str = "trigger";
    /// The trigger's payload (an object).
    pub const PAYLOAD: &str = "payload";
    /// The instance of the host that wrote the attempt.
    pub const INSTANCE: &str = "instance";
    /// The trigger's stream sequence.
    pub const SEQUENCE: &str = "sequence";
    /// When the stream stored the trigger (ISO text).
    pub const FIRED_AT: &str = "fired_at";
    /// When the attempt started.
    pub const STARTED_AT: &str = "started_at";
    /// The attempt's last heartbeat.
    pub const HEARTBEAT_AT: &str = "heartbeat_at";
    /// The attempt's trace id (empty when none).
    pub const TRACE_ID: &str = "trace_id";
    /// The last attempt's error (empty when none).
    pub const ERROR: &str = "error";
    /// The handler's log lines.
    pub const LOGS: &str = "logs";
    /// The handler's result (or a preview past `MAX_RESULT_BYTES`).
    pub const RESULT: &str = "result";
    /// When the run ended (terminal statuses).
    pub const FINISHED_AT: &str = "finished_at";
    /// When a RETRYING run's next attempt is due.
    pub const RETRY_AT: &str = "retry_at";
    /// Ours only: the instance that re-drives a RETRYING run (empty: any
    /// host's upkeep may); the reference ignores it.
    pub const RETRY_OWNER: &str = "retry_owner";
    /// When the record was first written.
    pub const CREATED_AT: &str = "created_at";
    /// Why the handler (or tick coalescing) skipped the run.
    pub const SKIP_REASON: &str = "skip_reason";
    /// In the `trigger` object: how the run was triggered (`manual`,
    /// `schedule`, `event`).
    pub const TRIGGER_KIND: &str = "kind";
    /// In the `trigger` object of a schedule tick: the schedule's subject.
    pub const TRIGGER_SCHEDULER: &str = "scheduler";
    /// In a `result` past [`super::MAX_RESULT_BYTES`]: `true`.
    pub const RESULT_TRUNCATED: &str = "truncated";
    /// In a `result` past [`super::MAX_RESULT_BYTES`]: the JSON's first
    /// 2000 characters.
    pub const RESULT_PREVIEW: &str = "preview";
}

/// Characters of a result's JSON a truncated `result` keeps.
pub const RESULT_PREVIEW_CHARS: usize = 2000;

/// The error of a run handed back by its host's shutdown (a deploy): RETRYING
/// without spending the attempt, re-run by the next host.
pub const HANDED_BACK: &str = "Handed back by host shutdown";

/// The error of a run whose trigger expired before any host took it (a
/// `FAILED` record with attempt 0, written by the caller that noticed; see
/// the SDK's `JobRun::status`).
pub const EXPIRED_UNRUN_ERROR: &str = "Trigger expired before any host ran it";

/// How a host answers one JetStream delivery (async-nats's `AckKind`, in
/// the bytes nats-py sends, so a broker sees the same from either host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// Done: never redeliver (an empty body).
    Ack,
    /// Redeliver, now (`-NAK`) or after the delay (`-NAK {"delay": <ns>}`).
    Nak(Option<std::time::Duration>),
    /// Still working: the ack wait starts again (`+WPI`).
    Progress,
    /// Never redeliver, and count it as not processed (`+TERM`).
    Term,
}

impl Ack {
    /// The reply body: nats-py's `ack()`, `nak(delay)` (json.dumps' default
    /// separators; a zero or absent delay is a bare `-NAK`),
    /// `in_progress()`, `term()`.
    pub fn body(self) -> std::borrow::Cow<'static, [u8]> {
        use std::borrow::Cow;
        match self {
            Ack::Ack => Cow::Borrowed(b""),
            Ack::Nak(Some(delay)) if !delay.is_zero() => {
                Cow::Owned(format!("-NAK {{\"delay\": {}}}", delay.as_nanos()).into_bytes())
            }
            Ack::Nak(_) => Cow::Borrowed(b"-NAK"),
            Ack::Progress => Cow::Borrowed(b"+WPI"),
            Ack::Term => Cow::Borrowed(b"+TERM"),
        }
    }
}

/// A completion notice: `{"run_id": ..., "status": ...}` as `json.dumps`.
pub fn completion_notice(run_id: &str, status: &str) -> String {
    format!(
        "{{\"run_id\": {}, \"status\": {}}}",
        abi_pyjson::json_string(run_id),
        abi_pyjson::json_string(status)
    )
}

/// A schedule message's schedule: a cron, or `@every <interval>`.
pub const SCHEDULE_HEADER: &str = "Nats-Schedule";
/// A cron schedule's time zone (only when set).
pub const SCHEDULE_TIME_ZONE_HEADER: &str = "Nats-Schedule-Time-Zone";
/// Where a schedule's ticks are stored: the job's trigger subject.
pub const SCHEDULE_TARGET_HEADER: &str = "Nats-Schedule-Target";
/// How long each tick waits in the stream (`"<n>s"`).
pub const SCHEDULE_TTL_HEADER: &str = "Nats-Schedule-TTL";
/// Set by the server on a tick: the schedule subject that produced it.
pub const SCHEDULER_HEADER: &str = "Nats-Scheduler";
/// The trigger kind of schedule ticks.
pub const SCHEDULE_TRIGGER: &str = "schedule";
/// The headers that make two schedule messages the same schedule (the
/// reference's `SCHEDULE_HEADERS`): anything else is NATS's own.
pub const SCHEDULE_HEADERS: [&str; 6] = [
    SCHEDULE_HEADER,
    SCHEDULE_TIME_ZONE_HEADER,
    SCHEDULE_TARGET_HEADER,
    SCHEDULE_TTL_HEADER,
    TRIGGER_HEADER,
    INPUT_HASH_HEADER,
];
/// The longest a scheduled tick waits for a host.
pub const MAX_SCHEDULED_TICK_TTL_SECS: u64 = 3600;
/// The shortest an `@every` tick waits for a host.
pub const MIN_EVERY_TICK_TTL_SECS: u64 = 60;

/// A schedule's `Abi-Job-Input-Hash`: `sha256(canonical input)[:32]`.
pub fn input_hash(canonical_input: &str) -> String {
    hex::encode(Sha256::digest(canonical_input.as_bytes()))[..32].to_owned()
}

/// The `Nats-Schedule-TTL` of a schedule's ticks (`scheduled_tick_ttl`):
/// an `@every` of `interval_secs` keeps its ticks that long, clamped to
/// 60..=3600 s; a cron (`None`) keeps them 3600 s.
pub fn schedule_tick_ttl(every_interval_secs: Option<f64>) -> String {
    let ttl = match every_interval_secs {
        Some(secs) => secs.clamp(
            MIN_EVERY_TICK_TTL_SECS as f64,
            MAX_SCHEDULED_TICK_TTL_SECS as f64,
        ),
        None => MAX_SCHEDULED_TICK_TTL_SECS as f64,
    };
    // Python's int(): truncation toward zero of a value in 60..=3600.
    format!("{}s", ttl as u64)
}

/// The reference's `_hash(*values)`: hex SHA-256 of the values as a
/// Python-`json.dumps`ed list.
pub fn hash(values: &[&str]) -> String {
    let list = abi_pyjson::Json::Array(
        values
            .iter()
            .map(|v| abi_pyjson::Json::Str((*v).to_owned()))
            .collect(),
    );
    hex::encode(Sha256::digest(abi_pyjson::dumps_default(&list).as_bytes()))
}

/// The jobs stream of `project`: `ABI_JOBS_<project>`.
pub fn stream(project: &str) -> String {
    format!("ABI_JOBS_{project}")
}

/// Every subject the jobs stream holds: `abi.jobs.<project>.>`.
pub fn stream_subjects(project: &str) -> String {
    format!("abi.jobs.{project}.>")
}

/// The run records of `project`'s jobs, one collection in each module's
/// document namespace: `job_runs_<hash(project)[:16]>`.
pub fn runs_collection(project: &str) -> String {
    format!("job_runs_{}", &hash(&[project])[..16])
}

/// Workflow step summaries: `workflow_steps_<hash(project)[:16]>`.
pub fn workflow_steps_collection(project: &str) -> String {
    format!("workflow_steps_{}", &hash(&[project])[..16])
}

/// Workflow step results: `workflow_results_<hash(project)[:16]>`.
pub fn workflow_results_collection(project: &str) -> String {
    format!("workflow_results_{}", &hash(&[project])[..16])
}

/// The run id of the trigger stored at stream `sequence`: `<job>:<sequence>`.
pub fn run_id(job: &str, sequence: u64) -> String {
    format!("{job}:{sequence}")
}

/// The job name and stream sequence of a run id (`<job>:<sequence>`); the
/// job name may itself hold `:`, the sequence never does.
pub fn parse_run_id(run_id: &str) -> Option<(&str, u64)> {
    let (job, sequence) = run_id.rsplit_once(':')?;
    if job.is_empty() || sequence.is_empty() || !sequence.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((job, sequence.parse().ok()?))
}

/// The subjects and consumer of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSubjects {
    project: String,
    module_hash: String,
    job_hash: String,
}

impl JobSubjects {
    /// The names of `module_id`'s job `job` in `project`.
    pub fn new(project: &str, module_id: &str, job: &str) -> Self {
        Self {
            project: project.to_owned(),
            module_hash: hash(&[module_id])[..32].to_owned(),
            job_hash: hash(&[module_id, job])[..32].to_owned(),
        }
    }

    /// Where triggers are stored: `abi.jobs.<p>.trigger.<mh>.<jh>`.
    pub fn trigger(&self) -> String {
        format!(
            "abi.jobs.{}.trigger.{}.{}",
            self.project, self.module_hash, self.job_hash
        )
    }

    /// The schedule message of the job's `index`-th schedule (its Cron and
    /// Every triggers, counted in declaration order).
    pub fn schedule(&self, index: usize) -> String {
        format!(
            "abi.jobs.{}.schedule.{}.{}.{index}",
            self.project, self.module_hash, self.job_hash
        )
    }

    /// The pause marker of the job's schedules (`abictl pause`): while a
    /// message is stored here, our hosts publish no schedule of the job.
    /// Ours only: the reference knows no pause (see the README).
    pub fn paused(&self) -> String {
        format!(
            "abi.jobs.{}.paused.{}.{}",
            self.project, self.module_hash, self.job_hash
        )
    }

    /// Where cancels of the module's runs are published (core NATS).
    pub fn cancel(&self) -> String {
        format!("abi.jobs.{}.cancel.{}", self.project, self.module_hash)
    }

    /// Where completion notices of this job's runs are published (core NATS,
    /// outside the stream so none is stored).
    pub fn done(&self) -> String {
        format!(
            "abi.jobdone.{}.{}.{}",
            self.project, self.module_hash, self.job_hash
        )
    }

    /// The durable pull consumer every host of this job shares.
    pub fn consumer(&self) -> String {
        format!("job-{}-{}", &self.module_hash[..16], &self.job_hash[..16])
    }

    /// The queue group of the job's event subscriptions.
    pub fn events_queue(&self) -> String {
        format!("{}-events", self.consumer())
    }

    /// The `Nats-Msg-Id` of a manual trigger sent with `key`: a repeated key
    /// within the stream's duplicate window is the same run.
    pub fn idempotency_id(&self, key: &str) -> String {
        hash(&[&self.trigger(), key])
    }
}

/// Every trigger of `project`'s jobs, as a wildcard (an observer's
/// subscription: the console follows runs being queued).
pub fn all_triggers(project: &str) -> String {
    format!("abi.jobs.{project}.trigger.>")
}

/// Every completion notice of `project`'s jobs, as a wildcard.
pub fn all_done(project: &str) -> String {
    format!("abi.jobdone.{project}.>")
}

/// The (module hash, job hash) of a trigger or completion subject of
/// `project` ([`JobSubjects::trigger`], [`JobSubjects::done`]).
pub fn subject_hashes<'a>(project: &str, subject: &'a str) -> Option<(&'a str, &'a str)> {
    let trigger = format!("abi.jobs.{project}.trigger.");
    let done = format!("abi.jobdone.{project}.");
    let rest = subject
        .strip_prefix(&trigger)
        .or_else(|| subject.strip_prefix(&done))?;
    let (module_hash, job_hash) = rest.split_once('.')?;
    (!job_hash.contains('.')).then_some((module_hash, job_hash))
}

impl JobSubjects {
    /// The (module hash, job hash) its subjects carry, as
    /// [`subject_hashes`] reads them back.
    pub fn hashes(&self) -> (&str, &str) {
        (&self.module_hash, &self.job_hash)
    }
}

/// The subject events of an event type are published on (the event
/// service's `evt.<sha256(iri)[:32]>.<event id>`), as a wildcard.
pub fn event_type_subject(event_type: &str) -> String {
    let digest = hex::encode(Sha256::digest(event_type.as_bytes()));
    format!("evt.{}.>", &digest[..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden values from the reference (`naas_abi_sdk.jobs`, project
    /// `default`, module `acme.billing`, job `ingest`).
    #[test]
    fn names_match_the_reference() {
        let s = JobSubjects::new("default", "acme.billing", "ingest");
        assert_eq!(
            s.trigger(),
            "abi.jobs.default.trigger.e017bc4baa74ce0d2755f728bef52428.fc1d1c045bbba645833fc64181456460"
        );
        assert_eq!(s.consumer(), "job-e017bc4baa74ce0d-fc1d1c045bbba645");
        assert_eq!(
            s.cancel(),
            "abi.jobs.default.cancel.e017bc4baa74ce0d2755f728bef52428"
        );
        assert_eq!(runs_collection("default"), "job_runs_ed954e41fa3f395c");
        assert_eq!(
            workflow_steps_collection("default"),
            "workflow_steps_ed954e41fa3f395c"
        );
        assert_eq!(stream("default"), "ABI_JOBS_default");
        assert_eq!(run_id("ingest", 42), "ingest:42");
        assert_eq!(subject_hashes("default", &s.trigger()), Some(s.hashes()));
        assert_eq!(subject_hashes("default", &s.done()), Some(s.hashes()));
        assert_eq!(subject_hashes("other", &s.trigger()), None);
        assert_eq!(subject_hashes("default", &s.cancel()), None);
        // naas_abi_sdk: Every("10s", input={"a": 1}).input_hash, scheduled_tick_ttl.
        assert_eq!(input_hash(r#"{"a":1}"#), "015abd7f5cc57a2dd94b7590f04ad808");
        assert_eq!(schedule_tick_ttl(Some(10.0)), "60s");
        assert_eq!(schedule_tick_ttl(Some(90.5)), "90s");
        assert_eq!(schedule_tick_ttl(Some(7200.0)), "3600s");
        assert_eq!(schedule_tick_ttl(None), "3600s");
        // nats-py's ack(), nak(delay=5), nak(), in_progress(), term().
        let second = std::time::Duration::from_secs(5);
        let acks = [
            (Ack::Ack, &b""[..]),
            (Ack::Nak(Some(second)), br#"-NAK {"delay": 5000000000}"#),
            (Ack::Nak(Some(std::time::Duration::ZERO)), b"-NAK"),
            (Ack::Nak(None), b"-NAK"),
            (Ack::Progress, b"+WPI"),
            (Ack::Term, b"+TERM"),
        ];
        for (ack, body) in acks {
            assert_eq!(&*ack.body(), body, "{ack:?}");
        }
        assert_eq!(
            completion_notice("ingest:42", "SUCCEEDED"),
            r#"{"run_id": "ingest:42", "status": "SUCCEEDED"}"#
        );
        assert_eq!(parse_run_id("ingest:42"), Some(("ingest", 42)));
        for status in RunStatus::ALL {
            assert_eq!(RunStatus::parse(status.as_str()), Some(*status));
            assert_eq!(
                status.is_terminal(),
                TERMINAL_STATUSES.contains(&status.as_str())
            );
        }
        assert_eq!(
            RunStatus::ALL
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>(),
            RUN_STATUSES
        );
        assert_eq!(RunStatus::parse("succeeded"), None);
        assert_eq!("TIMED_OUT".parse(), Ok(RunStatus::TimedOut));
        assert_eq!(parse_run_id("a:b:7"), Some(("a:b", 7)));
        assert_eq!(parse_run_id("ingest"), None);
        assert_eq!(parse_run_id(":7"), None);
        assert_eq!(parse_run_id("ingest:x"), None);
        let id = s.idempotency_id("k1");
        assert!(id.starts_with("712c5ed1") && id.ends_with("52b7d"), "{id}");
    }
}
