//! The streams modules may not create, made by discovery before it serves:
//! the jobs stream (schedules and per-message TTL on) and the claim-check
//! store, configured as the reference engine configures them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_discovery::platform::prepare_module_streams;
use abi_test_support::{NatsServer, python};
use async_nats::jetstream;

use crate::edges_common::binary::OwnerProcess;

async fn jobs_stream(js: &jetstream::Context, project: &str) -> jetstream::stream::Config {
    let mut stream = js
        .get_stream(abi_wire::jobs::stream(project))
        .await
        .expect("the jobs stream");
    stream.info().await.expect("its info").config.clone()
}

#[tokio::test]
async fn prepares_the_jobs_stream_and_the_claim_check_store_once() {
    let server = NatsServer::start().await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client);
    prepare_module_streams(&js, "p1", 1).await.expect("prepare");
    prepare_module_streams(&js, "p1", 1)
        .await
        .expect("prepare again (no change)");
    let config = jobs_stream(&js, "p1").await;
    assert_eq!(config.subjects, vec!["abi.jobs.p1.>".to_owned()]);
    assert!(config.allow_message_schedules && config.allow_message_ttl);
    assert_eq!(
        config.duplicate_window,
        Duration::from_secs(120),
        "the server's default window"
    );
    let store = js
        .get_object_store(abi_wire::jobs::CLAIM_CHECK_BUCKET)
        .await
        .expect("the store");
    let info = js
        .get_stream(format!("OBJ_{}", abi_wire::jobs::CLAIM_CHECK_BUCKET))
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .config
        .clone();
    assert_eq!(info.max_age, Duration::from_secs(7 * 24 * 3600));
    drop(store);
}

#[tokio::test]
async fn turns_on_the_flags_of_an_older_jobs_stream_and_keeps_its_messages() {
    let server = NatsServer::start().await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client);
    js.create_stream(jetstream::stream::Config {
        name: abi_wire::jobs::stream("old"),
        subjects: vec![abi_wire::jobs::stream_subjects("old")],
        ..Default::default()
    })
    .await
    .unwrap();
    js.publish("abi.jobs.old.trigger.a.b", "{}".into())
        .await
        .unwrap()
        .await
        .unwrap();
    prepare_module_streams(&js, "old", 1)
        .await
        .expect("prepare");
    let config = jobs_stream(&js, "old").await;
    assert!(config.allow_message_schedules && config.allow_message_ttl);
    let mut stream = js.get_stream(abi_wire::jobs::stream("old")).await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
}

/// The reference's own `ensure_stream` creates the same configuration we do
/// (compared field by field, names aside), and finds nothing to change on ours.
#[tokio::test]
async fn the_reference_creates_the_same_jobs_stream() {
    let server = NatsServer::start().await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client);
    prepare_module_streams(&js, "ours", 1)
        .await
        .expect("prepare");
    let script = r#"
import asyncio, sys, nats
from naas_abi_sdk.job_host import ensure_stream
async def main():
    nc = await nats.connect(sys.argv[1])
    for project in ("theirs", "ours"):
        await ensure_stream(nc.jetstream(), project)
    await nc.close()
asyncio.run(main())
"#;
    let ours_before = jobs_stream(&js, "ours").await;
    let out = tokio::process::Command::new(python())
        .args(["-c", script, &server.url()])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours = jobs_stream(&js, "ours").await;
    assert_eq!(ours, ours_before, "the reference changed our stream");
    let mut theirs = jobs_stream(&js, "theirs").await;
    theirs.name = ours.name.clone();
    theirs.subjects = ours.subjects.clone();
    assert_eq!(theirs, ours);
}

/// The binary prepares both before it answers its first request.
#[tokio::test]
async fn the_service_prepares_them_before_it_serves() {
    let server = NatsServer::start().await;
    let _owner = OwnerProcess::start(&server.url(), "served", &[]).await;
    let client = async_nats::connect(server.url()).await.unwrap();
    let js = jetstream::new(client);
    let config = jobs_stream(&js, "served").await;
    assert!(config.allow_message_schedules && config.allow_message_ttl);
    js.get_object_store(abi_wire::jobs::CLAIM_CHECK_BUCKET)
        .await
        .expect("the claim-check store");
}
