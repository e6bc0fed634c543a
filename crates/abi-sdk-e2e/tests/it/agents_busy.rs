//! A host handling as many calls as it may answers the next one AGENT_BUSY
//! at once. The reference's `ConcurrentCalls` stops reading the
//! subscription instead: the next call waits in the client's buffer (or is
//! dropped as a slow consumer) until its caller times out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant, SystemTime};

use abi_proto::Message as _;
use abi_proto::agent::v1 as apb;
use abi_sdk::agents::AgentHostOptions;
use abi_sdk_e2e::SECRET;
use async_nats::HeaderMap;

use super::agents_fixture::{Provider, Setup, options, ready};

/// A status request to `instance`'s agent `echo` as `identity` (a fresh
/// token, so the host asks discovery who it is).
fn status_request(setup: &Setup, instance: &str, identity: &str) -> (String, async_nats::Request) {
    let key = abi_auth::module_key(SECRET, identity).unwrap();
    let token = abi_auth::issue_module_token(
        identity,
        &key,
        Duration::from_secs(300),
        SystemTime::now(),
        Some(instance),
    )
    .unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(abi_wire::AUTH_HEADER, token.as_str());
    let body = apb::StatusRequest {
        invocation_id: "x-1".into(),
        output_format: 2,
        ..Default::default()
    };
    let subject = abi_wire::agents::subject(
        &setup.world.project,
        instance,
        "echo",
        abi_wire::agents::Operation::Status,
    );
    let request = async_nats::Request::new()
        .headers(headers)
        .payload(body.encode_to_vec().into())
        .timeout(Some(Duration::from_secs(30)));
    (subject, request)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_host_answers_agent_busy_at_once() {
    let mut setup = Setup::start(20.0).await;
    let _provider = Provider::start(
        &setup.world,
        "rust",
        AgentHostOptions {
            max_concurrency: 1,
            ..options()
        },
    )
    .await;
    let instance = ready(&setup.world, 1).await.remove(0);
    // Without discovery, authorizing the first call takes seconds (the
    // transport resends while nobody serves it).
    setup.world.service.stop().await;
    let nats = async_nats::connect(setup.world.nats.url()).await.unwrap();
    let (subject, first) = status_request(&setup, &instance, "c1");
    let slow = {
        let nats = nats.clone();
        tokio::spawn(async move { nats.send_request(subject, first).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (subject, second) = status_request(&setup, &instance, "c2");
    let started = Instant::now();
    let reply = nats.send_request(subject, second).await.unwrap();
    let answer = apb::StatusResponse::decode(reply.payload.as_ref()).unwrap();
    assert_eq!(answer.error.unwrap().code, "AGENT_BUSY");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        !slow.is_finished(),
        "the first call was still being handled"
    );
    slow.abort();
}
