//! One request, from headers and bytes to the reply bytes, exactly as the reference's
//! `DiscoveryNATS._handle`: token, size cap, decode, identity binding, the caller
//! token of the authorize calls, the registry, then the reply size cap.

use abi_proto::common::v1::CallError;
use abi_proto::discovery::v1 as pb;
use abi_registry::{ErrorCode, Mutation, Outcome};
use abi_wire::rpc::{Reply as _, Rpc};
use async_nats::HeaderMap;
use prost::Message;

use super::backend::{Backend, Failure};
use crate::config::Secret;
use crate::error::UNAVAILABLE_MESSAGE;
use abi_wire::discovery::Operation;

/// The largest request or reply the service handles, whatever the broker allows: the
/// registry itself is capped at this size.
pub const MAX_PAYLOAD_CAP: usize = 512 * 1024;

const UNAUTHENTICATED_MESSAGE: &str = "Missing or invalid service token";
const MALFORMED_MESSAGE: &str = "Malformed protobuf";
const REQUEST_TOO_LARGE: &str = "Discovery request exceeds limit";
const RESPONSE_TOO_LARGE: &str = "Discovery response exceeds limit";

/// The reply to one request: the encoded response and the error it carries, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The encoded `<Op>Response`.
    pub payload: Vec<u8>,
    /// The `CallError` inside it, for counting.
    pub error: Option<CallError>,
}

/// Turns requests into replies with a [`Backend`].
#[derive(Debug)]
pub struct Handler<B> {
    backend: B,
    /// Checks tokens with the project secret, remembering those that checked.
    verifier: abi_auth::Verifier,
    max_payload: usize,
}

/// Why a request failed before or in the registry.
#[derive(Debug)]
enum EdgeError {
    Unauthenticated,
    Malformed,
    Refused(abi_registry::Error),
    Unavailable(Option<String>),
}

impl From<Failure> for EdgeError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Refused(e) => Self::Refused(e),
            Failure::Unavailable { detail } => Self::Unavailable(detail),
        }
    }
}

impl From<prost::DecodeError> for EdgeError {
    fn from(_: prost::DecodeError) -> Self {
        Self::Malformed
    }
}

impl<B: Backend> Handler<B> {
    /// A handler checking tokens with `secret` and capping requests and replies at
    /// `min(broker_max_payload, 512 KiB)`.
    pub fn new(backend: B, secret: Secret, broker_max_payload: usize) -> Self {
        Self {
            backend,
            verifier: abi_auth::Verifier::new(secret.expose()),
            max_payload: broker_max_payload.min(MAX_PAYLOAD_CAP),
        }
    }

