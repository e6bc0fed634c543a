//! The discovery workload: a fleet of instances with their tokens and
//! pre-encoded requests, and one timed call on the wire.

use std::time::{Duration, Instant, SystemTime};

use abi_proto::common::v1::CallError;
use abi_proto::discovery::v1 as pb;
use anyhow::{Context as _, bail};
use async_nats::{Client, HeaderMap};
use bytes::Bytes;
use prost::Message;

/// Instances per module: lookups answer a few instances, as a small replicated
/// module would have.
pub const INSTANCES_PER_MODULE: usize = 4;

/// Lifetime of the bench's tokens: longer than any run.
const TOKEN_TTL: Duration = Duration::from_secs(2 * 60 * 60);

/// One instance of the fleet, with everything its calls need pre-encoded so
/// only the wire and the service are timed.
#[derive(Debug, Clone)]
pub struct Member {
    /// `Nats-Auth-Token` with a module token for its own module id.
    pub headers: HeaderMap,
    /// Encoded `RegisterRequest`.
    pub register: Bytes,
    /// Encoded `RenewRequest`.
    pub renew: Bytes,
    /// Encoded `GetModuleRequest` for its module.
    pub get_module: Bytes,
}

/// `n` instances, `INSTANCES_PER_MODULE` per module, each module with a token
/// signed by its own module key (a module registers only its own id).
///
/// # Errors
///
/// When a token cannot be minted.
pub fn fleet(secret: &str, n: usize) -> anyhow::Result<Vec<Member>> {
    let now = SystemTime::now();
    (0..n)
        .map(|i| {
            let module_id = format!("bench-m{:03}", i / INSTANCES_PER_MODULE);
            let instance_id = format!("bench-i{i:04}");
            let lease_token = format!("bench-lease-{i:04}-{}", "x".repeat(32));
            let key = abi_auth::module_key(secret, &module_id)?;
            let token = abi_auth::issue_module_token(&module_id, &key, TOKEN_TTL, now, None)?;
            let mut headers = HeaderMap::new();
            headers.insert(abi_auth::AUTH_HEADER, token.as_str());
            let register = pb::RegisterRequest {
                descriptor: Some(pb::ModuleDescriptor {
                    module_id: module_id.clone(),
                    package_version: "1.0.0".to_owned(),
                    contract_major: 1,
                    ..Default::default()
                }),
                instance_id: instance_id.clone(),
                lease_token: lease_token.clone(),
                ..Default::default()
            };
            let renew = pb::RenewRequest {
                instance_id,
                lease_token,
                initialized: true,
                ..Default::default()
            };
            let get_module = pb::GetModuleRequest {
                module_id,
                contract_major: 1,
                ..Default::default()
            };
            Ok(Member {
                headers,
                register: register.encode_to_vec().into(),
                renew: renew.encode_to_vec().into(),
                get_module: get_module.encode_to_vec().into(),
            })
        })
        .collect()
}

/// A discovery response that may carry a `CallError`.
pub trait Response: Message + Default {
    /// The error the service answered, if any.
    fn call_error(&self) -> Option<&CallError>;
}

macro_rules! response {
    ($($t:ty),*) => {$(
        impl Response for $t {
            fn call_error(&self) -> Option<&CallError> {
                self.error.as_ref()
            }
        }
    )*};
}
response!(
    pb::RegisterResponse,
    pb::RenewResponse,
    pb::GetModuleResponse
);

/// One request, timed from send to reply; the reply must decode as `R` and
/// carry no error.
///
/// # Errors
///
/// A transport error, a reply that does not decode, or a `CallError`.
///
/// # Cancel safety
///
/// Not cancel safe: dropped after the request went out, the service may still carry it out (a
/// register or renew) and its reply is lost.
pub async fn call<R: Response>(
    client: &Client,
    subject: &str,
    headers: &HeaderMap,
    payload: &Bytes,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let reply = client
        .request_with_headers(subject.to_owned(), headers.clone(), payload.clone())
        .await
        .with_context(|| format!("request on {subject}"))?;
    let elapsed = start.elapsed();
    let response =
        R::decode(reply.payload).with_context(|| format!("decode reply on {subject}"))?;
    if let Some(error) = response.call_error() {
        bail!("{subject}: {}: {}", error.code, error.message);
    }
    Ok(elapsed)
}
