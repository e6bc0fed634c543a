//! Where the `Nats-Auth-Token` of every call comes from.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::error::{CallError, CallErrorKind};

/// A token source: a key that signs fresh tokens (a module key, or the
/// project secret), or an issued token.
///
/// A module key wins when both are configured (see [`crate::Config::from_env`]):
/// it signs tokens that never expire under a long-running module, while an
/// issued token is used as is until it expires.
pub struct TokenSource {
    inner: Inner,
}

enum Inner {
    Signing {
        identity: String,
        key: SigningKey,
        ttl: Duration,
        /// The last token signed and when; reused until half its lifetime.
        cached: Mutex<Option<(SystemTime, String)>>,
        /// Tokens bound to one instance, by audience, and when each was signed.
        bound: Mutex<HashMap<String, (SystemTime, String)>>,
    },
    Issued(String),
}

/// What a signing source signs with.
enum SigningKey {
    /// A module's key: tokens for that module only.
    Module(String),
    /// The project secret: service tokens for any identity (an operator's
    /// long-running tool, such as abictl's app gateway or console).
    Project(String),
}

impl SigningKey {
    fn sign(
        &self,
        identity: &str,
        ttl: Duration,
        now: SystemTime,
        audience: Option<&str>,
    ) -> Result<String, CallError> {
        let signed = match self {
            Self::Module(key) => abi_auth::issue_module_token(identity, key, ttl, now, audience),
            Self::Project(secret) => {
                abi_auth::issue_service_token(identity, secret, ttl, now, audience)
            }
        };
        signed
            .map_err(|e| CallError::new(CallErrorKind::Token, "cannot sign a token").with_source(e))
    }
}

impl TokenSource {
    /// Signs tokens for `identity` (the module id) with its module key, each
    /// valid for [`abi_auth::DEFAULT_TTL`] and replaced at half that.
    pub fn module_key(identity: impl Into<String>, key: impl Into<String>) -> Self {
        Self::signing(identity.into(), SigningKey::Module(key.into()))
    }

    /// Signs service tokens for `identity` with the project `secret`, each
    /// valid for [`abi_auth::DEFAULT_TTL`] and replaced at half that, so a
    /// process that runs for days never sends an expired one. For
    /// operators' tools that hold the secret anyway; a module signs with
    /// its own key ([`TokenSource::module_key`]).
    pub fn project_secret(identity: impl Into<String>, secret: impl Into<String>) -> Self {
        Self::signing(identity.into(), SigningKey::Project(secret.into()))
    }

    fn signing(identity: String, key: SigningKey) -> Self {
        Self {
            inner: Inner::Signing {
                identity,
                key,
                ttl: abi_auth::DEFAULT_TTL,
                cached: Mutex::new(None),
                bound: Mutex::new(HashMap::new()),
            },
        }
    }

    /// Sends `token`, an issued service token, as is.
    pub fn issued(token: impl Into<String>) -> Self {
        Self {
            inner: Inner::Issued(token.into()),
        }
    }

    /// The token to send now.
    ///
    /// # Errors
    ///
    /// [`CallErrorKind::Token`] when the key cannot sign for the identity, or
    /// the token is empty or holds a line break (it travels in a header).
    pub fn token(&self) -> Result<String, CallError> {
        self.token_at(SystemTime::now())
    }

    pub(crate) fn token_at(&self, now: SystemTime) -> Result<String, CallError> {
        let token = match &self.inner {
            Inner::Issued(token) => token.clone(),
            Inner::Signing {
                identity,
                key,
                ttl,
                cached,
                ..
            } => {
                // A poisoned lock only means another thread panicked while
                // holding the cache; the cached value is still usable.
                let mut cached = cached.lock().unwrap_or_else(|e| e.into_inner());
                let fresh = cached.as_ref().and_then(|(issued_at, token)| {
                    let age = now.duration_since(*issued_at).ok()?;
                    (age < *ttl / 2).then(|| token.clone())
                });
                match fresh {
                    Some(token) => token,
                    None => {
                        let token = key.sign(identity, *ttl, now, None)?;
                        *cached = Some((now, token.clone()));
                        token
                    }
                }
            }
        };
        if token.is_empty() || token.contains(['\r', '\n']) {
            return Err(CallError::new(
                CallErrorKind::Token,
                "a nonempty service token without line breaks is required",
            ));
        }
        Ok(token)
    }
}

/// A bound token is handed out again only while this young, so it always
/// arrives with most of its lifetime left (the reference's 30 s).
const BOUND_REUSE: Duration = Duration::from_secs(30);
/// Audiences remembered before the cache starts over.
const MAX_AUDIENCES: usize = 1024;

impl TokenSource {
    /// A token bound to the module instance `audience` (a call to another
    /// module), valid for [`abi_auth::BOUND_TTL`] and reused for 30 s at most.
    ///
    /// # Errors
    ///
    /// [`CallErrorKind::Token`] for an issued token (only a module key can
    /// bind one) or an empty audience.
    pub fn for_audience(&self, audience: &str) -> Result<String, CallError> {
        self.for_audience_at(audience, SystemTime::now())
    }

