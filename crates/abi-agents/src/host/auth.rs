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
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// One cached answer: reuse until, the caller, and its insertion order.
type Entry = (Instant, Caller, u64);
/// The answers by (token, agent), and the next insertion order.
type Entries = (HashMap<(String, String), Entry>, u64);

/// The cache: (token, agent) to (reuse until, caller), oldest first.
#[derive(Debug, Default)]
pub(crate) struct Authorizations {
    entries: Mutex<Entries>,
}

impl Authorizations {
    fn cached(&self, token: &str, agent: &str, now: Instant) -> Option<Caller> {
        let entries = self.entries.lock().ok()?;
        let (until, caller, _) = entries.0.get(&(token.to_owned(), agent.to_owned()))?;
        (now < *until).then(|| caller.clone())
    }

    fn remember(&self, token: &str, agent: &str, caller: &Caller, now: Instant) {
        let lifetime = AUTHORIZATION_SECS.min(token_expiry(token) - unix_now());
        if lifetime <= 0.0 {
            return;
        }
        let Ok(mut guard) = self.entries.lock() else {
            return;
        };
        let (entries, counter) = &mut *guard;
        let key = (token.to_owned(), agent.to_owned());
        entries.remove(&key);
        if entries.len() >= MAX_AUTHORIZATIONS {
            entries.retain(|_, (until, _, _)| *until > now);
        }
        while entries.len() >= MAX_AUTHORIZATIONS {
            let oldest = entries
                .iter()
                .min_by_key(|(_, (_, _, order))| *order)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => entries.remove(&k),
                None => break,
            };
        }
        *counter += 1;
        let until = now + Duration::from_secs_f64(lifetime);
        entries.insert(key, (until, caller.clone(), *counter));
    }
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

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The `exp` claim of a JWT, unverified (it only bounds the reuse of
/// discovery's answer for this very token), or 0 without a readable one.
fn token_expiry(token: &str) -> f64 {
    let Some(part) = token.split('.').nth(1) else {
        return 0.0;
    };
    let Some(bytes) = base64url(part) else {
        return 0.0;
    };
    let Ok(claims) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return 0.0;
    };
    match claims.get("exp") {
        Some(serde_json::Value::Number(n)) => n.as_f64().filter(|f| f.is_finite()).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// Unpadded (or padded) URL-safe base64.
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
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

    #[test]
    fn a_token_bounds_its_cached_answer() {
        let token = abi_auth::issue_module_token(
            "caller",
            &abi_auth::module_key("secret-secret-secret-secret-secret!", "caller").unwrap(),
            Duration::from_secs(300),
            SystemTime::now(),
            Some("inst"),
        )
        .unwrap();
        let exp = token_expiry(&token);
        assert!((exp - unix_now() - 300.0).abs() < 5.0, "{exp}");
        assert_eq!(token_expiry("not-a-jwt"), 0.0);

        let cache = Authorizations::default();
        let now = Instant::now();
        let caller = Caller {
            identity: "caller".into(),
            admin: false,
        };
        cache.remember(&token, "echo", &caller, now);
        assert_eq!(cache.cached(&token, "echo", now), Some(caller.clone()));
        assert_eq!(cache.cached(&token, "other", now), None);
        assert_eq!(
            cache.cached(&token, "echo", now + Duration::from_secs(6)),
            None
        );
        // An unreadable token is never cached.
        cache.remember("x.y.z", "echo", &caller, now);
        assert_eq!(cache.cached("x.y.z", "echo", now), None);
    }
}
