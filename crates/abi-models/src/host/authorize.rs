//! Authorizing a chat: discovery's `authorize_model`, remembered briefly.
//!
//! The reference asks discovery on every chat (weakness 15: a registry read
//! per chat). This host remembers a granted `(caller token, model)` pair for
//! [`GRANT_TTL`] and asks again after that; a refusal is never remembered.
//! What discovery checks about the provider, that it is READY, is still
//! checked on every chat, against the instance's own lease status (the
//! status discovery confirmed at the last renewal): a provider that turned
//! DRAINING or DEGRADED refuses its next chat as discovery would.

use abi_wire::ErrorCode;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use tokio::time::Instant;

use abi_sdk_core::DiscoveryClient;
use abi_sdk_core::SessionHandle;
use abi_sdk_core::Status;
use abi_sdk_core::{CallError, CallErrorKind};

/// How long a granted authorization is reused (the agent host's window).
pub(crate) const GRANT_TTL: Duration = Duration::from_secs(5);
/// Grants remembered before the cache starts over (bounds its memory).
const MAX_GRANTS: usize = 4096;

/// Granted `(caller token, model)` pairs and when each stops counting.
#[derive(Default)]
pub(crate) struct Grants {
    granted: Mutex<HashMap<(String, String), Instant>>,
}

impl Grants {
    /// Authorizes a chat on `model` by the caller holding `caller_token`.
    ///
    /// # Errors
    ///
    /// Discovery's refusal (`UNAUTHENTICATED`, `PERMISSION_DENIED`,
    /// `MODULE_UNAVAILABLE`, ...), a transport error, or
    /// `MODULE_UNAVAILABLE` when the provider's own status is not READY.
    pub(crate) async fn authorize(
        &self,
        discovery: &DiscoveryClient,
        session: &SessionHandle,
        model: &str,
        caller_token: &str,
    ) -> Result<(), CallError> {
        let key = (caller_token.to_owned(), model.to_owned());
        if self.granted_now(&key) {
            if session.current_status() == Status::Ready {
                return Ok(());
            }
            // The same answer discovery gives a provider that is not READY.
            return Err(CallError::new(
                CallErrorKind::ModuleUnavailable,
                "MODULE_UNAVAILABLE: Provider is not ready",
            )
            .with_code(ErrorCode::ModuleUnavailable.as_str()));
        }
        discovery
            .call(&pb::AuthorizeModelRequest {
                instance_id: session.instance_id().to_owned(),
                lease_token: session.lease_token(),
                model_name: model.to_owned(),
                caller_token: caller_token.to_owned(),
                ..Default::default()
            })
            .await?;
        self.grant(key);
        Ok(())
    }

    fn granted_now(&self, key: &(String, String)) -> bool {
        // A poisoned lock only means a thread panicked holding it; the map is
        // still a valid cache.
        let granted = self.granted.lock().unwrap_or_else(|e| e.into_inner());
        granted
            .get(key)
            .is_some_and(|until| Instant::now() < *until)
    }

    fn grant(&self, key: (String, String)) {
        let mut granted = self.granted.lock().unwrap_or_else(|e| e.into_inner());
        if granted.len() >= MAX_GRANTS {
            let now = Instant::now();
            granted.retain(|_, until| *until > now);
            if granted.len() >= MAX_GRANTS {
                granted.clear();
            }
        }
        granted.insert(key, Instant::now() + GRANT_TTL);
    }
}
