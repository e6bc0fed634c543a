//! [`JobClient`]: the caller side of one job of any module (the reference's
//! `JobProxy`): store a trigger on the jobs stream, get a [`JobRun`].
//!
//! Triggers carry exactly the reference's headers and body, so a Python host
//! and a Rust host of the job cannot tell who sent them.

pub mod run;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing::Instrument as _;

use abi_proto::discovery::v1 as pb;
use abi_wire::ErrorCode;
use abi_wire::jobs::{self, JobSubjects};
use async_nats::HeaderMap;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::stream::ConsumerCreateStrictErrorKind;
use bytes::Bytes;
use futures::StreamExt as _;
use tracing::{debug, warn};

use self::run::JobRun;
use crate::claim_check::{self, ClaimCheckError};
use crate::host::JobHostOptions;
use crate::host::consumer_config;
use abi_sdk_core::DiscoveryClient;
use abi_sdk_core::DocumentClient;
use abi_sdk_core::ModuleProxy;
use abi_sdk_core::TokenSource;
use abi_sdk_core::{CallError, Error, kind_display};

/// How long a trigger may wait for the stream's acknowledgement unless set
/// otherwise: a stored message is acknowledged in milliseconds; past this
/// the stream (or its leader) is not there.
pub const DEFAULT_TRIGGER_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes the reference keeps free under `max_payload` beyond the message's
/// own headers (its `claim_check.prepare` reserve, next to the
/// `Nats-Expected-Stream` header).
const PAYLOAD_RESERVE: usize = 16;

/// Why a trigger was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TriggerErrorKind {
    /// The client runs against an in-process service: jobs need NATS.
    NoConnection,
    /// The payload is above the claim-check limit (256 MiB): send a
    /// storage reference instead.
    PayloadTooLarge,
    /// The payload needed a claim check and the claim-check store could
    /// not be opened or written.
    ClaimCheck,
    /// No jobs stream for the project (discovery prepares it before serving).
    StreamNotFound,
    /// The stream did not acknowledge before the deadline; the trigger may
    /// still have been stored.
    TimedOut,
    /// The NATS connection or the stream failed.
    Transport,
    /// No instance of the module is registered (`MODULE_NOT_FOUND`).
    ModuleNotFound,
    /// No registered instance of the module declares the job
    /// (`JOB_NOT_FOUND`; the message lists the jobs it declares).
    JobNotFound,
    /// Discovery could not be asked which jobs the module declares (see the
    /// source [`CallError`]).
    Lookup,
}

kind_display!(TriggerErrorKind {
    NoConnection => "no NATS connection",
    PayloadTooLarge => "payload too large",
    ClaimCheck => "claim check not stored",
    StreamNotFound => "jobs stream not found",
    TimedOut => "timed out",
    Transport => "transport error",
    ModuleNotFound => "module not found",
    JobNotFound => "job not found",
    Lookup => "job lookup failed",
});

/// A failed [`JobClient::trigger`].
pub type TriggerError = Error<TriggerErrorKind>;

/// One job of one module: triggers it and hands out run handles.
///
/// Cheap to clone. Nothing is checked on construction: triggers of a job no
/// host serves stay `QUEUED` (as the reference's `ABIClient.get_job`); use
/// [`JobClient::resolve`] to require the job on a READY instance first.
#[derive(Clone, Debug)]
pub struct JobClient {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) nats: async_nats::Client,
    pub(crate) project: String,
    pub(crate) module_id: String,
    pub(crate) job: String,
    pub(crate) subjects: JobSubjects,
    pub(crate) documents: DocumentClient,
    pub(crate) trigger_timeout: Duration,
    /// The job's declared `max_concurrency`, for a consumer this client
    /// creates (1, the reference's default, until [`JobClient::resolve`]
    /// reads the descriptor; a host's start rewrites it anyway).
    pub(crate) max_concurrency: u32,
    /// Whether the job's durable consumer is known to exist.
    pub(crate) consumer_ready: AtomicBool,
    /// The caller's token, sent with cancels.
    pub(crate) token: Arc<TokenSource>,
    /// The job as a registered instance declares it (set by
    /// [`JobClient::from_discovery`]): its schedules, for a resume.
    pub(crate) declared: Option<crate::JobSpec>,
}

