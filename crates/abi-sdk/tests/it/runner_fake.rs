//! The runner's registration against a scripted discovery service on the
//! in-process transport: codes that ask for a retry (a registry busy or
//! unavailable while a cluster elects a new leader) are retried within the
//! startup timeout with the same instance id and lease token; any other code
//! ends the start at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{Fake, PROJECT};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use abi_proto::common::v1::CallError as WireError;
use abi_sdk::{
    Config, Context, DiscoveryConfig, HookResult, Module, ModuleSpec, RunErrorKind, Runner,
    TokenSource, pb,
};
use abi_wire::{ErrorCode, status};
use prost::Message;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Bounds every wait of these tests (real time).
const WAIT: Duration = Duration::from_secs(20);

/// A module that says when it is initialized.
struct Started(mpsc::UnboundedSender<()>);

impl Module for Started {
    async fn on_initialized(&self, _cx: &Context) -> HookResult {
        let _ = self.0.send(());
        Ok(())
    }
}

/// A discovery service whose first registrations answer `codes`, in order;
/// the rest, renewals and unregistrations succeed.
fn refusing_first(codes: &'static [ErrorCode]) -> Arc<Fake> {
    let registrations = AtomicUsize::new(0);
    Fake::start(move |operation, payload| {
        Some(match operation {
            "register" => {
                let request = pb::RegisterRequest::decode(payload).unwrap();
                let n = registrations.fetch_add(1, Ordering::SeqCst);
                let error = codes.get(n).map(|code| WireError {
                    code: code.as_str().into(),
                    message: "scripted".into(),
                    ..Default::default()
                });
                pb::RegisterResponse {
                    instance: error.is_none().then(|| pb::Instance {
                        instance_id: request.instance_id,
                        status: status::STARTING.into(),
                        ..Default::default()
                    }),
                    lease_seconds: 20.0,
                    error,
                }
                .encode_to_vec()
            }
            "renew" => {
                let request = pb::RenewRequest::decode(payload).unwrap();
                pb::RenewResponse {
                    instance: Some(pb::Instance {
                        instance_id: request.instance_id,
                        status: status::READY.into(),
                        ..Default::default()
                    }),
                    lease_seconds: 20.0,
                    ..Default::default()
                }
                .encode_to_vec()
            }
            _ => Vec::new(),
        })
    })
}

fn runner(fake: &Arc<Fake>, stop: &CancellationToken) -> Runner {
    let config = Config::default()
        .token(TokenSource::issued("test-token"))
        .request_timeout(Duration::from_secs(2))
        .discovery(
            DiscoveryConfig::default()
                .project(PROJECT)
                .startup_timeout(Duration::from_secs(15)),
        );
    Runner::new(ModuleSpec::new("patient"))
        .config(config)
        .local(fake.clone())
        .handle_signals(false)
        .stop_on(stop.clone())
}

#[tokio::test]
async fn a_busy_or_unavailable_registry_is_asked_again_with_the_same_lease() {
    let fake = refusing_first(&[
        ErrorCode::RegistryBusy,
        ErrorCode::Unavailable,
        ErrorCode::RegistryBusy,
    ]);
    let stop = CancellationToken::new();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let running = tokio::spawn(runner(&fake, &stop).run(Started(started_tx)));

    tokio::time::timeout(WAIT, started.recv())
        .await
        .expect("initialized after the retries")
        .expect("the module said so");
    let attempts: Vec<_> = fake
        .requests("register")
        .iter()
        .map(|seen| pb::RegisterRequest::decode(seen.payload.as_slice()).unwrap())
        .collect();
    assert_eq!(attempts.len(), 4, "three refusals, then the registration");
    for attempt in &attempts {
        assert_eq!(attempt.instance_id, attempts[0].instance_id);
        assert_eq!(attempt.lease_token, attempts[0].lease_token);
    }

    stop.cancel();
    let ended = tokio::time::timeout(WAIT, running).await.expect("drained");
    ended.unwrap().expect("a clean stop");
}

#[tokio::test]
async fn a_code_no_retry_fixes_ends_the_start_at_once() {
    let fake = refusing_first(&[ErrorCode::DescriptorConflict]);
    let stop = CancellationToken::new();
    let (started_tx, _started) = mpsc::unbounded_channel();
    let err = tokio::time::timeout(WAIT, runner(&fake, &stop).run(Started(started_tx)))
        .await
        .expect("ends without waiting for the startup timeout")
        .expect_err("refused");
    assert_eq!(err.kind(), RunErrorKind::Register);
    assert_eq!(fake.requests("register").len(), 1);
}
