//! The client's wire calls against a scripted responder on the in-process
//! transport (paused clock), and the NATS-only behaviour on a real nats-server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{DEADLINE, Fake, client, connect};

use std::time::Duration;

use abi_proto::common::v1::CallError as WireError;
use abi_sdk::{CallErrorKind, DiscoveryClient, TokenSource, pb};
use abi_test_support::{NatsServer, unique_name};
use futures::TryStreamExt;
use prost::Message;
use tokio::time::Instant;

fn wire_error(code: &str) -> Option<WireError> {
    Some(WireError {
        code: code.into(),
        message: "m".into(),
        ..Default::default()
    })
}

fn instance(id: &str, status: &str) -> pb::Instance {
    pb::Instance {
        instance_id: id.into(),
        status: status.into(),
        descriptor: Some(pb::ModuleDescriptor {
            module_id: "store".into(),
            contract_major: 1,
            agents: vec![pb::AgentDescriptor {
                name: "clerk".into(),
                capabilities: vec!["search".into()],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn lookup_errors_become_distinct_kinds_and_calls_carry_the_token() {
    let fake = Fake::start(|_, payload| {
        let request = pb::GetModuleRequest::decode(payload).unwrap();
        let response = match request.module_id.as_str() {
            "missing" => pb::GetModuleResponse {
                error: wire_error("MODULE_NOT_FOUND"),
                ..Default::default()
            },
            "old" => pb::GetModuleResponse {
                error: wire_error("INCOMPATIBLE_MODULE"),
                ..Default::default()
            },
            "starting" => pb::GetModuleResponse {
                instances: vec![instance("i1", "STARTING")],
                ..Default::default()
            },
            _ => pb::GetModuleResponse {
                instances: vec![instance("i1", "DEGRADED"), instance("i2", "READY")],
                ..Default::default()
            },
        };
        Some(response.encode_to_vec())
    });
    let client = fake.client();

    let kind = |r: Result<_, abi_sdk::CallError>| r.map(|_| ()).unwrap_err().kind();
    assert_eq!(
        kind(client.module("missing", 1).instances().await),
        CallErrorKind::ModuleNotFound
    );
    assert_eq!(
        kind(client.module("old", 2).instances().await),
        CallErrorKind::IncompatibleModule
    );
    let unavailable = client
        .module("starting", 1)
        .ready_instances()
        .await
        .unwrap_err();
    assert_eq!(unavailable.kind(), CallErrorKind::ModuleUnavailable);
    assert!(!unavailable.is_retryable());

    let store = client.module("store", 1);
    let ready = store.ready_instances().await.unwrap();
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].instance_id, "i2");
    assert_eq!(store.agent("clerk").await.unwrap().instance_id, "i2");
    assert_eq!(
        store.agent("nobody").await.unwrap_err().kind(),
        CallErrorKind::AgentNotFound
    );
    assert_eq!(
        store.job("nightly").await.unwrap_err().kind(),
        CallErrorKind::JobNotFound
    );
    assert_eq!(store.list_agents().await.unwrap()[0].name, "clerk");

    let seen = fake.requests("get_module");
    assert!(
        seen.iter()
            .all(|s| s.token.as_deref() == Some("test-token"))
    );
    let request = pb::GetModuleRequest::decode(seen[1].payload.as_slice()).unwrap();
    assert_eq!(
        (request.module_id.as_str(), request.contract_major),
        ("old", 2)
    );
    let context = request.context.unwrap();
    assert_eq!(context.trace_id.len(), 36);
    assert_eq!(context.timeout_ms, 10_000);
}

#[tokio::test(start_paused = true)]
async fn list_all_follows_pages_and_capability_search_uses_it() {
    let all: Vec<pb::Instance> = (0..250)
        .map(|i| instance(&format!("i{i:03}"), "READY"))
        .collect();
    let fake = Fake::start(move |_, payload| {
        let request = pb::ListModulesRequest::decode(payload).unwrap();
        let rest: Vec<_> = all
            .iter()
            .filter(|i| i.instance_id.as_str() > request.after_instance_id.as_str())
            .cloned()
            .collect();
        let page: Vec<_> = rest.iter().take(request.limit as usize).cloned().collect();
        let next = if rest.len() > page.len() {
            page.last().unwrap().instance_id.clone()
        } else {
            String::new()
        };
        Some(
            pb::ListModulesResponse {
                instances: page,
                next_after_instance_id: next,
                ..Default::default()
            }
            .encode_to_vec(),
        )
    });
    let client = fake.client();
    let every: Vec<_> = client.list_all().try_collect().await.unwrap();
    assert_eq!(every.len(), 250);
    assert_eq!(fake.requests("list_modules").len(), 3);
    let found = client.find_agents("search").await.unwrap();
    assert_eq!(found.len(), 250);
    assert!(client.find_agents("chat").await.unwrap().is_empty());
}

/// NATS behaviour is the subject here, so this test keeps a real server: the
/// server's "no responders" status, the transport resending while nobody
/// serves the queue group and stopping before the deadline, and a NATS
/// request timing out while a subscriber stays silent.
#[tokio::test]
async fn nobody_serving_is_no_responders_within_the_deadline_and_silence_times_out() {
    let server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let client = client(&nats, &project).request_timeout(Duration::from_secs(1));
    let started = std::time::Instant::now();
    let err = client.get_module("x", 1).await.unwrap_err();
    assert_eq!(err.kind(), CallErrorKind::NoResponders);
    assert!(err.is_retryable());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // A subscriber that never answers.
    let _silent = nats
        .subscribe(abi_wire::discovery::operation_named(&project, ">"))
        .await
        .unwrap();
    nats.flush().await.unwrap();
    let err = client.get_module("x", 1).await.unwrap_err();
    assert_eq!(err.kind(), CallErrorKind::TimedOut);
}

/// The same two answers on the in-process transport: nobody serving the
/// project is "no responders" at once, a silent service times out exactly at
/// the call's deadline.
#[tokio::test(start_paused = true)]
async fn in_process_nobody_serving_is_no_responders_and_silence_times_out_at_the_deadline() {
    let fake = Fake::start(|_, _| None);
    let elsewhere = DiscoveryClient::local(fake.clone(), "other", TokenSource::issued("t"));
    let started = Instant::now();
    let err = elsewhere.get_module("x", 1).await.unwrap_err();
    assert_eq!(err.kind(), CallErrorKind::NoResponders);
    assert!(err.is_retryable());
    assert_eq!(started.elapsed(), Duration::ZERO);

    let client = fake.client().request_timeout(Duration::from_secs(3));
    let started = Instant::now();
    let err = tokio::time::timeout(DEADLINE, client.get_module("x", 1))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), CallErrorKind::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert_eq!(fake.ops(), ["get_module"]);
}