impl JobClient {
    /// The job `job` of `module_id` in `project`, over `nats`, reading run
    /// records with `token` (the reference's `ABIClient.get_job`).
    pub fn new(
        nats: async_nats::Client,
        token: TokenSource,
        project: impl Into<String>,
        module_id: impl Into<String>,
        job: impl Into<String>,
    ) -> Self {
        let module_id = module_id.into();
        let token = Arc::new(token);
        let documents =
            DocumentClient::with_shared_token(nats.clone(), token.clone(), module_id.clone());
        Self::build(
            nats,
            documents,
            token,
            project.into(),
            module_id,
            job.into(),
        )
    }

    /// The job `job` of `module_id` in `project`, over `nats`, reading run
    /// records and signing cancels with `documents`' token (a workflow's
    /// host calling another module's workflow with its own identity).
    pub fn with_documents(
        nats: async_nats::Client,
        documents: &DocumentClient,
        project: impl Into<String>,
        module_id: impl Into<String>,
        job: impl Into<String>,
    ) -> Self {
        let module_id = module_id.into();
        Self::build(
            nats,
            documents.for_namespace(module_id.clone()),
            documents.token_source(),
            project.into(),
            module_id,
            job.into(),
        )
    }

    /// The job `job` of `module_id` in `client`'s project, over its NATS
    /// connection and token, once discovery shows a registered instance of
    /// the module (in any status: a trigger may wait for its hosts) that
    /// declares it. Nothing is created for a job nobody declares; to
    /// trigger one anyway (a module not deployed yet), use
    /// [`JobClient::unchecked`].
    ///
    /// # Errors
    ///
    /// `ModuleNotFound`, `JobNotFound` (naming the jobs the module
    /// declares), `Lookup` when discovery did not answer, `NoConnection`
    /// when `client` talks to an in-process service.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads the registry.
    pub async fn from_discovery(
        client: &DiscoveryClient,
        module_id: &str,
        job: &str,
    ) -> Result<Self, TriggerError> {
        let unchecked = Self::unchecked(client, module_id, job)?;
        let mut registered = false;
        let mut declared: Vec<pb::JobDescriptor> = Vec::new();
        let mut instances = std::pin::pin!(client.list_all());
        while let Some(instance) = instances.next().await {
            let instance = instance.map_err(|e| {
                TriggerError::new(
                    TriggerErrorKind::Lookup,
                    format!("could not look up the jobs of {module_id}"),
                )
                .with_source(e)
            })?;
            let Some(descriptor) = instance.descriptor else {
                continue;
            };
            if descriptor.module_id != module_id {
                continue;
            }
            registered = true;
            for job in descriptor.jobs {
                if !declared.iter().any(|d| d.name == job.name) {
                    declared.push(job);
                }
            }
        }
        if !registered {
            return Err(TriggerError::new(
                TriggerErrorKind::ModuleNotFound,
                format!("no instance of {module_id} is registered"),
            )
            .with_code(ErrorCode::ModuleNotFound.as_str()));
        }
        let Some(found) = declared.iter().find(|d| d.name == job) else {
            let mut names: Vec<&str> = declared.iter().map(|d| d.name.as_str()).collect();
            names.sort_unstable();
            let listed = if names.is_empty() {
                "it declares no job".to_owned()
            } else {
                format!("its jobs: {}", names.join(", "))
            };
            return Err(TriggerError::new(
                TriggerErrorKind::JobNotFound,
                format!("{module_id} declares no job {job:?}; {listed}"),
            )
            .with_code(ErrorCode::JobNotFound.as_str()));
        };
        let max_concurrency = found.max_concurrency.max(1);
        // A declaration the registry took is valid; one that is not (an
        // older writer) only leaves resume without schedules to publish.
        let declared = crate::JobSpec::from_descriptor(found).ok();
        Ok(unchecked.rebuilt(|inner| {
            inner.max_concurrency = max_concurrency;
            inner.declared = declared;
        }))
    }

