//! The request handler with a fake backend: the failures a real registry rarely
//! gives (store down, a reply above the cap) and the order of the checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;
use std::time::SystemTime;

use abi_discovery::config::Secret;
use abi_discovery::endpoints::{Backend, Failure, Handler};
use abi_proto::discovery::v1 as pb;
use abi_registry::{ErrorCode, Mutation, Outcome};
use abi_wire::discovery::Operation;
use async_nats::HeaderMap;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use prost::Message as _;

const SECRET: &str = "handler-secret-0123456789-0123456789";

/// Answers lookups with `instances` copies of a big instance, and mutations with
/// `mutation_failure` (or success); records the owners it was called with.
#[derive(Default)]
struct Fake {
    instances: usize,
    mutation_failure: Option<fn() -> Failure>,
    owners: Mutex<Vec<String>>,
}

fn big_instance(i: usize) -> pb::Instance {
    pb::Instance {
        instance_id: format!("i{i}"),
        descriptor: Some(pb::ModuleDescriptor {
            module_id: "m".into(),
            package_version: "x".repeat(1000),
            ..Default::default()
        }),
        ..Default::default()
    }
}

impl Backend for Fake {
    fn mutate<'a>(
        &'a self,
        mutation: Mutation,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<Outcome, Failure>> {
        self.owners.lock().unwrap().push(owner.to_owned());
        let result = match self.mutation_failure {
            Some(failure) => Err(failure()),
            None => Ok(match mutation {
                Mutation::Register(_) => Outcome::Register(pb::RegisterResponse::default()),
                Mutation::Renew(_) => Outcome::Renew(pb::RenewResponse::default()),
                Mutation::Unregister(_) => Outcome::Unregister(pb::UnregisterResponse::default()),
                // A wrong outcome, to see it handled.
                Mutation::Evict(_) => Outcome::Renew(pb::RenewResponse::default()),
            }),
        };
        async move { result }.boxed()
    }

    fn get_module<'a>(
        &'a self,
        _req: &'a pb::GetModuleRequest,
    ) -> BoxFuture<'a, Result<pb::GetModuleResponse, Failure>> {
        let instances = (0..self.instances).map(big_instance).collect();
        async move {
            Ok(pb::GetModuleResponse {
                instances,
                ..Default::default()
            })
        }
        .boxed()
    }

    fn list_modules<'a>(
        &'a self,
        _req: &'a pb::ListModulesRequest,
    ) -> BoxFuture<'a, Result<pb::ListModulesResponse, Failure>> {
        async {
            Err(Failure::Unavailable {
                detail: Some("store down".into()),
            })
        }
        .boxed()
    }

    fn authorize_agent<'a>(
        &'a self,
        _req: &'a pb::AuthorizeAgentRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeAgentResponse, Failure>> {
        self.owners.lock().unwrap().push(owner.to_owned());
        async { Ok(pb::AuthorizeAgentResponse::default()) }.boxed()
    }

    fn authorize_model<'a>(
        &'a self,
        _req: &'a pb::AuthorizeModelRequest,
        _owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeModelResponse, Failure>> {
        async { Ok(pb::AuthorizeModelResponse::default()) }.boxed()
    }

    fn authorize_app<'a>(
        &'a self,
        _req: &'a pb::AuthorizeAppRequest,
        _owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeAppResponse, Failure>> {
        async { Ok(pb::AuthorizeAppResponse::default()) }.boxed()
    }

    fn is_admin(&self, identity: &str) -> bool {
        identity == "api"
    }
}

fn token(identity: &str) -> String {
    abi_test_support::requests::service_token(SECRET, identity)
}

fn with_token(identity: &str) -> HeaderMap {
    abi_test_support::auth_headers(Some(&token(identity)))
}

fn handler(fake: Fake, broker_max_payload: usize) -> Handler<Fake> {
    Handler::new(fake, Secret::new(SECRET), broker_max_payload)
}

#[tokio::test]
async fn the_cap_is_the_smaller_of_the_broker_and_512_kib() {
    assert_eq!(handler(Fake::default(), 1 << 20).max_payload(), 512 * 1024);
    assert_eq!(handler(Fake::default(), 1000).max_payload(), 1000);
}

#[tokio::test]
async fn a_reply_above_the_cap_becomes_payload_too_large() {
    let h = handler(
        Fake {
            instances: 10,
            ..Default::default()
        },
        4096,
    );
    let request = pb::GetModuleRequest {
        module_id: "m".into(),
        contract_major: 1,
        ..Default::default()
    };
    let reply = h
        .handle(
            Operation::GetModule,
            Some(&with_token("api")),
            &request.encode_to_vec(),
        )
        .await;
    let decoded = pb::GetModuleResponse::decode(reply.payload.as_slice()).unwrap();
    assert!(decoded.instances.is_empty());
    let error = decoded.error.unwrap();
    assert_eq!(error.code, "PAYLOAD_TOO_LARGE");
    // No "CODE: " prefix here, as in the reference.
    assert_eq!(error.message, "Discovery response exceeds limit");
    assert_eq!(reply.error, Some(error));
}

