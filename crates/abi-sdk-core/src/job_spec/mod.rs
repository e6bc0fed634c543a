//! Job declarations: [`JobSpec`] and its [`Trigger`]s, checked with the
//! reference's limits and messages (`naas_abi_sdk/jobs.py`), and turned into
//! the discovery descriptor exactly as the reference's `JobDescriptor.to_pb()`.

use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use prost::Message as _;

use crate::documents::json::{py_repr, to_py};

pub mod event_filter;

/// Most concurrent runs one job may declare (cluster-wide, across replicas).
pub const MAX_CONCURRENCY: u32 = 64;
/// Most attempts one run may take.
pub const MAX_ATTEMPTS: u32 = 100;
/// Largest schedule input, as canonical JSON.
pub const MAX_TRIGGER_INPUT_BYTES: usize = 4 * 1024;
/// Largest input or output schema, as canonical JSON.
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Largest descriptor, encoded.
pub const MAX_DESCRIPTOR_BYTES: usize = 64 * 1024;
/// The contract major every job declares today.
pub const JOB_CONTRACT_MAJOR: u32 = 1;

const CRON_ALIASES: [&str; 7] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
];

/// Why a declaration is refused; the message is the reference's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JobSpecError(pub String);

fn refuse<T>(message: impl Into<String>) -> Result<T, JobSpecError> {
    Err(JobSpecError(message.into()))
}

/// What makes a job run.
#[derive(Debug, Clone, PartialEq)]
pub enum Trigger {
    /// A 6-field cron (seconds first) or an alias (`@daily`), in `time_zone`
    /// (empty: UTC), each tick carrying `input` (a JSON object) as payload.
    Cron {
        /// The expression, stripped.
        expression: String,
        /// An IANA time zone, or empty.
        time_zone: String,
        /// Each tick's payload, canonical JSON text (empty: none).
        input: String,
    },
    /// A fixed interval, a Go duration (`"1h30m"`) of at least 1 s.
    Every {
        /// The interval as given.
        interval: String,
        /// Each tick's payload, canonical JSON text (empty: none).
        input: String,
    },
    /// Events on a core NATS subject, kept when they match `filter`.
    OnEvent {
        /// The subject (an event type's `evt.<hash>.>` for [`Trigger::on_event_type`]).
        subject: String,
        /// The EventBridge-style filter, `json.dumps(filter, sort_keys=True)`
        /// text (empty: every event).
        filter: String,
    },
}

impl Trigger {
    /// `Cron(expression, time_zone, input)`.
    ///
    /// # Errors
    ///
    /// An unknown alias, not 6 fields, or a bad input.
    pub fn cron(
        expression: &str,
        time_zone: &str,
        input: Option<&serde_json::Value>,
    ) -> Result<Self, JobSpecError> {
        let stripped = expression.trim();
        if stripped.starts_with('@') {
            if !CRON_ALIASES.contains(&stripped) {
                return refuse(format!("Unknown cron alias: {}", py_repr(expression)));
            }
        } else if stripped.split_whitespace().count() != 6 {
            return refuse("Cron needs 6 fields (seconds first), as NATS schedules do");
        }
        Ok(Self::Cron {
            expression: stripped.to_owned(),
            time_zone: time_zone.to_owned(),
            input: schedule_input(input)?,
        })
    }

    /// `Every(interval, input=...)`.
    ///
    /// # Errors
    ///
    /// Not a Go duration, under 1 s, or a bad input.
    pub fn every(interval: &str, input: Option<&serde_json::Value>) -> Result<Self, JobSpecError> {
        let seconds = go_duration_seconds(interval)?;
        if seconds < 1.0 {
            return refuse("NATS schedules fire at most once per second");
        }
        Ok(Self::Every {
            interval: interval.to_owned(),
            input: schedule_input(input)?,
        })
    }

    /// `Every(timedelta)`: a whole number of seconds, at least 1.
    ///
    /// # Errors
    ///
    /// Under 1 s or not whole seconds.
    pub fn every_duration(
        interval: Duration,
        input: Option<&serde_json::Value>,
    ) -> Result<Self, JobSpecError> {
        if interval.as_secs() < 1 || interval.subsec_nanos() != 0 {
            return refuse("Every needs a whole number of seconds, at least 1");
        }
        Self::every(&format!("{}s", interval.as_secs()), input)
    }

