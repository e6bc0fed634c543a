//! Traces: one trace per call chain, across Python and Rust processes.
//!
//! When `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set, a
//! process exports OpenTelemetry spans over OTLP (HTTP/protobuf, the other
//! standard `OTEL_EXPORTER_OTLP_*` variables honoured; `OTEL_SERVICE_NAME`
//! names it), every second as the reference does, and the W3C trace
//! context travels in NATS headers (`traceparent`), so a call from a Python
//! caller through our services and hosts to a Python job host is one trace.
//! The spans are named and attributed as the reference names them
//! (`abi_wire::trace`). Logs written inside a span carry its `trace_id`.
//!
//! When it is not set, nothing is exported and nothing is built: the spans
//! are disabled at their call site (target [`TARGET`], switched off in the
//! log filter), so a request pays a branch.

use std::sync::OnceLock;
use std::time::Duration;

use abi_wire::trace::{self as wire, attribute};
use async_nats::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The variable naming the collector (`http://collector:4318`).
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The variable naming the traces endpoint itself (`.../v1/traces`).
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The variable naming the service in its spans.
pub const SERVICE_NAME_VAR: &str = "OTEL_SERVICE_NAME";
/// The target of the spans this module makes: the log filter switches it
/// off unless traces are exported.
pub const TARGET: &str = "abi_trace";
/// How often spans are sent (the reference's: every second, so a trace
/// viewer shows recent spans live).
const EXPORT_DELAY: Duration = Duration::from_secs(1);

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Why traces could not be set up (the process runs on without them).
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    /// The exporter could not be built from the environment.
    #[error("cannot build the OTLP exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// Traces need a Tokio runtime to send spans from.
    #[error("traces need a Tokio runtime: set up logs from inside it")]
    NoRuntime,
}

/// Whether the environment asks for traces (an OTLP endpoint is set).
pub fn wanted(env: &dyn Fn(&str) -> Option<String>) -> bool {
    [ENDPOINT_VAR, TRACES_ENDPOINT_VAR]
        .iter()
        .any(|var| env(var).is_some_and(|v| !v.trim().is_empty()))
}

/// The name spans carry: `OTEL_SERVICE_NAME`, else `default`.
pub fn service_name(env: &dyn Fn(&str) -> Option<String>, default: &str) -> String {
    env(SERVICE_NAME_VAR)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

/// Builds the exporting provider from the standard variables, installs it
/// and the W3C propagator as the process's own, and returns the layer that
/// turns [`TARGET`] spans into OpenTelemetry spans: what `logs::init` adds
/// to its subscriber, for a program that installs a subscriber of its own.
/// Call it from inside a Tokio runtime.
///
/// # Errors
///
/// [`TracesError`]: no runtime, or the exporter's settings are wrong.
pub fn layer<S>(
    service: &str,
) -> Result<
    tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
    TracesError,
>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(TracesError::NoRuntime);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(TracesError::Exporter)?;
    let batch =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .with_batch_config(
            opentelemetry_sdk::trace::BatchConfigBuilder::default()
                .with_scheduled_delay(EXPORT_DELAY)
                .build(),
        )
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(batch)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service.to_owned())
                .build(),
        )
        .build();
    let tracer = provider.tracer(wire::TRACER_NAME);
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    opentelemetry::global::set_tracer_provider(provider.clone());
    let _ = PROVIDER.set(provider);
    // Only what the reference's spans carry: no source locations, threads,
    // busy times, levels or targets as attributes.
    Ok(tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_level(false)
        .with_target(false)
        .with_error_events_to_status(false)
        .with_error_events_to_exceptions(false))
}

/// Sends the spans not sent yet, waiting `limit` at most; a process calls
/// it before it exits (the runner does, and the services' main loop).
/// Nothing without traces.
///
/// # Cancel safety
///
/// Cancel safe: the flush runs on a blocking thread of its own and ends
/// there; dropping this only stops waiting for it.
pub async fn flush_within(limit: Duration) {
    let Some(provider) = PROVIDER.get() else {
        return;
    };
    let flush = tokio::task::spawn_blocking(move || provider.force_flush());
    match tokio::time::timeout(limit, flush).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(error))) => tracing::debug!(%error, "spans not flushed"),
        Ok(Err(_)) | Err(_) => tracing::debug!("spans not flushed in time"),
    }
}

/// Whether spans are exported by this process (callers skip building what
/// only a span would carry when they are not).
pub fn enabled() -> bool {
    PROVIDER.get().is_some()
}

/// How a span relates to the message it is made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A request this process sends.
    Client,
    /// A request this process answers.
    Server,
    /// A message this process consumes (a job trigger).
    Consumer,
    /// Work of this process's own (an agent run).
    Internal,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Server => "server",
            Self::Consumer => "consumer",
            Self::Internal => "internal",
        }
    }
}