#[tokio::test]
async fn store_failures_are_unavailable_without_internals() {
    let h = handler(
        Fake {
            mutation_failure: Some(|| Failure::Unavailable { detail: None }),
            ..Default::default()
        },
        1 << 20,
    );
    let reply = h
        .handle(
            Operation::ListModules,
            Some(&with_token("api")),
            &pb::ListModulesRequest::default().encode_to_vec(),
        )
        .await;
    let error = reply.error.unwrap();
    assert_eq!(error.code, "UNAVAILABLE");
    assert_eq!(error.message, "Registry operation failed");
    assert!(!error.retryable);

    let reply = h
        .handle(
            Operation::Renew,
            Some(&with_token("m")),
            &pb::RenewRequest::default().encode_to_vec(),
        )
        .await;
    assert_eq!(reply.error.unwrap().message, "Registry operation failed");
    // A wrong outcome from the backend is an internal failure too.
    let h = handler(Fake::default(), 1 << 20);
    let reply = h
        .handle(
            Operation::Evict,
            Some(&with_token("api")),
            &pb::EvictRequest::default().encode_to_vec(),
        )
        .await;
    assert_eq!(reply.error.unwrap().code, "UNAVAILABLE");
}

#[tokio::test]
async fn rule_refusals_carry_code_and_prefixed_message() {
    let h = handler(
        Fake {
            mutation_failure: Some(|| {
                Failure::Refused(abi_registry::Error::new(
                    ErrorCode::LeaseExpired,
                    "Registration expired",
                ))
            }),
            ..Default::default()
        },
        1 << 20,
    );
    let reply = h
        .handle(
            Operation::Renew,
            Some(&with_token("m")),
            &pb::RenewRequest::default().encode_to_vec(),
        )
        .await;
    let decoded = pb::RenewResponse::decode(reply.payload.as_slice()).unwrap();
    let error = decoded.error.unwrap();
    assert_eq!(error.code, "LEASE_EXPIRED");
    assert_eq!(error.message, "LEASE_EXPIRED: Registration expired");
}

#[tokio::test]
async fn checks_run_in_the_reference_order() {
    let fake = Fake::default();
    let h = handler(fake, 1 << 20);
    // Token before size, size before decoding, decoding before identity.
    let big = vec![0xff; 600 * 1024];
    let reply = h.handle(Operation::Register, None, &big).await;
    assert_eq!(reply.error.unwrap().code, "UNAUTHENTICATED");
    let reply = h
        .handle(Operation::Register, Some(&with_token("m")), &big)
        .await;
    assert_eq!(reply.error.unwrap().code, "PAYLOAD_TOO_LARGE");
    let reply = h
        .handle(Operation::Register, Some(&with_token("m")), &[0xff])
        .await;
    assert_eq!(reply.error.unwrap().code, "INVALID_ARGUMENT");
    // Identity binding before the registry; the caller token before the registry.
    let reply = h
        .handle(
            Operation::Register,
            Some(&with_token("m")),
            &pb::RegisterRequest::default().encode_to_vec(),
        )
        .await;
    assert_eq!(
        reply.error.unwrap().message,
        "PERMISSION_DENIED: Identity 'm' cannot register module '': a module registers with \
         a token for its own module id"
    );
    let reply = h
        .handle(
            Operation::AuthorizeAgent,
            Some(&with_token("m")),
            &pb::AuthorizeAgentRequest::default().encode_to_vec(),
        )
        .await;
    assert_eq!(reply.error.unwrap().code, "UNAUTHENTICATED");
    assert!(h.backend().owners.lock().unwrap().is_empty());

    // Success: the owner is the token identity, the caller fields are filled.
    let caller = abi_auth::issue_service_token(
        "api",
        SECRET,
        abi_auth::BOUND_TTL,
        SystemTime::now(),
        Some("i1"),
    )
    .unwrap();
    let reply = h
        .handle(
            Operation::AuthorizeAgent,
            Some(&with_token("m")),
            &pb::AuthorizeAgentRequest {
                instance_id: "i1".into(),
                caller_token: caller,
                ..Default::default()
            }
            .encode_to_vec(),
        )
        .await;
    assert_eq!(reply.error, None);
    let decoded = pb::AuthorizeAgentResponse::decode(reply.payload.as_slice()).unwrap();
    assert_eq!(decoded.caller_identity, "api");
    assert!(decoded.caller_admin);
    assert_eq!(*h.backend().owners.lock().unwrap(), ["m"]);
}
