//! `abictl traces [--listen 127.0.0.1:4318] [--json]`: a small OTLP
//! receiver (HTTP/protobuf, `POST /v1/traces`) that prints each trace as a
//! tree once it has been quiet for a moment: which process did what, under
//! what. Point `OTEL_EXPORTER_OTLP_ENDPOINT` of every process (Python and
//! Rust alike) at it to see one call chain end to end without installing a
//! trace viewer. `--json` prints every span as it arrives, one object a line.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use prost::Message as _;
use serde::Serialize;

use super::Ctx;
use crate::error::Failure;
use crate::signals;

/// The path OTLP/HTTP exporters post spans to.
pub const TRACES_PATH: &str = "/v1/traces";
/// How long a trace must be quiet before it is printed (every process
/// sends its spans each second or so).
const QUIET: Duration = Duration::from_millis(2500);
/// Traces kept to print again when more of their spans arrive.
const KEPT: usize = 2000;

/// One span as received.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpanRow {
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// The span's name (`document/put`).
    pub name: String,
    /// `server`, `client`, `consumer`, `producer`, `internal`.
    pub kind: &'static str,
    /// The exporting process's `service.name`.
    pub service: String,
    /// Start, in nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
    /// `error` when it failed, else empty.
    pub status: &'static str,
    /// Its string, number and boolean attributes.
    pub attributes: BTreeMap<String, String>,
}