/// A span for a message on `subject`, named `<service>/<method>` unless
/// `name` is given, with the reference's attributes. Disabled (and free)
/// when traces are not exported.
pub fn message_span(kind: Kind, subject: &str, name: Option<&str>) -> Span {
    // The subject is parsed only for a span that is exported: every request
    // of every process comes through here.
    if !enabled() {
        return Span::none();
    }
    let (service, method) = wire::describe_subject(subject);
    let name = name.map_or_else(|| wire::span_name(subject), str::to_owned);
    tracing::debug_span!(
        target: TARGET,
        "message",
        otel.name = %name,
        otel.kind = kind.as_str(),
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        rpc.system = wire::SYSTEM,
        rpc.service = %service,
        rpc.method = %method,
        messaging.system = wire::SYSTEM,
        messaging.destination.name = %subject,
        messaging.message.body.size = tracing::field::Empty,
        abi.reply.body.size = tracing::field::Empty,
        abi.error_code = tracing::field::Empty,
        trace_id = tracing::field::Empty,
    )
}

/// An INTERNAL span named `name` under the current one (an agent's run).
pub fn internal_span(name: &str) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "work",
        otel.name = %name,
        otel.kind = Kind::Internal.as_str(),
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
        abi.error_code = tracing::field::Empty,
        trace_id = tracing::field::Empty,
    )
}

/// A CLIENT span for a request on `subject` of `size` bytes, under the
/// current span, its context written into `headers` for the next hop.
pub fn client_span(subject: &str, size: usize, headers: &mut HeaderMap) -> Span {
    let span = message_span(Kind::Client, subject, None);
    if !span.is_disabled() {
        span.record(attribute::BODY_SIZE, size);
        record_trace_id(&span);
        inject(&span, headers);
    }
    span
}

/// A SERVER or CONSUMER span for a message on `subject` continuing the
/// trace its `headers` carry (a new trace without one).
pub fn server_span(
    kind: Kind,
    subject: &str,
    name: Option<&str>,
    headers: Option<&HeaderMap>,
) -> Span {
    let span = message_span(kind, subject, name);
    if !span.is_disabled() {
        if let Some(headers) = headers {
            let parent = opentelemetry::global::get_text_map_propagator(|p| {
                p.extract(&HeaderExtractor(headers))
            });
            if parent.span().span_context().is_valid() {
                let _ = span.set_parent(parent);
            }
        }
        record_trace_id(&span);
    }
    span
}

/// Writes `span`'s context into `headers` (`traceparent`, `tracestate`).
pub fn inject(span: &Span, headers: &mut HeaderMap) {
    if span.is_disabled() {
        return;
    }
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&context, &mut HeaderInjector(headers));
    });
}

/// Sets an attribute on `span` (exported only, never in logs).
pub fn set_attribute(span: &Span, key: &'static str, value: impl Into<opentelemetry::Value>) {
    if !span.is_disabled() {
        span.set_attribute(key, value);
    }
}

/// The reply's size on a CLIENT span.
pub fn record_reply(span: &Span, size: usize) {
    span.record(attribute::REPLY_SIZE, size);
}

/// Marks `span` failed with a wire `code` and what went wrong, with any
/// credential-looking text left out (spans leave the process).
pub fn record_error(span: &Span, code: &str, message: &str) {
    if span.is_disabled() {
        return;
    }
    span.record(attribute::ERROR_CODE, code);
    span.record("otel.status_code", "ERROR");
    let message = crate::redaction::scrub_secrets(message);
    let description = if message.is_empty() {
        code.to_owned()
    } else {
        format!("{code}: {message}")
    };
    span.record("otel.status_description", description.as_str());
}

/// `span`'s trace id (32 hex digits), if it has one.
pub fn trace_id(span: &Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

fn record_trace_id(span: &Span) {
    if let Some(id) = trace_id(span) {
        span.record("trace_id", id.as_str());
    }
}

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key, value.as_str());
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        wire::HEADERS
            .iter()
            .copied()
            .filter(|k| self.0.get(*k).is_some())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_asks_for_traces_with_an_endpoint() {
        let none = |_: &str| None;
        assert!(!wanted(&none));
        let blank = |k: &str| (k == ENDPOINT_VAR).then(|| " ".to_owned());
        assert!(!wanted(&blank));
        let traces =
            |k: &str| (k == TRACES_ENDPOINT_VAR).then(|| "http://c:4318/v1/traces".to_owned());
        assert!(wanted(&traces));
        let named = |k: &str| (k == SERVICE_NAME_VAR).then(|| "billing".to_owned());
        assert_eq!(service_name(&named, "abi-documents"), "billing");
        assert_eq!(service_name(&none, "abi-documents"), "abi-documents");
    }

    #[test]
    fn without_traces_a_span_is_disabled_and_injects_nothing() {
        let mut headers = HeaderMap::new();
        let subject = abi_wire::documents::operation(abi_wire::documents::Operation::Get);
        let span = client_span(&subject, 10, &mut headers);
        assert!(span.is_disabled());
        assert!(headers.get(wire::TRACEPARENT).is_none());
        assert_eq!(trace_id(&span), None);
    }
}