    /// `OnEvent(subject, filter=...)`.
    ///
    /// # Errors
    ///
    /// A filter the reference's `event_filter.validate` refuses, with its message.
    pub fn on_event(
        subject: &str,
        filter: Option<&serde_json::Value>,
    ) -> Result<Self, JobSpecError> {
        let filter = match filter {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::Object(map)) if map.is_empty() => String::new(),
            Some(value) => {
                event_filter::validate(value).map_err(JobSpecError)?;
                abi_pyjson::dumps_default(&to_py(value))
            }
        };
        Ok(Self::OnEvent {
            subject: subject.to_owned(),
            filter,
        })
    }

    /// `OnEvent(event_type=...)`: events of an ABI event type IRI.
    ///
    /// # Errors
    ///
    /// As [`Trigger::on_event`].
    pub fn on_event_type(
        event_type: &str,
        filter: Option<&serde_json::Value>,
    ) -> Result<Self, JobSpecError> {
        Self::on_event(&abi_wire::jobs::event_type_subject(event_type), filter)
    }

    /// The descriptor's `kind`: `cron`, `every` or `event`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Cron { .. } => "cron",
            Self::Every { .. } => "every",
            Self::OnEvent { .. } => "event",
        }
    }

    fn to_pb(&self) -> pb::JobTrigger {
        let (spec, time_zone, filter, input) = match self {
            Self::Cron {
                expression,
                time_zone,
                input,
            } => (expression, time_zone.as_str(), "", input.as_str()),
            Self::Every { interval, input } => (interval, "", "", input.as_str()),
            Self::OnEvent { subject, filter } => (subject, "", filter.as_str(), ""),
        };
        pb::JobTrigger {
            kind: self.kind().to_owned(),
            spec: spec.clone(),
            time_zone: time_zone.to_owned(),
            filter: filter.to_owned(),
            input: input.to_owned(),
        }
    }
}

/// A schedule's input as canonical JSON; empty for none (an empty object is none).
fn schedule_input(input: Option<&serde_json::Value>) -> Result<String, JobSpecError> {
    match input {
        None | Some(serde_json::Value::Null) => Ok(String::new()),
        Some(serde_json::Value::Object(map)) if map.is_empty() => Ok(String::new()),
        Some(value @ serde_json::Value::Object(_)) => {
            let text = abi_pyjson::dumps(&to_py(value));
            if text.len() > MAX_TRIGGER_INPUT_BYTES {
                return refuse(format!(
                    "A trigger input is at most {MAX_TRIGGER_INPUT_BYTES} bytes of JSON"
                ));
            }
            Ok(text)
        }
        Some(_) => refuse("A trigger input must be a dict (a JSON object)"),
    }
}

/// A JSON text a descriptor field holds, parsed (`None`: empty).
fn json_field(text: &str, what: &str) -> Result<Option<serde_json::Value>, JobSpecError> {
    if text.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(text)
        .map(Some)
        .map_err(|err| JobSpecError(format!("The {what} is not JSON: {err}")))
}

/// The reference's `schema_json` of a descriptor's schema string.
fn schema_text(text: &str, what: &str) -> Result<String, JobSpecError> {
    match json_field(text, what)? {
        None => Ok(String::new()),
        Some(value @ serde_json::Value::Object(_)) => schema_json(&value, what),
        Some(_) => refuse(format!("The {what} must be a JSON Schema object")),
    }
}

impl Trigger {
    /// The reference's `_trigger_from_pb`, with the checks of each trigger.
    ///
    /// # Errors
    ///
    /// An unknown kind, or what [`Trigger::cron`], [`Trigger::every`] or
    /// [`Trigger::on_event`] refuse.
    pub fn from_pb(trigger: &pb::JobTrigger) -> Result<Self, JobSpecError> {
        match trigger.kind.as_str() {
            "cron" => Self::cron(
                &trigger.spec,
                &trigger.time_zone,
                json_field(&trigger.input, "trigger input")?.as_ref(),
            ),
            "every" => Self::every(
                &trigger.spec,
                json_field(&trigger.input, "trigger input")?.as_ref(),
            ),
            "event" => Self::on_event(
                &trigger.spec,
                json_field(&trigger.filter, "event filter")?.as_ref(),
            ),
            other => refuse(format!("Unknown job trigger kind: {}", py_repr(other))),
        }
    }
}