/// The spans of an OTLP export request, flattened.
pub fn rows(request: &ExportTraceServiceRequest) -> Vec<SpanRow> {
    let mut out = Vec::new();
    for resource in &request.resource_spans {
        let service = resource
            .resource
            .as_ref()
            .and_then(|r| attributes(&r.attributes).remove("service.name"))
            .unwrap_or_default();
        for scope in &resource.scope_spans {
            for span in &scope.spans {
                let kind = match span.kind {
                    1 => "internal",
                    2 => "server",
                    3 => "client",
                    4 => "producer",
                    5 => "consumer",
                    _ => "unspecified",
                };
                let status = match &span.status {
                    // STATUS_CODE_ERROR
                    Some(status) if status.code == 2 => "error",
                    _ => "",
                };
                out.push(SpanRow {
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    name: span.name.clone(),
                    kind,
                    service: service.clone(),
                    start_ns: span.start_time_unix_nano,
                    duration_ms: span
                        .end_time_unix_nano
                        .saturating_sub(span.start_time_unix_nano)
                        as f64
                        / 1e6,
                    status,
                    attributes: attributes(&span.attributes),
                });
            }
        }
    }
    out
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, String> {
    list.iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => s.clone(),
                any_value::Value::IntValue(n) => n.to_string(),
                any_value::Value::DoubleValue(f) => f.to_string(),
                any_value::Value::BoolValue(b) => b.to_string(),
                _ => return None,
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

/// One trace as an indented tree, children under their parents in the
/// order they started; a span whose parent never arrived is a root.
pub fn tree(spans: &[SpanRow]) -> String {
    let mut spans: Vec<&SpanRow> = spans.iter().collect();
    spans.sort_by_key(|s| s.start_ns);
    let known: std::collections::HashSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    let trace_id = spans.first().map_or("", |s| s.trace_id.as_str());
    let mut out = format!("trace {trace_id} ({} spans)\n", spans.len());
    fn walk(
        out: &mut String,
        spans: &[&SpanRow],
        parent: &str,
        depth: usize,
        known: &std::collections::HashSet<&str>,
    ) {
        for span in spans.iter().filter(|s| {
            if parent.is_empty() {
                s.parent_span_id.is_empty() || !known.contains(s.parent_span_id.as_str())
            } else {
                s.parent_span_id == parent
            }
        }) {
            let error = if span.status.is_empty() {
                ""
            } else {
                "  ERROR"
            };
            out.push_str(&format!(
                "{}{}  {} [{}] {:.3} ms{error}\n",
                "  ".repeat(depth + 1),
                span.name,
                span.service,
                span.kind,
                span.duration_ms
            ));
            walk(out, spans, &span.span_id, depth + 1, known);
        }
    }
    walk(&mut out, &spans, "", 0, &known);
    out
}

#[derive(Default)]
struct Traces {
    /// Per trace: its spans, when the last one arrived, and how many of
    /// them were printed (a trace whose late spans arrive is printed again,
    /// whole).
    open: BTreeMap<String, (Vec<SpanRow>, Instant, usize)>,
}

#[derive(Clone)]
struct Receiver {
    json: bool,
    traces: Arc<Mutex<Traces>>,
}

/// Receives spans on `listen` until interrupted, printing each trace (or,
/// with `json`, each span).
///
/// # Errors
///
/// The address cannot be bound (exit 2).
///
/// # Cancel safety
///
/// Cancel safe: dropping it stops receiving; traces not printed yet are lost.
pub async fn run(_cx: Ctx<'_>, listen: SocketAddr, json: bool) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::usage(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener.local_addr()?;
    println!(
        "receiving traces on http://{bound}{TRACES_PATH} (OTEL_EXPORTER_OTLP_ENDPOINT=http://{bound})"
    );
    let receiver = Receiver {
        json,
        traces: Arc::default(),
    };
    let printer = tokio::spawn(print_quiet(receiver.clone()));
    let router = axum::Router::new()
        .route(TRACES_PATH, axum::routing::post(export))
        .with_state(receiver);
    axum::serve(listener, router)
        .with_graceful_shutdown(signals::interrupted())
        .await?;
    printer.abort();
    Ok(())
}

async fn export(State(receiver): State<Receiver>, body: Bytes) -> impl IntoResponse {
    let Ok(request) = ExportTraceServiceRequest::decode(body.as_ref()) else {
        return (
            StatusCode::BAD_REQUEST,
            "not an OTLP ExportTraceServiceRequest",
        )
            .into_response();
    };
    let spans = rows(&request);
    if receiver.json {
        for span in &spans {
            if let Ok(line) = serde_json::to_string(span) {
                println!("{line}");
            }
        }
    } else {
        let mut traces = receiver.traces.lock().unwrap_or_else(|e| e.into_inner());
        for span in spans {
            let entry = traces
                .open
                .entry(span.trace_id.clone())
                .or_insert_with(|| (Vec::new(), Instant::now(), 0));
            entry.0.push(span);
            entry.1 = Instant::now();
        }
        // Forget the longest quiet traces beyond what is kept.
        while traces.open.len() > KEPT {
            let oldest = traces
                .open
                .iter()
                .min_by_key(|(_, (_, last, _))| *last)
                .map(|(id, _)| id.clone());
            match oldest {
                Some(id) => traces.open.remove(&id),
                None => break,
            };
        }
    }
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    ([(header::CONTENT_TYPE, "application/x-protobuf")], answer).into_response()
}

/// Prints the traces no span arrived for since [`QUIET`], again (whole)
/// when more of their spans came since they were printed.
async fn print_quiet(receiver: Receiver) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tick.tick().await;
        let quiet: Vec<Vec<SpanRow>> = {
            let mut traces = receiver.traces.lock().unwrap_or_else(|e| e.into_inner());
            traces
                .open
                .values_mut()
                .filter(|(spans, last, printed)| last.elapsed() >= QUIET && spans.len() > *printed)
                .map(|(spans, _, printed)| {
                    *printed = spans.len();
                    spans.clone()
                })
                .collect()
        };
        for spans in quiet {
            print!("{}", tree(&spans));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(span: &str, parent: &str, name: &str, start: u64) -> SpanRow {
        SpanRow {
            trace_id: "t".into(),
            span_id: span.into(),
            parent_span_id: parent.into(),
            name: name.into(),
            kind: "server",
            service: "svc".into(),
            start_ns: start,
            duration_ms: 1.5,
            status: "",
            attributes: BTreeMap::new(),
        }
    }

    #[test]
    fn a_trace_prints_as_a_tree_of_its_spans() {
        let spans = [
            row("c", "b", "document/put", 3),
            row("a", "", "agent/submit", 1),
            row("b", "a", "agent echo run", 2),
            row("x", "gone", "orphan", 4),
        ];
        assert_eq!(
            tree(&spans),
            "trace t (4 spans)\n  agent/submit  svc [server] 1.500 ms\n    agent echo run  svc [server] 1.500 ms\n      document/put  svc [server] 1.500 ms\n  orphan  svc [server] 1.500 ms\n"
        );
    }
}
