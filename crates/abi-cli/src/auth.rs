//! Credentials: where the token of each call comes from, and the project
//! secret for `key` and `token`. Secrets come from the environment or a file,
//! never from a flag's value, and are never printed.

use std::path::Path;

use abi_sdk::TokenSource;

use crate::cli::{DEFAULT_IDENTITY, Global};
use crate::error::Failure;

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
/// for `--as`, default `api`). A signing source signs a fresh token when
/// the last one is half spent, and binds tokens to the instance an agent,
/// model or app call goes to, so the long-running commands (`serve-apps`,
/// `console`, `ls --watch`) never send an expired token.
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
        let source = TokenSource::project_secret(identity, secret);
        // Sign once now, so a secret that cannot sign fails here, as a usage error.
        source
            .token()
            .map_err(|e| Failure::usage(format!("cannot sign a token for {identity:?}: {e}")))?;
        return Ok(source);
    }
    Err(Failure::usage("no credentials").hint(
        "set ABI_JWT_SECRET_FILE (or ABI_JWT_SECRET), ABI_SERVICE_TOKEN, or ABI_MODULE_KEY with --as",
    ))
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
        // It signs afresh as tokens age (a gateway or console runs for days)
        // rather than handing out one token signed at start.
        let source = token_source(&global(&[]), &env).unwrap();
        assert!(
            format!("{source:?}").contains("ProjectSecret"),
            "{source:?}"
        );
        assert!(source.for_audience("inst-1").is_ok());
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