/// Seconds in a Go duration (`"1h30m"`, `"1.5s"`), as NATS headers write them.
///
/// # Errors
///
/// `Not a Go duration: '<text>'`.
pub fn go_duration_seconds(text: &str) -> Result<f64, JobSpecError> {
    let bad = || JobSpecError(format!("Not a Go duration: {}", py_repr(text)));
    let mut rest = text;
    let mut total = 0.0;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        if int_len == 0 {
            return Err(bad());
        }
        let mut len = int_len;
        if rest[len..].starts_with('.') {
            let frac = rest[len + 1..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            if frac == 0 {
                return Err(bad());
            }
            len += 1 + frac;
        }
        let number: f64 = rest[..len].parse().map_err(|_| bad())?;
        rest = &rest[len..];
        let (unit, scale) = [
            ("ns", 1e-9),
            ("us", 1e-6),
            ("µs", 1e-6),
            ("ms", 1e-3),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
        ]
        .into_iter()
        .find(|(unit, _)| rest.starts_with(unit))
        .ok_or_else(bad)?;
        rest = &rest[unit.len()..];
        total += number * scale;
    }
    Ok(total)
}

/// A job a module declares: what the reference's `JobDescriptor` holds.
///
/// ```
/// use std::time::Duration;
/// use abi_sdk_core::job_spec::{JobSpec, Trigger};
/// let spec = JobSpec::new("ingest")?
///     .description("Pull the day's invoices")
///     .trigger(Trigger::cron("0 0 2 * * *", "Europe/Paris", None)?)?
///     .max_concurrency(4)?
///     .max_attempts(3)?
///     .timeout(Duration::from_secs(600))?;
/// assert_eq!(spec.to_descriptor().max_attempts, 3);
/// # Ok::<(), abi_sdk_core::job_spec::JobSpecError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    name: String,
    description: String,
    triggers: Vec<Trigger>,
    max_concurrency: u32,
    timeout: Option<Duration>,
    max_attempts: u32,
    kind: String,
    input_schema: String,
    output_schema: String,
    coalesce_ticks: bool,
}

impl JobSpec {
    /// A job `name` (`[A-Za-z0-9_][A-Za-z0-9_.:-]{0,255}`): no trigger but
    /// manual ones, one run at a time, one attempt, no timeout.
    ///
    /// # Errors
    ///
    /// `Invalid job name: '<name>'`.
    pub fn new(name: impl Into<String>) -> Result<Self, JobSpecError> {
        let name = name.into();
        if !valid_name(&name) {
            return refuse(format!("Invalid job name: {}", py_repr(&name)));
        }
        Ok(Self {
            name,
            description: String::new(),
            triggers: Vec::new(),
            max_concurrency: 1,
            timeout: None,
            max_attempts: 1,
            kind: "job".to_owned(),
            input_schema: String::new(),
            output_schema: String::new(),
            coalesce_ticks: false,
        })
    }

    /// The description (default empty).
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Adds a trigger (default none: runs only when triggered by a caller).
    ///
    /// # Errors
    ///
    /// More than [`abi_wire::jobs::MAX_TRIGGERS`].
    pub fn trigger(mut self, trigger: Trigger) -> Result<Self, JobSpecError> {
        if self.triggers.len() >= abi_wire::jobs::MAX_TRIGGERS {
            return refuse(format!(
                "At most {} triggers per job",
                abi_wire::jobs::MAX_TRIGGERS
            ));
        }
        self.triggers.push(trigger);
        Ok(self)
    }

    /// Most runs at once across every host of the job (default 1).
    ///
    /// # Errors
    ///
    /// Outside `1..=64`.
    pub fn max_concurrency(mut self, n: u32) -> Result<Self, JobSpecError> {
        if !(1..=MAX_CONCURRENCY).contains(&n) {
            return refuse("max_concurrency must be between 1 and 64");
        }
        self.max_concurrency = n;
        Ok(self)
    }