    /// The size cap in force.
    pub fn max_payload(&self) -> usize {
        self.max_payload
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Answers one request of `op`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe: a mutation dropped midway may still be committed. The
    /// endpoints run each request in its own task.
    pub async fn handle(
        &self,
        op: Operation,
        headers: Option<&HeaderMap>,
        payload: &[u8],
    ) -> Reply {
        let (payload, error) = match self.dispatch(op, headers, payload).await {
            Ok(bytes) => (bytes, None),
            Err(error) => {
                let error = self.call_error(op, error);
                (error_response(op, error.clone()), Some(error))
            }
        };
        if payload.len() > self.max_payload {
            let error = call_error(ErrorCode::PayloadTooLarge.as_str(), RESPONSE_TOO_LARGE);
            return Reply {
                payload: error_response(op, error.clone()),
                error: Some(error),
            };
        }
        Reply { payload, error }
    }

    fn call_error(&self, op: Operation, error: EdgeError) -> CallError {
        match error {
            EdgeError::Unauthenticated => {
                call_error(ErrorCode::Unauthenticated.as_str(), UNAUTHENTICATED_MESSAGE)
            }
            EdgeError::Malformed => {
                call_error(ErrorCode::InvalidArgument.as_str(), MALFORMED_MESSAGE)
            }
            // The reference puts `str(DiscoveryError)`, which is "CODE: message".
            EdgeError::Refused(e) => call_error(e.code().as_str(), &e.to_string()),
            EdgeError::Unavailable(detail) => {
                if let Some(detail) = detail {
                    tracing::error!(op = op.as_str(), error = %detail, "discovery request failed");
                }
                call_error(ErrorCode::Unavailable.as_str(), UNAVAILABLE_MESSAGE)
            }
        }
    }

    async fn dispatch(
        &self,
        op: Operation,
        headers: Option<&HeaderMap>,
        payload: &[u8],
    ) -> Result<Vec<u8>, EdgeError> {
        let token = headers
            .and_then(|h| h.get(abi_auth::AUTH_HEADER))
            .map_or("", |v| v.as_str());
        let owner = self
            .verifier
            .verify(token, None)
            .map_err(|_| EdgeError::Unauthenticated)?;
        // An overflow upload is above the broker limit, so above this cap too.
        let overflowed =
            headers.is_some_and(|h| h.get(abi_wire::overflow::REQUEST_HEADER).is_some());
        if payload.len() > self.max_payload || overflowed {
            return Err(EdgeError::Refused(abi_registry::Error::new(
                ErrorCode::PayloadTooLarge,
                REQUEST_TOO_LARGE,
            )));
        }
        let backend = &self.backend;
        let bytes = match op {
            Operation::Register => {
                let req = pb::RegisterRequest::decode(payload)?;
                let module_id = req.descriptor.as_ref().map_or("", |d| d.module_id.as_str());
                if module_id != owner {
                    // A module registers as itself: no other identity may take over its
                    // agents, jobs, models or apps.
                    return Err(EdgeError::Refused(abi_registry::Error::new(
                        ErrorCode::PermissionDenied,
                        format!(
                            "Identity {} cannot register module {}: a module registers with a \
                             token for its own module id",
                            abi_pyjson::python_str_repr(&owner),
                            abi_pyjson::python_str_repr(module_id)
                        ),
                    )));
                }
                match backend.mutate(Mutation::Register(req), &owner).await? {
                    Outcome::Register(r) => r.encode_to_vec(),
                    other => return Err(mismatch(op, &other)),
                }
            }
            Operation::Renew => {
                let req = pb::RenewRequest::decode(payload)?;
                match backend.mutate(Mutation::Renew(req), &owner).await? {
                    Outcome::Renew(r) => r.encode_to_vec(),
                    other => return Err(mismatch(op, &other)),
                }
            }
            Operation::Unregister => {
                let req = pb::UnregisterRequest::decode(payload)?;
                match backend.mutate(Mutation::Unregister(req), &owner).await? {
                    Outcome::Unregister(r) => r.encode_to_vec(),
                    other => return Err(mismatch(op, &other)),
                }
            }
            Operation::Evict => {
                let req = pb::EvictRequest::decode(payload)?;
                match backend.mutate(Mutation::Evict(req), &owner).await? {
                    Outcome::Evict(r) => r.encode_to_vec(),
                    other => return Err(mismatch(op, &other)),
                }
            }
            Operation::GetModule => {
                let req = pb::GetModuleRequest::decode(payload)?;
                backend.get_module(&req).await?.encode_to_vec()
            }
            Operation::ListModules => {
                let req = pb::ListModulesRequest::decode(payload)?;
                backend.list_modules(&req).await?.encode_to_vec()
            }
            Operation::AuthorizeAgent => {
                let req = pb::AuthorizeAgentRequest::decode(payload)?;
                let caller = self.caller(&req.caller_token, &req.instance_id)?;
                let mut resp = backend.authorize_agent(&req, &owner).await?;
                resp.caller_admin = backend.is_admin(&caller);
                resp.caller_identity = caller;
                resp.encode_to_vec()
            }
            Operation::AuthorizeModel => {
                let req = pb::AuthorizeModelRequest::decode(payload)?;
                let caller = self.caller(&req.caller_token, &req.instance_id)?;
                let mut resp = backend.authorize_model(&req, &owner).await?;
                resp.caller_admin = backend.is_admin(&caller);
                resp.caller_identity = caller;
                resp.encode_to_vec()
            }
            Operation::AuthorizeApp => {
                let req = pb::AuthorizeAppRequest::decode(payload)?;
                let caller = self.caller(&req.caller_token, &req.instance_id)?;
                let mut resp = backend.authorize_app(&req, &owner).await?;
                resp.caller_admin = backend.is_admin(&caller);
                resp.caller_identity = caller;
                resp.encode_to_vec()
            }
        };
        Ok(bytes)
    }

    /// The identity of the caller a module asks about: its token must be bound to the
    /// instance asking, so one sent to another instance (or kept) is refused.
    fn caller(&self, caller_token: &str, instance_id: &str) -> Result<String, EdgeError> {
        self.verifier
            .verify(caller_token, Some(instance_id))
            .map_err(|_| EdgeError::Unauthenticated)
    }
}

fn mismatch(op: Operation, outcome: &Outcome) -> EdgeError {
    EdgeError::Unavailable(Some(format!(
        "{} produced an outcome of another operation: {outcome:?}",
        op.as_str()
    )))
}

fn call_error(code: &str, message: &str) -> CallError {
    CallError {
        code: code.to_owned(),
        message: message.to_owned(),
        // The reference never marks discovery errors retryable.
        retryable: false,
        status: None,
    }
}

/// The reply of `op` carrying only `error`, encoded (the reference's refusal).
fn error_response(op: Operation, error: CallError) -> Vec<u8> {
    /// The refusal of the operation whose request type is `R`.
    fn refusal<R: Rpc>(error: CallError) -> Vec<u8> {
        R::Response::with_error(error).encode_to_vec()
    }
    match op {
        Operation::Register => refusal::<pb::RegisterRequest>(error),
        Operation::Renew => refusal::<pb::RenewRequest>(error),
        Operation::Unregister => refusal::<pb::UnregisterRequest>(error),
        Operation::Evict => refusal::<pb::EvictRequest>(error),
        Operation::GetModule => refusal::<pb::GetModuleRequest>(error),
        Operation::ListModules => refusal::<pb::ListModulesRequest>(error),
        Operation::AuthorizeAgent => refusal::<pb::AuthorizeAgentRequest>(error),
        Operation::AuthorizeModel => refusal::<pb::AuthorizeModelRequest>(error),
        Operation::AuthorizeApp => refusal::<pb::AuthorizeAppRequest>(error),
    }
}
