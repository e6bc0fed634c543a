//! NATS micro-service discovery (ADR-32): answers `$SRV.PING`, `$SRV.INFO` and
//! `$SRV.STATS` (and their `.<name>` and `.<name>.<id>` forms) for this process.
//!
//! The async-nats `service` API would subscribe the endpoints itself, with its own
//! queue group and error headers; the discovery subjects and queue group are part of
//! the wire contract, so this small responder reports on them instead. Every owner
//! answers (plain subscriptions, no queue group), as ADR-32 requires.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_nats::{Client, Subscriber};
use futures::stream::{SelectAll, StreamExt as _};
use serde::Serialize;
use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::StaticFormatDescription;
use time::macros::format_description;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::endpoints::Stats;
use abi_wire::discovery::{Operation, Project};

/// The service name other tools find us by.
pub const SERVICE_NAME: &str = "abi-discovery";

/// What `$SRV.INFO` says about this process.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The service name ([`SERVICE_NAME`]).
    pub name: String,
    /// This process's unique id.
    pub id: String,
    /// The crate version.
    pub version: String,
    /// The project served.
    pub project: Project,
}

impl Identity {
    /// This process: [`SERVICE_NAME`], a fresh id, the crate version.
    pub fn new(project: Project) -> Self {
        Self {
            name: SERVICE_NAME.to_owned(),
            id: new_id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            project,
        }
    }
}

#[derive(Serialize)]
struct Ping<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    id: &'a str,
    version: &'a str,
    metadata: Map<String, Value>,
}

#[derive(Serialize)]
struct Info<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    id: &'a str,
    version: &'a str,
    metadata: Map<String, Value>,
    description: &'static str,
    endpoints: Vec<EndpointInfo>,
}

#[derive(Serialize)]
struct EndpointInfo {
    name: &'static str,
    subject: String,
    queue_group: String,
    metadata: Option<Map<String, Value>>,
}

#[derive(Serialize)]
struct StatsResponse<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    id: &'a str,
    version: &'a str,
    metadata: Map<String, Value>,
    started: String,
    endpoints: Vec<EndpointStatsJson>,
}

#[derive(Serialize)]
struct EndpointStatsJson {
    name: &'static str,
    subject: String,
    queue_group: String,
    num_requests: u64,
    num_errors: u64,
    last_error: String,
    /// Nanoseconds, as Go's `time.Duration` marshals.
    processing_time: u64,
    average_processing_time: u64,
    data: Value,
}

fn metadata(identity: &Identity) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(
        "project".to_owned(),
        Value::String(identity.project.to_string()),
    );
    map
}

/// The `$SRV.PING` answer.
pub fn ping_json(identity: &Identity) -> Vec<u8> {
    to_json(&Ping {
        kind: "io.nats.micro.v1.ping_response",
        name: &identity.name,
        id: &identity.id,
        version: &identity.version,
        metadata: metadata(identity),
    })
}

/// The `$SRV.INFO` answer: one endpoint per operation, with its subject and queue group.
pub fn info_json(identity: &Identity) -> Vec<u8> {
    let queue_group = abi_wire::discovery::owners_queue(&identity.project);
    to_json(&Info {
        kind: "io.nats.micro.v1.info_response",
        name: &identity.name,
        id: &identity.id,
        version: &identity.version,
        metadata: metadata(identity),
        description: abi_wire::discovery::SERVICE_DESCRIPTION,
        endpoints: Operation::ALL
            .into_iter()
            .map(|op| EndpointInfo {
                name: op.as_str(),
                subject: abi_wire::discovery::operation(&identity.project, op),
                queue_group: queue_group.clone(),
                metadata: None,
            })
            .collect(),
    })
}

/// The `$SRV.STATS` answer: request counts, errors and processing time per endpoint.
pub fn stats_json(identity: &Identity, stats: &Stats) -> Vec<u8> {
    let queue_group = abi_wire::discovery::owners_queue(&identity.project);
    let dropped = stats.dropped_without_reply();
    to_json(&StatsResponse {
        kind: "io.nats.micro.v1.stats_response",
        name: &identity.name,
        id: &identity.id,
        version: &identity.version,
        metadata: metadata(identity),
        started: rfc3339(stats.started()),
        endpoints: Operation::ALL
            .into_iter()
            .map(|op| {
                let s = stats.endpoint(op);
                let total = nanos(s.processing);
                EndpointStatsJson {
                    name: op.as_str(),
                    subject: abi_wire::discovery::operation(&identity.project, op),
                    queue_group: queue_group.clone(),
                    num_requests: s.requests,
                    num_errors: s.errors,
                    last_error: s.last_error,
                    processing_time: total,
                    average_processing_time: total.checked_div(s.requests).unwrap_or(0),
                    data: serde_json::json!({ "dropped_without_reply_total": dropped }),
                }
            })
            .collect(),
    })
}

