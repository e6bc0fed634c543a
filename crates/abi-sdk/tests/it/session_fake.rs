//! The lease session against a scripted responder on the in-process
//! transport, with a paused clock: renewals come from the session's own timers
//! in virtual time, moved on with `tokio::time::advance`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{DEADLINE, Fake};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_proto::common::v1::CallError as WireError;
use abi_sdk::{Rollout, Session, SessionErrorKind, Status, pb};
use prost::Message;
use tokio::time::{advance, timeout};

/// The lease every scripted answer grants.
const LEASE_SECONDS: f64 = 20.0;
/// Longer than one healthy renewal interval (a quarter lease, 5 s, plus 10 %
/// jitter) and shorter than two: each advance by this much brings exactly one
/// renewal.
const RENEWAL: Duration = Duration::from_secs(6);

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
        let lease_seconds = LEASE_SECONDS;
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

/// Waits (in virtual time) until the session reports `status`.
async fn status_becomes(session: &Session, status: Status) {
    let mut changes = session.status_changes();
    timeout(DEADLINE, changes.wait_for(|s| *s == status))
        .await
        .unwrap_or_else(|_| panic!("status {status:?} within {DEADLINE:?}"))
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn registers_starting_renews_flags_and_unregisters_on_close() {
    let script = Arc::new(Script::default());
    let fake = Fake::start(answer(script.clone()));
    let rollout = Rollout {
        id: "r1".into(),
        modules: vec!["provider".into()],
    };
    let session = Session::start(fake.client(), descriptor(), rollout)
        .await
        .unwrap();
    assert_eq!(session.current_status(), Status::Starting);
    let register =
        pb::RegisterRequest::decode(fake.requests("register")[0].payload.as_slice()).unwrap();
    assert_eq!(register.instance_id, session.instance_id());
    assert_eq!(register.lease_token.len(), 32);
    assert_eq!(register.rollout_id, "r1");
    assert_eq!(register.descriptor.unwrap().module_id, "provider");

    for n in 1..=2 {
        advance(RENEWAL).await;
        fake.wait_for("renew", n).await;
    }
    assert_eq!(script.renewals.load(Ordering::SeqCst), 2);
    assert_eq!(session.current_status(), Status::Starting);
    session.set_initialized();
    advance(RENEWAL).await;
    status_becomes(&session, Status::Ready).await;
    let renewals = fake.requests("renew");
    let last = pb::RenewRequest::decode(renewals.last().unwrap().payload.as_slice()).unwrap();
    assert!(last.initialized && !last.draining);
    assert_eq!(last.lease_token, register.lease_token);

    session.close().await;
    let unregister =
        pb::UnregisterRequest::decode(fake.requests("unregister")[0].payload.as_slice()).unwrap();
    assert_eq!(unregister.instance_id, register.instance_id);
}

#[tokio::test(start_paused = true)]
async fn lease_expired_registers_again_under_the_same_id_with_a_new_token() {
    let script = Arc::new(Script::default());
    script.renew_errors.lock().unwrap().push("LEASE_EXPIRED");
    let fake = Fake::start(answer(script.clone()));
    let session = Session::start(fake.client(), descriptor(), Rollout::default())
        .await
        .unwrap();
    advance(RENEWAL).await;
    let registers: Vec<_> = fake
        .wait_for("register", 2)
        .await
        .iter()
        .map(|s| pb::RegisterRequest::decode(s.payload.as_slice()).unwrap())
        .collect();
    assert_eq!(registers[0].instance_id, registers[1].instance_id);
    assert_ne!(registers[0].lease_token, registers[1].lease_token);
    // Renewals after that use the new lease token.
    let before = script.renewals.load(Ordering::SeqCst);
    advance(RENEWAL).await;
    let renewals = fake.wait_for("renew", before + 1).await;
    let renew = pb::RenewRequest::decode(renewals.last().unwrap().payload.as_slice()).unwrap();
    assert_eq!(renew.lease_token, registers[1].lease_token);
    assert_eq!(session.current_status(), Status::Starting);
}

#[tokio::test(start_paused = true)]
async fn transient_failures_are_retried_and_mark_the_lease_unavailable() {
    let script = Arc::new(Script::default());
    script
        .renew_errors
        .lock()
        .unwrap()
        .extend(["UNAVAILABLE", "REGISTRY_BUSY"]);
    let fake = Fake::start(answer(script.clone()));
    let session = Session::start(fake.client(), descriptor(), Rollout::default())
        .await
        .unwrap();
    advance(RENEWAL).await;
    status_becomes(&session, Status::Unavailable).await;
    // The retries come on the backoff schedule (virtual time runs on while
    // the test waits); the third renewal succeeds.
    fake.wait_for("renew", 3).await;
    status_becomes(&session, Status::Starting).await;
    assert_eq!(script.renewals.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn draining_answer_requests_drain_and_a_fatal_code_ends_the_session() {
    let script = Arc::new(Script::default());
    *script.renew_status.lock().unwrap() = "DRAINING".into();
    let fake = Fake::start(answer(script.clone()));
    let mut session = Session::start(fake.client(), descriptor(), Rollout::default())
        .await
        .unwrap();
    advance(RENEWAL).await;
    timeout(DEADLINE, session.drain_requested().cancelled())
        .await
        .unwrap();

    script
        .renew_errors
        .lock()
        .unwrap()
        .push("PERMISSION_DENIED");
    advance(RENEWAL).await;
    let err = timeout(DEADLINE, session.failed()).await.unwrap();
    assert_eq!(err.kind(), SessionErrorKind::Renew);
    assert_eq!(session.current_status(), Status::Unavailable);
}

#[tokio::test(start_paused = true)]
async fn register_refused_is_a_register_error() {
    let fake = Fake::start(|_, _| {
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
    });
    let err = Session::start(fake.client(), descriptor(), Rollout::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), SessionErrorKind::Register);
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(source.contains("DEPENDENCY_CYCLE"), "{source}");
}
