//! `abictl key` and `abictl token`: credentials derived from the project secret.

use std::time::{Duration, SystemTime};

use super::Ctx;
use crate::auth;
use crate::error::Failure;

/// Prints the module key of `module` (what its process gets as `ABI_MODULE_KEY`).
///
/// # Errors
///
/// No secret, or `module` is a first-party identity (no key exists for it).
pub fn key(cx: Ctx<'_>, module: &str) -> anyhow::Result<()> {
    let secret = auth::require_secret(cx.global, cx.env)?;
    let key = abi_auth::module_key(&secret, module).map_err(|e| {
        Failure::usage(format!("no module key for {module:?}: {e}"))
            .hint("first-party identities (api, engine, dagster) use `abictl token`")
    })?;
    // Printing the key is this command's job.
    println!("{key}");
    Ok(())
}

/// Prints a service token for `identity`, signed with the project secret.
///
/// # Errors
///
/// No secret, an empty identity or audience, or a zero lifetime.
pub fn token(cx: Ctx<'_>, identity: &str, aud: Option<&str>, ttl: u64) -> anyhow::Result<()> {
    if ttl == 0 {
        return Err(Failure::usage("--ttl must be at least 1 second").into());
    }
    let secret = auth::require_secret(cx.global, cx.env)?;
    let token = abi_auth::issue_service_token(
        identity,
        &secret,
        Duration::from_secs(ttl),
        SystemTime::now(),
        aud,
    )
    .map_err(|e| Failure::usage(format!("cannot issue a token for {identity:?}: {e}")))?;
    // Printing the token is this command's job.
    println!("{token}");
    Ok(())
}
