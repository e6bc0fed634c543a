//! The lease session against a scripted responder on a real nats-server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_proto::common::v1::CallError as WireError;
use abi_sdk::{Rollout, Session, SessionErrorKind, Status, pb};
use abi_test_support::{NatsServer, unique_name, wait_until};
use common::{Fake, client, connect};
use prost::Message;

const DEADLINE: Duration = Duration::from_secs(30);

/// Scripted behaviour: the status each renewal answers, and optional error
/// codes for the next renewals.
#[derive(Default)]
struct Script {
    renew_status: Mutex<String>,
    renew_errors: Mutex<Vec<&'static str>>,
    renewals: AtomicUsize,
}

fn answer(script: Arc<Script>) -> impl Fn(&str, &[u8]) -> Option<Vec<u8>> + Send + Sync + 'static {
    move |operation, payload| {
        // A short lease keeps renewals ~100 ms apart.
        let lease_seconds = 0.4;
        Some(match operation {
            "register" => {
                let request = pb::RegisterRequest::decode(payload).unwrap();
                pb::RegisterResponse {
                    instance: Some(pb::Instance {
                        instance_id: request.instance_id,
                        status: "STARTING".into(),
                        ..Default::default()
                    }),
                    lease_seconds,
                    ..Default::default()
                }
                .encode_to_vec()
            }
            "renew" => {
                script.renewals.fetch_add(1, Ordering::SeqCst);
                let request = pb::RenewRequest::decode(payload).unwrap();
                let error = script.renew_errors.lock().unwrap().pop();
                if let Some(code) = error {
                    return Some(
                        pb::RenewResponse {
                            error: Some(WireError {
                                code: code.into(),
                                message: "scripted".into(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }
                        .encode_to_vec(),
                    );
                }
                let status = script.renew_status.lock().unwrap().clone();
                let status = if status.is_empty() {
                    if request.initialized {
                        "READY"
                    } else {
                        "STARTING"
                    }
                    .to_owned()
                } else {
                    status
                };
                pb::RenewResponse {
                    instance: Some(pb::Instance {
                        instance_id: request.instance_id,
                        status,
                        ..Default::default()
                    }),
                    lease_seconds,
                    ..Default::default()
                }
                .encode_to_vec()
            }
            _ => pb::UnregisterResponse::default().encode_to_vec(),
        })
    }
}

fn descriptor() -> pb::ModuleDescriptor {
    pb::ModuleDescriptor {
        module_id: "provider".into(),
        package_version: "1.0.0".into(),
        contract_major: 1,
        ..Default::default()
    }
}

#[tokio::test]
async fn registers_starting_renews_flags_and_unregisters_on_close() {
    let server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let script = Arc::new(Script::default());
    let fake = Fake::start(&nats, &project, answer(script.clone())).await;
    let rollout = Rollout {
        id: "r1".into(),
        modules: vec!["provider".into()],
    };
    let session = Session::start(client(&nats, &project), descriptor(), rollout)
        .await
        .unwrap();
    assert_eq!(session.current_status(), Status::Starting);
    let register =
        pb::RegisterRequest::decode(fake.requests("register")[0].payload.as_slice()).unwrap();
    assert_eq!(register.instance_id, session.instance_id());
    assert_eq!(register.lease_token.len(), 32);
    assert_eq!(register.rollout_id, "r1");
    assert_eq!(register.descriptor.unwrap().module_id, "provider");

    wait_until(DEADLINE, || async {
        script.renewals.load(Ordering::SeqCst) >= 2
    })
    .await
    .unwrap();
    assert_eq!(session.current_status(), Status::Starting);
    session.set_initialized();
    wait_until(DEADLINE, || async {
        session.current_status() == Status::Ready
    })
    .await
    .unwrap();
    let renewals = fake.requests("renew");
    let last = pb::RenewRequest::decode(renewals.last().unwrap().payload.as_slice()).unwrap();
    assert!(last.initialized && !last.draining);
    assert_eq!(last.lease_token, register.lease_token);

    session.close().await;
    let unregister =
        pb::UnregisterRequest::decode(fake.requests("unregister")[0].payload.as_slice()).unwrap();
    assert_eq!(unregister.instance_id, register.instance_id);
}

#[tokio::test]
async fn lease_expired_registers_again_under_the_same_id_with_a_new_token() {
    let server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let script = Arc::new(Script::default());
    script.renew_errors.lock().unwrap().push("LEASE_EXPIRED");
    let fake = Fake::start(&nats, &project, answer(script.clone())).await;
    let session = Session::start(client(&nats, &project), descriptor(), Rollout::default())
        .await
        .unwrap();
    wait_until(DEADLINE, || async { fake.requests("register").len() >= 2 })
        .await
        .unwrap();
    let registers: Vec<_> = fake
        .requests("register")
        .iter()
        .map(|s| pb::RegisterRequest::decode(s.payload.as_slice()).unwrap())
        .collect();
    assert_eq!(registers[0].instance_id, registers[1].instance_id);
    assert_ne!(registers[0].lease_token, registers[1].lease_token);
    // Renewals after that use the new lease token.
    let before = script.renewals.load(Ordering::SeqCst);
    wait_until(DEADLINE, || async {
        script.renewals.load(Ordering::SeqCst) > before
    })
    .await
    .unwrap();
    let renew = pb::RenewRequest::decode(fake.requests("renew").last().unwrap().payload.as_slice())
        .unwrap();
    assert_eq!(renew.lease_token, registers[1].lease_token);
    assert_eq!(session.current_status(), Status::Starting);
}

#[tokio::test]
async fn transient_failures_are_retried_and_mark_the_lease_unavailable() {
    let server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let script = Arc::new(Script::default());
    script
        .renew_errors
        .lock()
        .unwrap()
        .extend(["UNAVAILABLE", "REGISTRY_BUSY"]);
    let _fake = Fake::start(&nats, &project, answer(script.clone())).await;
    let session = Session::start(client(&nats, &project), descriptor(), Rollout::default())
        .await
        .unwrap();
    let mut changes = session.status_changes();
    tokio::time::timeout(DEADLINE, changes.wait_for(|s| *s == Status::Unavailable))
        .await
        .unwrap()
        .unwrap();
    wait_until(DEADLINE, || async {
        script.renewals.load(Ordering::SeqCst) >= 3
    })
    .await
    .unwrap();
    wait_until(DEADLINE, || async {
        session.current_status() == Status::Starting
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn draining_answer_requests_drain_and_a_fatal_code_ends_the_session() {
    let server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let script = Arc::new(Script::default());
    *script.renew_status.lock().unwrap() = "DRAINING".into();
    let _fake = Fake::start(&nats, &project, answer(script.clone())).await;
    let mut session = Session::start(client(&nats, &project), descriptor(), Rollout::default())
        .await
        .unwrap();
    tokio::time::timeout(DEADLINE, session.drain_requested().cancelled())
        .await
        .unwrap();

    script
        .renew_errors
        .lock()
        .unwrap()
        .push("PERMISSION_DENIED");
    let err = tokio::time::timeout(DEADLINE, session.failed())
        .await
        .unwrap();
    assert_eq!(err.kind(), SessionErrorKind::Renew);
    assert_eq!(session.current_status(), Status::Unavailable);
}

#[tokio::test]
async fn register_refused_is_a_register_error() {
    let server = NatsServer::start().await;
    let nats = connect(&server.url()).await;
    let project = unique_name("p");
    let _fake = Fake::start(&nats, &project, |_, _| {
        Some(
            pb::RegisterResponse {
                error: Some(WireError {
                    code: "DEPENDENCY_CYCLE".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }
            .encode_to_vec(),
        )
    })
    .await;
    let err = Session::start(client(&nats, &project), descriptor(), Rollout::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SessionErrorKind::Register);
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(source.contains("DEPENDENCY_CYCLE"), "{source}");
}