    /// The job `job` of `module_id` in `client`'s project, over its NATS
    /// connection and token, without asking discovery whether anything
    /// declares it (a trigger for a module not deployed yet waits on the
    /// stream for its first host).
    ///
    /// # Errors
    ///
    /// `NoConnection` when `client` talks to an in-process service.
    pub fn unchecked(
        client: &DiscoveryClient,
        module_id: &str,
        job: &str,
    ) -> Result<Self, TriggerError> {
        let no_nats = || {
            TriggerError::new(
                TriggerErrorKind::NoConnection,
                "jobs need a NATS connection; this client is in-process",
            )
        };
        let nats = client.nats().ok_or_else(no_nats)?.clone();
        let documents = client.documents(module_id).ok_or_else(no_nats)?;
        Ok(Self::build(
            nats,
            documents,
            client.token(),
            client.project().to_owned(),
            module_id.to_owned(),
            job.to_owned(),
        ))
    }

    /// The job `job` of `proxy`'s module, once a READY instance declares it
    /// (the reference's `ModuleProxy.get_job`).
    ///
    /// # Errors
    ///
    /// `JobNotFound` (or as [`ModuleProxy::ready_instances`]); `Other` for an
    /// in-process proxy, which cannot carry jobs.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn resolve(proxy: &ModuleProxy, job: &str) -> Result<Self, CallError> {
        let found = proxy.job(job).await?;
        let client = Self::unchecked(proxy.client(), proxy.module_id(), &found.descriptor.name)
            .map_err(|e| {
                CallError::new(abi_sdk_core::CallErrorKind::Other, e.message().to_owned())
                    .with_source(e)
            })?;
        Ok(client.rebuilt(|inner| {
            inner.max_concurrency = found.descriptor.max_concurrency.max(1);
        }))
    }

    fn build(
        nats: async_nats::Client,
        documents: DocumentClient,
        token: Arc<TokenSource>,
        project: String,
        module_id: String,
        job: String,
    ) -> Self {
        let subjects = JobSubjects::new(&project, &module_id, &job);
        Self {
            inner: Arc::new(Inner {
                nats,
                project,
                module_id,
                job,
                subjects,
                documents,
                trigger_timeout: DEFAULT_TRIGGER_TIMEOUT,
                max_concurrency: 1,
                consumer_ready: AtomicBool::new(false),
                token,
                declared: None,
            }),
        }
    }

    /// The same client waiting at most `timeout` for a trigger's
    /// acknowledgement (default [`DEFAULT_TRIGGER_TIMEOUT`]).
    #[must_use]
    pub fn trigger_timeout(self, timeout: Duration) -> Self {
        self.rebuilt(|inner| inner.trigger_timeout = timeout)
    }

    /// A copy of this client's settings, changed by `change`.
    fn rebuilt(self, change: impl FnOnce(&mut Inner)) -> Self {
        let inner = &self.inner;
        let mut copy = Inner {
            nats: inner.nats.clone(),
            project: inner.project.clone(),
            module_id: inner.module_id.clone(),
            job: inner.job.clone(),
            subjects: inner.subjects.clone(),
            documents: inner.documents.clone(),
            trigger_timeout: inner.trigger_timeout,
            max_concurrency: inner.max_concurrency,
            consumer_ready: AtomicBool::new(inner.consumer_ready.load(Ordering::Relaxed)),
            token: inner.token.clone(),
            declared: inner.declared.clone(),
        };
        change(&mut copy);
        Self {
            inner: Arc::new(copy),
        }
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.inner.job
    }

    /// The module serving the job.
    pub fn module_id(&self) -> &str {
        &self.inner.module_id
    }

    /// The project.
    pub fn project(&self) -> &str {
        &self.inner.project
    }

    /// The documents of the job's module (its namespace, the caller's
    /// token), where its run records are.
    pub fn documents(&self) -> &DocumentClient {
        &self.inner.documents
    }

    /// The job's subjects (trigger, cancel, completion notices).
    pub fn subjects(&self) -> &JobSubjects {
        &self.inner.subjects
    }

    /// Stores a trigger; the run starts when a host takes it.
    ///
    /// The message is the reference's: body `json.dumps(payload or {})`
    /// (`null` counts as empty; object keys come out sorted, where Python
    /// keeps a dict's insertion order), headers `Abi-Job-Trigger: manual`,
    /// `Nats-TTL: 168h`, and with `idempotency_key` the `Nats-Msg-Id` that
    /// makes a repeat within the stream's duplicate window (2 minutes) the
    /// same run, returned with [`JobRun::duplicate`] set.
    ///
    /// A message that would not fit the broker's `max_payload` (headers and
    /// the stream header counted, as the reference counts them) is sent as a
    /// claim check: the body goes to the `abi_claim_checks` object store and
    /// the trigger carries an empty body with `Abi-Claim-Check` and
    /// `Abi-Claim-Check-Size`, exactly as the reference's `JobProxy.trigger`.
    ///
    /// # Errors
    ///
    /// `PayloadTooLarge` above 256 MiB, `ClaimCheck` when a needed claim
    /// check cannot be stored, `StreamNotFound`, `TimedOut`, `Transport`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe: a cancelled call may still have stored the trigger
    /// (repeat it with the same key to learn its run).
    pub async fn trigger(
        &self,
        payload: serde_json::Value,
        idempotency_key: Option<&str>,
    ) -> Result<JobRun, TriggerError> {
        let inner = &self.inner;
        let body = trigger_body(&payload);
        let stream = jobs::stream(&inner.project);
        let mut headers = HeaderMap::new();
        headers.insert(jobs::TRIGGER_HEADER, jobs::MANUAL_TRIGGER);
        headers.insert(jobs::TTL_HEADER, jobs::MANUAL_TRIGGER_TTL);
        if let Some(key) = idempotency_key.filter(|k| !k.is_empty()) {
            headers.insert(
                async_nats::header::NATS_MESSAGE_ID,
                inner.subjects.idempotency_id(key).as_str(),
            );
        }
        headers.insert(async_nats::header::NATS_EXPECTED_STREAM, stream.as_str());
        // The run continues this trace: its host reads `traceparent` off the
        // stored trigger (before the claim-check threshold, as the
        // reference counts it).
        let span =
            abi_sdk_core::traces::client_span(&inner.subjects.trigger(), body.len(), &mut headers);
        let max = inner.nats.max_payload();
        let mut js = async_nats::jetstream::new(inner.nats.clone());
        js.set_timeout(inner.trigger_timeout);
        let mut body = Bytes::from(body);
        if needs_claim_check(body.len(), &headers, max) {
            // Too large for one message: the body travels as a claim check.
            let stored =
                tokio::time::timeout(inner.trigger_timeout, claim_check::store(&js, &body, max))
                    .await
                    .map_err(|_| {
                        TriggerError::new(
                            TriggerErrorKind::TimedOut,
                            "claim check not stored in time",
                        )
                    })?;
            let name = stored.map_err(|e| {
                let kind = match e {
                    ClaimCheckError::TooLarge { .. } => TriggerErrorKind::PayloadTooLarge,
                    ClaimCheckError::Store { .. } => TriggerErrorKind::ClaimCheck,
                };
                TriggerError::new(kind, e.to_string()).with_source(e)
            })?;
            headers.insert(jobs::CLAIM_CHECK_HEADER, name.as_str());
            headers.insert(
                jobs::CLAIM_CHECK_SIZE_HEADER,
                body.len().to_string().as_str(),
            );
            body = Bytes::new();
        }
        self.ensure_consumer(&js).await;
        let subject = inner.subjects.trigger();
        let sent =
            async { js.publish_with_headers(subject, headers, body).await?.await }.instrument(span);
        let ack = tokio::time::timeout(inner.trigger_timeout, sent)
            .await
            .map_err(|_| {
                TriggerError::new(TriggerErrorKind::TimedOut, "no acknowledgement in time")
            })?
            .map_err(|e| {
                let kind = match e.kind() {
                    PublishErrorKind::StreamNotFound => TriggerErrorKind::StreamNotFound,
                    PublishErrorKind::TimedOut => TriggerErrorKind::TimedOut,
                    PublishErrorKind::MaxPayloadExceeded => TriggerErrorKind::PayloadTooLarge,
                    _ => TriggerErrorKind::Transport,
                };
                TriggerError::new(kind, format!("trigger of {} not stored", inner.job))
                    .with_source(e)
            })?;
        Ok(JobRun::new(
            self.clone(),
            jobs::run_id(&inner.job, ack.sequence),
            ack.duplicate,
            true,
        ))
    }

    /// Makes sure the job's durable consumer exists before the first
    /// trigger (better than the reference, whose hosts create it with
    /// `DeliverPolicy.NEW` on their first start, so a trigger stored before
    /// that is never delivered): creates it, create-only, with exactly the
    /// config a host creates ([`consumer_config`]: the host's default
    /// `ack_wait` and this job's `max_concurrency`), so a Python or Rust
    /// host starting later finds it unchanged. An existing consumer is left
    /// as it is. Failures are logged and the trigger still goes out (as
    /// safe as the reference's); the check repeats on the next trigger.
    async fn ensure_consumer(&self, js: &async_nats::jetstream::Context) {
        let inner = &self.inner;
        if inner.consumer_ready.load(Ordering::Relaxed) {
            return;
        }
        let config = consumer_config(
            &inner.subjects,
            inner.max_concurrency,
            JobHostOptions::default().ack_wait,
        );
        let stream = jobs::stream(&inner.project);
        match js.create_consumer_strict_on_stream(config, stream).await {
            Ok(_) => {
                debug!(job = %inner.job, consumer = %inner.subjects.consumer(), "created the job's consumer before its first trigger");
                inner.consumer_ready.store(true, Ordering::Relaxed);
            }
            Err(e) if e.kind() == ConsumerCreateStrictErrorKind::AlreadyExists => {
                inner.consumer_ready.store(true, Ordering::Relaxed);
            }
            // No stream: the publish fails next and reports it.
            Err(e)
                if matches!(e.kind(), ConsumerCreateStrictErrorKind::JetStream(ref js)
                    if js.error_code() == async_nats::jetstream::ErrorCode::STREAM_NOT_FOUND) => {}
            Err(e) => {
                warn!(job = %inner.job, error = %e, "could not make sure the job's consumer exists");
            }
        }
    }

    /// A handle on an existing run of this job (from its id). It only
    /// reads: [`JobRun::status`] answers `RunNotFound` for an id no trigger
    /// of this job was stored under.
    pub fn run(&self, run_id: impl Into<String>) -> JobRun {
        JobRun::new(self.clone(), run_id.into(), false, false)
    }

    /// A handle on a run whose trigger the caller knows was stored (it
    /// triggered the run itself, maybe in an earlier process, and kept the
    /// id): like [`JobClient::trigger`]'s, its [`JobRun::status`] ends the
    /// run `FAILED` with [`abi_wire::jobs::EXPIRED_UNRUN_ERROR`] (stored,
    /// create-only) once the trigger left the stream unrun.
    pub fn triggered_run(&self, run_id: impl Into<String>) -> JobRun {
        JobRun::new(self.clone(), run_id.into(), false, true)
    }
}