    /// Most handler starts per run (default 1).
    ///
    /// # Errors
    ///
    /// Outside `1..=100`.
    pub fn max_attempts(mut self, n: u32) -> Result<Self, JobSpecError> {
        if !(1..=MAX_ATTEMPTS).contains(&n) {
            return refuse("max_attempts must be between 1 and 100");
        }
        self.max_attempts = n;
        Ok(self)
    }

    /// How long one attempt may run (default: no limit).
    ///
    /// # Errors
    ///
    /// A zero timeout.
    pub fn timeout(mut self, timeout: Duration) -> Result<Self, JobSpecError> {
        if timeout.is_zero() {
            return refuse("timeout must be positive");
        }
        self.timeout = Some(timeout);
        Ok(self)
    }

    /// The input's JSON Schema, an object (default none).
    ///
    /// # Errors
    ///
    /// Not an object, or over 16 KiB as canonical JSON.
    pub fn input_schema(mut self, schema: &serde_json::Value) -> Result<Self, JobSpecError> {
        self.input_schema = schema_json(schema, "input schema")?;
        Ok(self)
    }

    /// The output's JSON Schema, an object (default none).
    ///
    /// # Errors
    ///
    /// As [`JobSpec::input_schema`].
    pub fn output_schema(mut self, schema: &serde_json::Value) -> Result<Self, JobSpecError> {
        self.output_schema = schema_json(schema, "output schema")?;
        Ok(self)
    }

    /// The same job declared as a workflow (kind `workflow`, the
    /// reference's `declare_workflow`): its steps are journaled. Its input
    /// schema is `{"type": "object"}` unless one was given (before or
    /// after), as the reference declares a workflow's input.
    #[must_use]
    pub fn as_workflow(mut self) -> Self {
        abi_wire::workflows::KIND.clone_into(&mut self.kind);
        if self.input_schema.is_empty()
            && let Ok(object) = schema_json(&serde_json::json!({"type": "object"}), "input schema")
        {
            self.input_schema = object;
        }
        self
    }

    /// The declared input schema as canonical JSON, empty when none.
    pub fn input_schema_json(&self) -> &str {
        &self.input_schema
    }

    /// The declared output schema as canonical JSON, empty when none.
    pub fn output_schema_json(&self) -> &str {
        &self.output_schema
    }

    /// The job's kind: `job` or `workflow`.
    pub fn job_kind(&self) -> &str {
        &self.kind
    }

    /// Whether our hosts skip a schedule tick that fired while another run
    /// of the job was going (default off, the reference's behaviour: ticks
    /// wait and run back to back). Such a tick is recorded SKIPPED with the
    /// other run in its `skip_reason`, and acknowledged; runs of every host
    /// count, as their records show them. A host option, not part of the
    /// descriptor: a Python host serving the same job runs its ticks.
    #[must_use]
    pub fn coalesce_ticks(mut self, coalesce: bool) -> Self {
        self.coalesce_ticks = coalesce;
        self
    }

