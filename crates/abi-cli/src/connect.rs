//! The NATS connection and the SDK's discovery client.

use std::time::Duration;

use abi_sdk::DiscoveryClient;

use crate::auth::{self, Env};
use crate::cli::Global;
use crate::error::Failure;

/// Connects to NATS within the call deadline, with the same settings every
/// abi process takes (`NATS_URL`, `NATS_CREDS`, ...).
///
/// # Errors
///
/// [`Failure`] with exit code 2 when a setting is malformed, 3 when the
/// server cannot be reached.
///
/// # Cancel safety
///
/// Cancel safe: it only reads the settings and connects; a connection not made yet is abandoned
/// and nothing is left open.
pub async fn nats(global: &Global) -> Result<async_nats::Client, Failure> {
    let timeout = Duration::from_secs(global.timeout_secs.max(1));
    let mut settings = global.nats.validate().map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        Failure::usage(lines.join("\n"))
    })?;
    // One deadline for the whole command: `--timeout-secs` bounds the
    // connection too.
    settings.connect_timeout = timeout;
    let unreachable = |why: String| {
        Failure::unreachable(
            format!("cannot reach NATS at {}: {why}", settings.servers),
            "start nats-server or set NATS_URL",
        )
    };
    let options = settings
        .options("abictl")
        .await
        .map_err(|e| Failure::usage(e.to_string()))?
        .request_timeout(Some(timeout));
    settings
        .connect_with(options)
        .await
        .map_err(|err| match err {
            abi_process::ConnectError::TimedOut { .. } => unreachable("timed out".into()),
            other => unreachable(abi_process::error_chain(&other)),
        })
}

/// A discovery client with the configured credentials.
///
/// # Errors
///
/// Missing credentials (exit 2) or NATS unreachable (exit 3).
///
/// # Cancel safety
///
/// Cancel safe: as [`nats`]; it only reads the credentials and connects.
pub async fn client(global: &Global, env: Env<'_>) -> Result<DiscoveryClient, Failure> {
    let token = auth::token_source(global, env)?;
    let nats = nats(global).await?;
    Ok(DiscoveryClient::new(nats, global.project.clone(), token)
        .request_timeout(Duration::from_secs(global.timeout_secs.max(1))))
}
