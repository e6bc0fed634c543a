//! Service-identity tokens for `abi.discovery.v1`: HS256 JWTs naming the process
//! that holds them, wire-compatible with the reference's `nats_auth` module.
//!
//! Two kinds of key sign a token:
//!
//! - the **project secret**, held by first-party processes: its tokens may assert any
//!   identity;
//! - a **module key** ([`module_key`]), derived from the secret for one identity: its
//!   tokens carry the header `kid: "module"`, may assert only that identity, and never a
//!   first-party one ([`FIRST_PARTY_IDENTITIES`]).
//!
//! A token sent to a module instance is bound to it with an audience (`aud`, usually
//! with [`BOUND_TTL`]); [`verify`] without an audience refuses such a token, so a module
//! cannot replay what it was sent.
//!
//! Claim checks follow PyJWT's defaults exactly (no leeway, `exp`/`iat`/`nbf` checked
//! only when present), because the reference verifies with PyJWT and both sides must
//! accept and refuse the same tokens.

mod claims;
mod error;
mod keys;
mod verifier;

use std::time::{Duration, SystemTime};

pub use error::{AuthError, InvalidToken};
pub use keys::{is_first_party, module_key};
pub use verifier::{REMEMBERED_TOKENS, Verifier};

/// The NATS header carrying the caller's token.
pub use abi_wire::AUTH_HEADER;

/// The `kid` header value of a token signed with a module key.
pub const MODULE_KEY_ID: &str = "module";

/// The engine's own processes: no module key exists for them, and no module token may
/// assert them.
pub const FIRST_PARTY_IDENTITIES: [&str; 3] = ["api", "engine", "dagster"];

/// Lifetime of a token for the engine's services (the reference's default).
pub const DEFAULT_TTL: Duration = Duration::from_secs(60 * 60);

/// Lifetime of a token bound to one module instance: short, so a token a module kept is
/// soon useless.
pub const BOUND_TTL: Duration = Duration::from_secs(5 * 60);

/// Issues a token asserting `identity`, signed with the project `secret`.
///
/// `audience` binds the token to one module instance; `now` is the issue time (`iat`).
///
/// # Errors
///
/// [`AuthError::EmptyIdentity`], [`AuthError::EmptyAudience`], [`AuthError::EmptyKey`]
/// or [`AuthError::Signing`].
pub fn issue_service_token(
    identity: &str,
    secret: &str,
    ttl: Duration,
    now: SystemTime,
    audience: Option<&str>,
) -> Result<String, AuthError> {
    claims::sign(identity, secret, None, ttl, now, audience)
}

/// Issues a token asserting `identity`, signed with its module `key` (see [`module_key`]).
///
/// # Errors
///
/// As [`issue_service_token`].
pub fn issue_module_token(
    identity: &str,
    key: &str,
    ttl: Duration,
    now: SystemTime,
    audience: Option<&str>,
) -> Result<String, AuthError> {
    claims::sign(identity, key, Some(MODULE_KEY_ID), ttl, now, audience)
}

/// Verifies `token` against the project `secret` at the current time and returns the
/// identity it asserts (its `sub`).
///
/// Without `audience`, a token carrying one is refused; with one, the token must carry
/// it.
///
/// # Errors
///
/// [`AuthError::Invalid`] for a bad signature, a malformed or expired token, or a wrong
/// audience: callers treat them all alike (refuse the call).
pub fn verify(token: &str, secret: &str, audience: Option<&str>) -> Result<String, AuthError> {
    verify_at(token, secret, audience, SystemTime::now())
}

/// [`verify`] at a given time, for tests and callers with their own clock.
///
/// # Errors
///
/// As [`verify`].
pub fn verify_at(
    token: &str,
    secret: &str,
    audience: Option<&str>,
    now: SystemTime,
) -> Result<String, AuthError> {
    claims::verify(token, secret, audience, now)
}
