//! The registry watch against a real JetStream KV bucket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abi_sdk::{RegistryEvent, Status, WatchOptions, pb};
use abi_test_support::{NatsServer, unique_name, wait_until};
use async_nats::jetstream::kv;
use common::{client, connect};
use futures::StreamExt;
use prost::Message;

const DEADLINE: Duration = Duration::from_secs(30);

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn state(records: &[(&str, &str, f64)]) -> bytes::Bytes {
    pb::RegistryState {
        records: records
            .iter()
            .map(|(id, status, expires_at)| pb::RegistryRecord {
                instance: Some(pb::Instance {
                    instance_id: id.to_string(),
                    status: status.to_string(),
                    expires_at: *expires_at,
                    descriptor: Some(pb::ModuleDescriptor {
                        module_id: format!("m-{id}"),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
    }
    .encode_to_vec()
    .into()
}

async fn next(watch: &mut abi_sdk::RegistryWatch) -> RegistryEvent {
    tokio::time::timeout(DEADLINE, watch.next())
        .await
        .unwrap()
        .unwrap()
}

async fn bucket(js: &async_nats::jetstream::Context, project: &str) -> kv::Store {
    js.create_key_value(kv::Config {
        bucket: abi_wire::discovery::registry_bucket(project),
        history: 1,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// Stores instance `a` (READY until `far`), and returns a watch with short
/// check and backoff times that has reported it.
async fn following_a(
    nats: &async_nats::Client,
    project: &str,
    store: &kv::Store,
    far: f64,
) -> abi_sdk::RegistryWatch {
    store
        .put(
            abi_wire::discovery::REGISTRY_KEY,
            state(&[("a", "READY", far)]),
        )
        .await
        .unwrap();
    let mut watch = client(nats, project).watch_with(
        WatchOptions::default()
            .check_interval(Duration::from_millis(200))
            .max_backoff(Duration::from_millis(500)),
    );
    assert!(matches!(
        next(&mut watch).await,
        RegistryEvent::Registered(_)
    ));
    watch
}

#[tokio::test]
async fn snapshots_become_registered_status_gone_and_expired_events() {
    let server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let js = async_nats::jetstream::new(nats.clone());
    // The watch starts before the bucket exists and waits for it.
    let mut watch = client(&nats, &project)
        .watch_with(WatchOptions::default().check_interval(Duration::from_millis(200)));
    let store = bucket(&js, &project).await;
    let far = now() + 600.0;
    store
        .put(
            abi_wire::discovery::REGISTRY_KEY,
            state(&[("a", "STARTING", far)]),
        )
        .await
        .unwrap();
    let event = next(&mut watch).await;
    assert!(matches!(&event, RegistryEvent::Registered(i) if i.instance_id == "a"));
    assert_eq!(event.module_id(), "m-a");

    store
        .put(
            "registry",
            state(&[("a", "READY", far), ("b", "STARTING", now() + 1.0)]),
        )
        .await
        .unwrap();
    let mut events = [next(&mut watch).await, next(&mut watch).await];
    events.sort_by_key(|e| e.instance().instance_id.clone());
    assert!(
        matches!(&events[0], RegistryEvent::StatusChanged { previous: Status::Starting, instance } if instance.status == "READY")
    );
    assert!(matches!(&events[1], RegistryEvent::Registered(i) if i.instance_id == "b"));
    // b's lease passes without any write: the clock reports it.
    assert!(matches!(next(&mut watch).await, RegistryEvent::Expired(i) if i.instance_id == "b"));

    store
        .put(abi_wire::discovery::REGISTRY_KEY, state(&[]))
        .await
        .unwrap();
    assert!(matches!(next(&mut watch).await, RegistryEvent::Gone(i) if i.instance_id == "a"));
}

#[tokio::test]
async fn the_watch_resumes_after_a_server_restart() {
    let mut server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let js = async_nats::jetstream::new(nats.clone());
    let store = bucket(&js, &project).await;
    let far = now() + 600.0;
    let mut watch = following_a(&nats, &project, &store, far).await;

    server.restart().await;
    // Writes after the restart, through the reconnected client, still arrive.
    let put = || async {
        store
            .put(
                "registry",
                state(&[("a", "READY", far), ("c", "STARTING", far)]),
            )
            .await
    };
    wait_until(DEADLINE, || async { put().await.is_ok() })
        .await
        .expect("KV never came back");
    assert!(matches!(next(&mut watch).await, RegistryEvent::Registered(i) if i.instance_id == "c"));
}

/// The names of the consumers on `stream`.
async fn consumer_names(nats: &async_nats::Client, stream: &str) -> Vec<String> {
    let reply = nats
        .request(format!("$JS.API.CONSUMER.NAMES.{stream}"), "{}".into())
        .await
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
    body["consumers"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_silently_stalled_watcher_is_detected_and_replaced() {
    let server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let js = async_nats::jetstream::new(nats.clone());
    let store = bucket(&js, &project).await;
    let stream = abi_wire::discovery::registry_stream(&project);
    let far = now() + 600.0;
    let mut watch = following_a(&nats, &project, &store, far).await;

    // Pause the watcher's consumer on the server: it stays alive (heartbeats
    // flow, no error reaches the client) but delivers nothing: a silent stall.
    let consumers = consumer_names(&nats, &stream).await;
    assert_eq!(consumers.len(), 1, "{consumers:?}");
    let paused = nats
        .request(
            format!("$JS.API.CONSUMER.PAUSE.{stream}.{}", consumers[0]),
            r#"{"pause_until":"2100-01-01T00:00:00Z"}"#.into(),
        )
        .await
        .unwrap();
    let paused: serde_json::Value = serde_json::from_slice(&paused.payload).unwrap();
    assert_eq!(paused["paused"], true, "{paused}");

    store
        .put(
            "registry",
            state(&[("a", "READY", far), ("c", "STARTING", far)]),
        )
        .await
        .unwrap();
    // Only the key check can see this write; it reopens the watcher too.
    assert!(matches!(next(&mut watch).await, RegistryEvent::Registered(i) if i.instance_id == "c"));
    wait_until(DEADLINE, || async {
        consumer_names(&nats, &stream)
            .await
            .iter()
            .any(|name| name != &consumers[0])
    })
    .await
    .expect("no new watcher was opened");
    // The new watcher delivers the writes after it.
    store
        .put(
            abi_wire::discovery::REGISTRY_KEY,
            state(&[("c", "STARTING", far)]),
        )
        .await
        .unwrap();
    assert!(matches!(next(&mut watch).await, RegistryEvent::Gone(i) if i.instance_id == "a"));
}
