//! A verifier for a service that checks the same few tokens on every call:
//! a token whose signature checked once is remembered, so the next call
//! with the same bytes only checks its claims against the clock (expiry,
//! not-before, issued-at, audience), as [`crate::verify`] would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::AuthError;
use crate::claims::{TimedClaims, verify_signature};

/// How many tokens a [`Verifier`] remembers before it forgets them all (a
/// module holds one token at a time; a service sees one per caller).
pub const REMEMBERED_TOKENS: usize = 4096;

/// Verifies tokens against one secret, remembering those whose signature
/// checked. Answers exactly as [`crate::verify_at`]: only the signature
/// check (and, for module tokens, the key derivation) is skipped on a hit,
/// and only for the very same token text. Shared by reference between tasks.
pub struct Verifier {
    secret: String,
    verified: Mutex<HashMap<String, Arc<TimedClaims>>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Verifier").finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier of tokens signed with `secret` (or a module key derived
    /// from it).
    pub fn new(secret: impl Into<String>) -> Self {
        Self {
            secret: secret.into(),
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// [`crate::verify`] with this verifier's secret, now.
    ///
    /// # Errors
    ///
    /// As [`crate::verify`].
    pub fn verify(&self, token: &str, audience: Option<&str>) -> Result<String, AuthError> {
        self.verify_at(token, audience, SystemTime::now())
    }

    /// [`crate::verify_at`] with this verifier's secret.
    ///
    /// # Errors
    ///
    /// As [`crate::verify_at`].
    pub fn verify_at(
        &self,
        token: &str,
        audience: Option<&str>,
        now: SystemTime,
    ) -> Result<String, AuthError> {
        let known = self
            .verified
            .lock()
            .ok()
            .and_then(|verified| verified.get(token).cloned());
        let claims = match known {
            Some(claims) => claims,
            None => {
                let claims = Arc::new(TimedClaims::of(&verify_signature(token, &self.secret)?));
                if let Ok(mut verified) = self.verified.lock() {
                    if verified.len() >= REMEMBERED_TOKENS {
                        verified.clear();
                    }
                    verified.insert(token.to_owned(), claims.clone());
                }
                claims
            }
        };
        claims.check(audience, now)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    const SECRET: &str = "project-secret";

    #[test]
    fn a_remembered_token_still_expires_and_a_changed_one_is_checked_again() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        let ttl = Duration::from_secs(60);
        let token =
            crate::issue_service_token("engine", SECRET, ttl, at(1_000), None).expect("signs");
        let key = crate::module_key(SECRET, "acme").expect("derives");
        let module = crate::issue_module_token("acme", &key, ttl, at(1_000), None).expect("signs");
        let verifier = Verifier::new(SECRET);
        for _ in 0..2 {
            assert_eq!(
                verifier.verify_at(&token, None, at(1_030)).expect("valid"),
                "engine"
            );
            assert_eq!(
                verifier.verify_at(&module, None, at(1_030)).expect("valid"),
                "acme"
            );
        }
        for (when, audience) in [(at(1_060), None), (at(999), None), (at(1_030), Some("x"))] {
            assert_eq!(
                verifier.verify_at(&token, audience, when).is_err(),
                crate::verify_at(&token, SECRET, audience, when).is_err(),
                "same answer as verify at {when:?} for {audience:?}"
            );
            assert!(verifier.verify_at(&token, audience, when).is_err());
        }
        let mut forged = token.clone();
        forged.pop();
        assert!(verifier.verify_at(&forged, None, at(1_030)).is_err());
        let other = Verifier::new("another-secret");
        assert!(
            other.verify_at(&token, None, at(1_030)).is_err(),
            "its own secret"
        );
    }
}