    pub(crate) fn for_audience_at(
        &self,
        audience: &str,
        now: SystemTime,
    ) -> Result<String, CallError> {
        let Inner::Signing {
            identity,
            key,
            ttl,
            bound,
            ..
        } = &self.inner
        else {
            return Err(CallError::new(
                CallErrorKind::Token,
                "an issued token cannot be bound to an instance: configure a module key",
            ));
        };
        if audience.is_empty() {
            return Err(CallError::new(
                CallErrorKind::Token,
                "audience must not be empty",
            ));
        }
        let ttl = (*ttl).min(abi_auth::BOUND_TTL);
        let reuse = BOUND_REUSE.min(ttl / 2);
        // See `token_at` on why a poisoned lock is still usable.
        let mut bound = bound.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((issued_at, token)) = bound.get(audience)
            && now.duration_since(*issued_at).is_ok_and(|age| age < reuse)
        {
            return Ok(token.clone());
        }
        if bound.len() >= MAX_AUDIENCES {
            bound.clear();
        }
        let token = key.sign(identity, ttl, now, Some(audience))?;
        bound.insert(audience.to_owned(), (now, token.clone()));
        Ok(token)
    }
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print a key or a token.
        match &self.inner {
            Inner::Signing {
                identity,
                key: SigningKey::Module(_),
                ..
            } => f
                .debug_struct("TokenSource::ModuleKey")
                .field("identity", identity)
                .finish_non_exhaustive(),
            Inner::Signing {
                identity,
                key: SigningKey::Project(_),
                ..
            } => f
                .debug_struct("TokenSource::ProjectSecret")
                .field("identity", identity)
                .finish_non_exhaustive(),
            Inner::Issued(_) => f.write_str("TokenSource::Issued(..)"),
        }
    }
}

/// Signs a token bound to one instance (its audience): what callers of
/// instance-addressed services (agents, chat models) attach.
pub type BoundSigner = std::sync::Arc<dyn Fn(&str) -> Result<String, CallError> + Send + Sync>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const SECRET: &str = "test-secret";

    #[test]
    fn module_key_tokens_verify_for_the_module_and_are_reused_until_half_life() {
        let key = abi_auth::module_key(SECRET, "provider").unwrap();
        let source = TokenSource::module_key("provider", key);
        let t0 = SystemTime::now();
        let first = source.token_at(t0).unwrap();
        assert_eq!(abi_auth::verify(&first, SECRET, None).unwrap(), "provider");
        let half = abi_auth::DEFAULT_TTL / 2;
        assert_eq!(
            source.token_at(t0 + half - Duration::from_secs(1)).unwrap(),
            first
        );
        let renewed = source.token_at(t0 + half).unwrap();
        assert_ne!(renewed, first);
    }

    #[test]
    fn bound_tokens_name_their_audience_and_are_reused_for_thirty_seconds() {
        let key = abi_auth::module_key(SECRET, "caller").unwrap();
        let source = TokenSource::module_key("caller", key);
        let t0 = SystemTime::now();
        let bound = source.for_audience_at("inst-1", t0).unwrap();
        assert_eq!(
            abi_auth::verify(&bound, SECRET, Some("inst-1")).unwrap(),
            "caller"
        );
        // Not usable unbound, nor for another instance.
        assert!(abi_auth::verify(&bound, SECRET, None).is_err());
        assert!(abi_auth::verify(&bound, SECRET, Some("inst-2")).is_err());
        assert_eq!(
            source
                .for_audience_at("inst-1", t0 + Duration::from_secs(29))
                .unwrap(),
            bound
        );
        assert_ne!(
            source
                .for_audience_at("inst-1", t0 + Duration::from_secs(30))
                .unwrap(),
            bound
        );
        let issued = TokenSource::issued("x.y.z");
        assert_eq!(
            issued.for_audience("inst-1").unwrap_err().kind(),
            CallErrorKind::Token
        );
    }

    #[test]
    fn project_secret_tokens_are_service_tokens_signed_afresh_and_bindable() {
        let source = TokenSource::project_secret("api", SECRET);
        assert!(!format!("{source:?}").contains(SECRET));
        let t0 = SystemTime::now();
        let first = source.token_at(t0).unwrap();
        assert_eq!(abi_auth::verify(&first, SECRET, None).unwrap(), "api");
        // A long-running tool gets a fresh token once the first is half spent,
        // one that is still valid when it is sent.
        let later = t0 + abi_auth::DEFAULT_TTL * 3;
        let renewed = source.token_at(later).unwrap();
        assert_ne!(renewed, first);
        let claims = abi_auth::verify_at(&renewed, SECRET, None, later);
        assert_eq!(claims.unwrap(), "api");
        let bound = source.for_audience_at("inst-1", later).unwrap();
        assert!(abi_auth::verify_at(&bound, SECRET, Some("inst-1"), later).is_ok());
    }

    #[test]
    fn issued_tokens_are_sent_as_is_and_never_printed() {
        let source = TokenSource::issued("abc.def.ghi");
        assert_eq!(source.token().unwrap(), "abc.def.ghi");
        assert!(!format!("{source:?}").contains("abc"));
        let bad = TokenSource::issued("a\nb");
        assert_eq!(bad.token().unwrap_err().kind(), CallErrorKind::Token);
    }
}