/// Subscribes the `$SRV` subjects and answers them until `stop`.
///
/// # Errors
///
/// The subscribe error.
///
/// # Cancel safety
///
/// Not cancel safe: dropped before it returns, the subscriptions made so far go with it; cancel `stop` instead.
pub async fn serve(
    client: Client,
    identity: Identity,
    stats: Arc<Stats>,
    stop: CancellationToken,
) -> Result<JoinHandle<()>, async_nats::SubscribeError> {
    let mut subscriptions: SelectAll<Tagged> = SelectAll::new();
    for verb in [Verb::Ping, Verb::Info, Verb::Stats] {
        for subject in abi_wire::discovery::micro(verb.as_str(), &identity.name, &identity.id) {
            let subscriber = client.subscribe(subject).await?;
            subscriptions.push(Tagged::new(verb, subscriber));
        }
    }
    Ok(tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                biased;
                () = stop.cancelled() => break,
                next = subscriptions.next() => next,
            };
            let Some((verb, msg)) = next else { break };
            let Some(reply) = msg.reply else { continue };
            let body = match verb {
                Verb::Ping => ping_json(&identity),
                Verb::Info => info_json(&identity),
                Verb::Stats => stats_json(&identity, &stats),
            };
            let sent =
                tokio::time::timeout(PUBLISH_TIMEOUT, client.publish(reply, body.into())).await;
            if !matches!(sent, Ok(Ok(()))) {
                tracing::debug!(
                    verb = verb.as_str(),
                    "could not answer a micro-service request"
                );
            }
        }
        for tagged in subscriptions.iter_mut() {
            // Best effort: the connection closes right after anyway.
            let _ = tagged.inner_mut().unsubscribe().await;
        }
    }))
}

/// Deadline of one `$SRV` answer: a monitoring tool waits about a second for answers.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy)]
enum Verb {
    Ping,
    Info,
    Stats,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Ping => abi_wire::discovery::micro_verb::PING,
            Verb::Info => abi_wire::discovery::micro_verb::INFO,
            Verb::Stats => abi_wire::discovery::micro_verb::STATS,
        }
    }
}

/// A subscriber tagged with the verb it answers.
struct Tagged {
    verb: Verb,
    subscriber: Subscriber,
}

impl Tagged {
    fn new(verb: Verb, subscriber: Subscriber) -> Self {
        Self { verb, subscriber }
    }

    fn inner_mut(&mut self) -> &mut Subscriber {
        &mut self.subscriber
    }
}

impl futures::Stream for Tagged {
    type Item = (Verb, async_nats::Message);

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        let verb = self.verb;
        self.subscriber
            .poll_next_unpin(cx)
            .map(|next| next.map(|msg| (verb, msg)))
    }
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // These structs hold only strings, numbers and maps with string keys, which
    // always serialize.
    serde_json::to_vec(value).unwrap_or_default()
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A fresh id for this process: a NUID (22 base-62 characters), as the NATS
/// micro-service clients give their instances.
fn new_id() -> String {
    nuid::next().to_string()
}

/// `t` as RFC 3339 in UTC with nanoseconds (always nine digits), the shape
/// this service has always reported in `$SRV.STATS`.
fn rfc3339(t: SystemTime) -> String {
    const FORMAT: StaticFormatDescription =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z");
    // Every component the description names is in an `OffsetDateTime` and a
    // `String` takes any output, so formatting cannot fail.
    OffsetDateTime::from(t).format(FORMAT).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn identity() -> Identity {
        Identity {
            name: SERVICE_NAME.to_owned(),
            id: "ID1".to_owned(),
            version: "0.1.0".to_owned(),
            project: Project::new("acme").unwrap(),
        }
    }

    #[test]
    fn dates() {
        use std::time::UNIX_EPOCH;

        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        let t = UNIX_EPOCH + Duration::new(1_709_210_096, 5);
        assert_eq!(rfc3339(t), "2024-02-29T12:34:56.000000005Z");
    }

    #[test]
    fn ids_are_22_chars_and_differ() {
        let (a, b) = (new_id(), new_id());
        assert_eq!(a.len(), 22);
        assert_ne!(a, b);
    }

    #[test]
    fn shapes() {
        let ping: Value = serde_json::from_slice(&ping_json(&identity())).unwrap();
        assert_eq!(ping["type"], "io.nats.micro.v1.ping_response");
        assert_eq!(ping["name"], "abi-discovery");
        assert_eq!(ping["id"], "ID1");
        assert_eq!(ping["metadata"]["project"], "acme");

        let info: Value = serde_json::from_slice(&info_json(&identity())).unwrap();
        assert_eq!(info["type"], "io.nats.micro.v1.info_response");
        let endpoints = info["endpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), 9);
        let acme = abi_wire::discovery::Project::new("acme").unwrap();
        let subject = abi_wire::discovery::operation(&acme, Operation::Register);
        let queue = abi_wire::discovery::owners_queue(&acme);
        assert!(endpoints.iter().any(|e| e["name"] == "register"
            && e["subject"] == subject.as_str()
            && e["queue_group"] == queue.as_str()));

        let stats = Stats::default();
        stats.record(Operation::Renew, Duration::from_micros(10), None);
        stats.record(
            Operation::Renew,
            Duration::from_micros(30),
            Some(("LEASE_EXPIRED", "x")),
        );
        let json: Value = serde_json::from_slice(&stats_json(&identity(), &stats)).unwrap();
        assert_eq!(json["type"], "io.nats.micro.v1.stats_response");
        assert!(json["started"].as_str().unwrap().ends_with('Z'));
        let renew = json["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "renew")
            .unwrap();
        assert_eq!(renew["num_requests"], 2);
        assert_eq!(renew["num_errors"], 1);
        assert_eq!(renew["last_error"], "LEASE_EXPIRED: x");
        assert_eq!(renew["processing_time"], 40_000);
        assert_eq!(renew["average_processing_time"], 20_000);
    }
}