/// `json.dumps(payload or {})`: Python's default separators, ASCII escapes;
/// an empty payload (`null`, `{}`, `[]`, `""`, `0`, `false`) is `{}`.
pub(crate) fn trigger_body(payload: &serde_json::Value) -> String {
    use serde_json::Value as J;
    let empty = match payload {
        J::Null => true,
        J::Bool(b) => !b,
        J::Number(n) => n.as_f64() == Some(0.0),
        J::String(s) => s.is_empty(),
        J::Array(a) => a.is_empty(),
        J::Object(o) => o.is_empty(),
    };
    if empty {
        return "{}".to_owned();
    }
    abi_pyjson::dumps_default(&to_pyjson(payload))
}

fn to_pyjson(value: &serde_json::Value) -> abi_pyjson::Json {
    use abi_pyjson::Json;
    use serde_json::Value as J;
    match value {
        J::Null => Json::Null,
        J::Bool(b) => Json::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Json::Int(i),
            (None, Some(u), _) => Json::BigInt(u.to_string()),
            (None, None, Some(x)) => Json::Float(x),
            // serde_json numbers are always one of the three.
            (None, None, None) => Json::Null,
        },
        J::String(s) => Json::Str(s.clone()),
        J::Array(items) => Json::Array(items.iter().map(to_pyjson).collect()),
        J::Object(map) => {
            Json::Object(map.iter().map(|(k, v)| (k.clone(), to_pyjson(v))).collect())
        }
    }
}

