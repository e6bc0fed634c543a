//! Who calls: discovery's `authorize_agent`, whose answer for a (caller
//! token, agent) pair is reused for every call, submits included, for
//! [`abi_wire::agents::AUTHORIZATION_SECS`], never past the token's expiry.
//!
//! The reference asks discovery on every submit (`new_invocation`), because
//! discovery then also checks that the provider is READY. This host answers
//! a submit from the cached grant too, and makes that one extra check
//! itself, on every submit, against this instance's own lease status (the
//! status discovery confirmed at the last renewal, `UNAVAILABLE` once that
//! lease passed): a provider that turned DRAINING or DEGRADED refuses its
//! next submit with discovery's own answer, `MODULE_UNAVAILABLE: Provider is
//! not ready`. A first submit for a (token, agent) pair still asks discovery,
//! with `new_invocation` set; a refusal is never cached.

use abi_wire::ErrorCode;
use std::time::Instant;

use abi_proto::discovery::v1 as pb;
use abi_wire::agents::{AUTHORIZATION_SECS, MAX_AUTHORIZATIONS};

use super::Shared;
use abi_sdk_core::Status;
use abi_sdk_core::{CallError, CallErrorKind};

/// A vouched-for caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) identity: String,
    pub(crate) admin: bool,
}

/// Discovery's answers by (caller token, agent).
pub(crate) type Authorizations = abi_sdk_core::host::grants::Authorizations<Caller>;

/// An empty cache with the reference's lifetime and size.
pub(crate) fn authorizations() -> Authorizations {
    Authorizations::new(AUTHORIZATION_SECS, MAX_AUTHORIZATIONS)
}

/// The caller of a request to agent `name`, as discovery vouches for it.
pub(crate) async fn authorize(
    shared: &Shared,
    name: &str,
    token: &str,
    new_invocation: bool,
) -> Result<Caller, CallError> {
    let now = Instant::now();
    let session = &shared.links.session;
    if let Some(caller) = shared.auth.cached(token, name, now) {
        if new_invocation {
            ready(session.current_status())?;
        }
        return Ok(caller);
    }
    let reply = shared
        .links
        .discovery
        .call(&pb::AuthorizeAgentRequest {
            instance_id: session.instance_id().to_owned(),
            lease_token: session.lease_token(),
            agent_name: name.to_owned(),
            caller_token: token.to_owned(),
            new_invocation,
            ..Default::default()
        })
        .await?;
    let caller = Caller {
        identity: reply.caller_identity,
        admin: reply.caller_admin,
    };
    shared.auth.remember(token, name, &caller, now);
    Ok(caller)
}

/// Whether this instance may accept a new run at `status`: discovery's own
/// answer to a submit for a provider not READY otherwise (its code, and its
/// message, which is the reference's `str(DiscoveryError)`, "CODE: text"), so
/// the refusal built from it is the one built from discovery's.
fn ready(status: Status) -> Result<(), CallError> {
    if status == Status::Ready {
        return Ok(());
    }
    Err(CallError::new(
        CallErrorKind::ModuleUnavailable,
        "MODULE_UNAVAILABLE: Provider is not ready",
    )
    .with_code(ErrorCode::ModuleUnavailable.as_str()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_cached_submit_refuses_as_discovery_unless_ready() {
        assert!(ready(Status::Ready).is_ok());
        for status in [
            Status::Starting,
            Status::Staged,
            Status::Degraded,
            Status::Draining,
            Status::Unavailable,
            Status::Stopped,
        ] {
            let refused = ready(status).unwrap_err();
            assert_eq!(
                refused.kind(),
                CallErrorKind::ModuleUnavailable,
                "{status:?}"
            );
            // Discovery's code and message (`str(DiscoveryError)`).
            assert_eq!(refused.code(), Some("MODULE_UNAVAILABLE"), "{status:?}");
            assert_eq!(
                refused.message(),
                "MODULE_UNAVAILABLE: Provider is not ready",
                "{status:?}"
            );
        }
    }
}