    /// Whether schedule ticks are coalesced ([`JobSpec::coalesce_ticks`]).
    pub fn coalesces_ticks(&self) -> bool {
        self.coalesce_ticks
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The declared triggers, in order.
    pub fn triggers(&self) -> &[Trigger] {
        &self.triggers
    }

    /// Most runs at once.
    pub fn concurrency(&self) -> u32 {
        self.max_concurrency
    }

    /// Most attempts per run.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The attempt timeout, if any.
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Checks the whole declaration (the reference checks it on creation).
    ///
    /// # Errors
    ///
    /// A descriptor over 64 KiB encoded.
    pub fn validate(&self) -> Result<(), JobSpecError> {
        let size = self.to_descriptor().encoded_len();
        if size > MAX_DESCRIPTOR_BYTES {
            return refuse(format!(
                "Job {} describes itself in {size} bytes; at most {MAX_DESCRIPTOR_BYTES}",
                py_repr(&self.name)
            ));
        }
        Ok(())
    }

    /// Reads a descriptor back as the reference's `JobDescriptor.from_pb`
    /// does, with its checks: what it refuses here, a Python caller would
    /// refuse to decode (every `ModuleProxy` call on the module would fail).
    ///
    /// # Errors
    ///
    /// The reference's message for the first problem: a bad name, limits,
    /// kind, trigger (a 5-field cron, a bad interval, filter or input) or
    /// schema, or a descriptor over 64 KiB.
    pub fn from_descriptor(descriptor: &pb::JobDescriptor) -> Result<Self, JobSpecError> {
        let mut spec = Self::new(descriptor.name.clone())?
            .description(descriptor.description.clone())
            .max_concurrency(descriptor.max_concurrency)?
            .max_attempts(descriptor.max_attempts)?;
        if descriptor.timeout_seconds != 0.0 {
            let seconds = descriptor.timeout_seconds;
            if seconds.is_nan() || seconds <= 0.0 || seconds.is_infinite() {
                return refuse("timeout must be positive");
            }
            spec = spec.timeout(Duration::from_secs_f64(seconds))?;
        }
        if descriptor.triggers.len() > abi_wire::jobs::MAX_TRIGGERS {
            return refuse(format!(
                "At most {} triggers per job",
                abi_wire::jobs::MAX_TRIGGERS
            ));
        }
        for trigger in &descriptor.triggers {
            spec = spec.trigger(Trigger::from_pb(trigger)?)?;
        }
        let kind = match descriptor.kind.as_str() {
            "" => "job",
            kind => kind,
        };
        if !abi_wire::jobs::JOB_KINDS.contains(&kind) {
            return refuse(format!(
                "Job kind must be one of ('job', 'workflow'), not {}",
                py_repr(kind)
            ));
        }
        kind.clone_into(&mut spec.kind);
        spec.input_schema = schema_text(&descriptor.input_schema, "input schema")?;
        spec.output_schema = schema_text(&descriptor.output_schema, "output schema")?;
        spec.validate()?;
        Ok(spec)
    }

    /// The descriptor discovery keeps, as the reference's `to_pb()` builds it.
    pub fn to_descriptor(&self) -> pb::JobDescriptor {
        pb::JobDescriptor {
            name: self.name.clone(),
            description: self.description.clone(),
            contract_major: JOB_CONTRACT_MAJOR,
            triggers: self.triggers.iter().map(Trigger::to_pb).collect(),
            max_concurrency: self.max_concurrency,
            max_attempts: self.max_attempts,
            timeout_seconds: self.timeout.map_or(0.0, |t| t.as_secs_f64()),
            kind: self.kind.clone(),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
        }
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphanumeric() || first == '_')
        && name.len() <= 256
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c))
}