/// Whether a body of `body_len` bytes with `headers` (the stream header
/// included) exceeds `max_payload` by the reference's count
/// (`claim_check.prepare`: body, header block, and 16 bytes kept free).
fn needs_claim_check(body_len: usize, headers: &HeaderMap, max_payload: usize) -> bool {
    max_payload > 0 && body_len + header_block_len(headers) + PAYLOAD_RESERVE > max_payload
}

/// Bytes of the `NATS/1.0` header block `headers` become on the wire.
fn header_block_len(headers: &HeaderMap) -> usize {
    let fields: usize = headers
        .iter()
        .map(|(name, values)| {
            values
                .iter()
                .map(|v| AsRef::<str>::as_ref(name).len() + 2 + v.as_str().len() + 2)
                .sum::<usize>()
        })
        .sum();
    "NATS/1.0\r\n".len() + fields + 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_body_is_python_json_dumps_of_the_payload_or_an_empty_object() {
        assert_eq!(trigger_body(&json!(null)), "{}");
        assert_eq!(trigger_body(&json!({})), "{}");
        assert_eq!(
            trigger_body(&json!({"b": [1, 2.5, "é"], "a": {"x": null}})),
            r#"{"a": {"x": null}, "b": [1, 2.5, "\u00e9"]}"#
        );
        assert_eq!(trigger_body(&json!(1.0)), "1.0");
    }

    /// The largest bodies the reference sends whole under a 1 MiB limit
    /// (`max_payload - (message_size(b"", headers) +
    /// stream_header_reserve("ABI_JOBS_default"))`, from its own functions).
    #[test]
    fn the_claim_check_threshold_is_the_references() {
        let max = 1_048_576;
        let mut headers = HeaderMap::new();
        headers.insert(jobs::TRIGGER_HEADER, jobs::MANUAL_TRIGGER);
        headers.insert(jobs::TTL_HEADER, jobs::MANUAL_TRIGGER_TTL);
        headers.insert(async_nats::header::NATS_EXPECTED_STREAM, "ABI_JOBS_default");
        assert!(!needs_claim_check(1_048_467, &headers, max));
        assert!(needs_claim_check(1_048_468, &headers, max));
        let id = format!("712c5ed1{}", "0".repeat(56));
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
        assert!(!needs_claim_check(1_048_388, &headers, max));
        assert!(needs_claim_check(1_048_389, &headers, max));
        assert!(
            !needs_claim_check(usize::MAX / 2, &headers, 0),
            "no limit known"
        );
    }
}
