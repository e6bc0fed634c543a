//! Credentials: where the token of each call comes from, and the project
//! secret for `key` and `token`. Secrets come from the environment or a file,
//! never from a flag's value, and are never printed.

use std::path::Path;
use std::time::{Duration, SystemTime};

use abi_sdk::TokenSource;

use crate::cli::{DEFAULT_IDENTITY, Global};
use crate::error::Failure;

/// Lifetime of the tokens abictl signs for its own calls: one command is short.
const CALL_TOKEN_TTL: Duration = Duration::from_secs(5 * 60);

/// Reads an environment variable; tests and `main` pass `std::env::var`.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The project secret, from `--jwt-secret-file`/`ABI_JWT_SECRET_FILE`, else
/// `ABI_JWT_SECRET`; `None` when neither is set.
///
/// # Errors
///
/// The file cannot be read or is empty.
pub fn secret(global: &Global, env: Env<'_>) -> Result<Option<String>, Failure> {
    if let Some(path) = &global.jwt_secret_file {
        return read_secret(path).map(Some);
    }
    Ok(env("ABI_JWT_SECRET").filter(|s| !s.trim().is_empty()))
}

fn read_secret(path: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read the secret file {}: {e}",
            path.display()
        ))
    })?;
    let secret = text.trim_end_matches(['\n', '\r']).to_owned();
    if secret.is_empty() {
        return Err(Failure::usage(format!(
            "the secret file {} is empty",
            path.display()
        )));
    }
    Ok(secret)
}

/// The secret, or a usage failure saying how to provide it.
///
/// # Errors
///
/// No secret configured, or its file unreadable.
pub fn require_secret(global: &Global, env: Env<'_>) -> Result<String, Failure> {
    secret(global, env)?.ok_or_else(|| {
        Failure::usage("no project secret").hint("set ABI_JWT_SECRET_FILE (or ABI_JWT_SECRET)")
    })
}

/// The token source for service calls: `ABI_SERVICE_TOKEN`, else
/// `ABI_MODULE_KEY` (signing for `--as`), else the project secret (signing
/// for `--as`, default `api`).
///
/// # Errors
///
/// No credentials at all, or a module key without `--as`.
pub fn token_source(global: &Global, env: Env<'_>) -> Result<TokenSource, Failure> {
    let get = |key: &str| {
        env(key)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    if let Some(token) = get("ABI_SERVICE_TOKEN") {
        return Ok(TokenSource::issued(token));
    }
    if let Some(key) = get("ABI_MODULE_KEY") {
        let Some(identity) = &global.identity else {
            return Err(
                Failure::usage("ABI_MODULE_KEY signs only for its own module")
                    .hint("pass --as <module-id>"),
            );
        };
        return Ok(TokenSource::module_key(identity.clone(), key));
    }
    if let Some(secret) = secret(global, env)? {
        let identity = global.identity.as_deref().unwrap_or(DEFAULT_IDENTITY);
        let token = abi_auth::issue_service_token(
            identity,
            &secret,
            CALL_TOKEN_TTL,
            SystemTime::now(),
            None,
        )
        .map_err(|e| Failure::usage(format!("cannot sign a token for {identity:?}: {e}")))?;
        return Ok(TokenSource::issued(token));
    }
    Err(Failure::usage("no credentials").hint(
        "set ABI_JWT_SECRET_FILE (or ABI_JWT_SECRET), ABI_SERVICE_TOKEN, or ABI_MODULE_KEY with --as",
    ))
}

/// A signer of instance-bound tokens with the project secret, for calls to
/// agents and models, when abictl has neither an issued token nor a module
/// key (the SDK binds those itself); `None` otherwise or without a secret.
/// It signs a service token for `--as` (default `api`) bound to the
/// instance called.
///
/// # Errors
///
/// The secret file cannot be read.
pub fn bound_signer(
    global: &Global,
    env: Env<'_>,
) -> Result<Option<abi_sdk::models::BoundSigner>, Failure> {
    let key_or_token = ["ABI_SERVICE_TOKEN", "ABI_MODULE_KEY"]
        .iter()
        .any(|k| env(k).is_some_and(|v| !v.trim().is_empty()));
    let Some(secret) = secret(global, env)?.filter(|_| !key_or_token) else {
        return Ok(None);
    };
    let identity = global
        .identity
        .clone()
        .unwrap_or_else(|| DEFAULT_IDENTITY.to_owned());
    Ok(Some(std::sync::Arc::new(move |audience: &str| {
        abi_auth::issue_service_token(
            &identity,
            &secret,
            abi_auth::BOUND_TTL,
            SystemTime::now(),
            Some(audience),
        )
        .map_err(|e| {
            abi_sdk::CallError::new(abi_sdk::CallErrorKind::Token, "cannot sign a bound token")
                .with_source(e)
        })
    })))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    fn global(args: &[&str]) -> Global {
        let mut argv = vec!["abictl"];
        argv.extend_from_slice(args);
        argv.push("ls");
        Cli::try_parse_from(argv).unwrap().global
    }

    #[test]
    fn the_secret_signs_for_api_unless_told_otherwise() {
        let env = |k: &str| (k == "ABI_JWT_SECRET").then(|| "s3cret".to_owned());
        let token = token_source(&global(&[]), &env).unwrap().token().unwrap();
        assert_eq!(abi_auth::verify(&token, "s3cret", None).unwrap(), "api");
        let token = token_source(&global(&["--as", "engine"]), &env)
            .unwrap()
            .token()
            .unwrap();
        assert_eq!(abi_auth::verify(&token, "s3cret", None).unwrap(), "engine");
    }

    #[test]
    fn missing_credentials_and_a_key_without_identity_are_usage_errors() {
        let none = |_: &str| None;
        assert_eq!(token_source(&global(&[]), &none).unwrap_err().exit, 2);
        let key = |k: &str| (k == "ABI_MODULE_KEY").then(|| "k".to_owned());
        assert_eq!(token_source(&global(&[]), &key).unwrap_err().exit, 2);
        assert!(token_source(&global(&["--as", "m"]), &key).is_ok());
    }
}