fn schema_json(schema: &serde_json::Value, what: &str) -> Result<String, JobSpecError> {
    match schema {
        serde_json::Value::Null => Ok(String::new()),
        serde_json::Value::Object(_) => {
            let text = abi_pyjson::dumps(&to_py(schema));
            if text.len() > MAX_SCHEMA_BYTES {
                return refuse(format!(
                    "The {what} is {} bytes; at most {MAX_SCHEMA_BYTES} (keep descriptors small, link to docs for the rest)",
                    text.len()
                ));
            }
            Ok(text)
        }
        _ => refuse(format!("The {what} must be a JSON Schema object")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn descriptors_read_back_with_the_references_checks() {
        let good = JobSpec::new("ingest")
            .unwrap()
            .trigger(Trigger::cron("0 0 2 * * *", "UTC", Some(&json!({"a": 1}))).unwrap())
            .unwrap()
            .trigger(Trigger::every("1h", None).unwrap())
            .unwrap()
            .trigger(Trigger::on_event("x.y", Some(&json!({"k": ["v"]}))).unwrap())
            .unwrap()
            .max_attempts(3)
            .unwrap()
            .timeout(Duration::from_secs(90))
            .unwrap()
            .input_schema(&json!({"type": "object"}))
            .unwrap();
        let read = JobSpec::from_descriptor(&good.to_descriptor()).unwrap();
        assert_eq!(read.to_descriptor(), good.to_descriptor());
        let with = |f: &dyn Fn(&mut pb::JobDescriptor)| {
            let mut descriptor = good.to_descriptor();
            f(&mut descriptor);
            JobSpec::from_descriptor(&descriptor).map_err(|e| e.0)
        };
        let five_fields = |d: &mut pb::JobDescriptor| d.triggers[0].spec = "0 2 * * *".into();
        assert_eq!(
            with(&five_fields).unwrap_err(),
            "Cron needs 6 fields (seconds first), as NATS schedules do"
        );
        assert_eq!(
            with(&|d| d.triggers[1].spec = "soon".into()).unwrap_err(),
            "Not a Go duration: 'soon'"
        );
        assert_eq!(
            with(&|d| d.triggers[0].kind = "hourly".into()).unwrap_err(),
            "Unknown job trigger kind: 'hourly'"
        );
        assert_eq!(
            with(&|d| d.max_concurrency = 0).unwrap_err(),
            "max_concurrency must be between 1 and 64"
        );
        assert_eq!(
            with(&|d| d.max_attempts = 0).unwrap_err(),
            "max_attempts must be between 1 and 100"
        );
        assert_eq!(
            with(&|d| d.timeout_seconds = -1.0).unwrap_err(),
            "timeout must be positive"
        );
        assert_eq!(
            with(&|d| d.kind = "batch".into()).unwrap_err(),
            "Job kind must be one of ('job', 'workflow'), not 'batch'"
        );
        assert_eq!(
            with(&|d| d.input_schema = "[1]".into()).unwrap_err(),
            "The input schema must be a JSON Schema object"
        );
        assert_eq!(
            with(&|d| d.name = "bad name".into()).unwrap_err(),
            "Invalid job name: 'bad name'"
        );
        // A descriptor written before `kind` existed is a job.
        assert!(with(&|d| d.kind = String::new()).is_ok());
    }

    #[test]
    fn names_and_limits_are_the_references() {
        assert!(JobSpec::new("ingest.daily:v1-x").is_ok());
        assert_eq!(
            JobSpec::new("-bad").unwrap_err().to_string(),
            "Invalid job name: '-bad'"
        );
        assert!(JobSpec::new("a".repeat(256)).is_ok());
        assert!(JobSpec::new("a".repeat(257)).is_err());
        let spec = JobSpec::new("j").unwrap();
        assert_eq!(
            spec.clone().max_concurrency(65).unwrap_err().to_string(),
            "max_concurrency must be between 1 and 64"
        );
        assert_eq!(
            spec.clone().max_attempts(0).unwrap_err().to_string(),
            "max_attempts must be between 1 and 100"
        );
        assert_eq!(
            spec.timeout(Duration::ZERO).unwrap_err().to_string(),
            "timeout must be positive"
        );
        assert_eq!(
            Trigger::cron("* * *", "", None).unwrap_err().to_string(),
            "Cron needs 6 fields (seconds first), as NATS schedules do"
        );
        assert_eq!(
            Trigger::every("500ms", None).unwrap_err().to_string(),
            "NATS schedules fire at most once per second"
        );
        assert_eq!(
            Trigger::every("5x", None).unwrap_err().to_string(),
            "Not a Go duration: '5x'"
        );
        assert_eq!(go_duration_seconds("1h30m").unwrap(), 5400.0);
        assert_eq!(go_duration_seconds("1.5s").unwrap(), 1.5);
    }

    #[test]
    fn coalescing_ticks_leaves_the_descriptor_unchanged() {
        let spec = JobSpec::new("poll")
            .unwrap()
            .trigger(Trigger::every("1s", None).unwrap())
            .unwrap();
        let coalesced = spec.clone().coalesce_ticks(true);
        assert!(coalesced.coalesces_ticks() && !spec.coalesces_ticks());
        assert_eq!(
            coalesced.to_descriptor().encode_to_vec(),
            spec.to_descriptor().encode_to_vec()
        );
    }

    #[test]
    fn inputs_are_canonical_and_filters_use_default_separators() {
        let every = Trigger::every("10s", Some(&json!({"b": 1, "a": [1, 2]}))).unwrap();
        assert_eq!(every.to_pb().input, r#"{"a":[1,2],"b":1}"#);
        let event =
            Trigger::on_event("x.y", Some(&json!({"b": "1", "a": {"prefix": "n/"}}))).unwrap();
        assert_eq!(event.to_pb().filter, r#"{"a": {"prefix": "n/"}, "b": "1"}"#);
    }
}
