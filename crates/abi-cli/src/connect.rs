//! The NATS connection and the SDK's discovery client.

use std::time::Duration;

use abi_sdk::{DiscoveryClient, TokenSource};

use crate::auth::{self, Env};
use crate::cli::Global;
use crate::error::Failure;

/// Connects to NATS within the call deadline.
///
/// # Errors
///
/// [`Failure`] with exit code 3 when the server cannot be reached.
pub async fn nats(global: &Global) -> Result<async_nats::Client, Failure> {
    let timeout = Duration::from_secs(global.timeout_secs.max(1));
    let options = async_nats::ConnectOptions::new()
        .name("abictl")
        .connection_timeout(timeout)
        .request_timeout(Some(timeout));
    let unreachable = |why: String| {
        Failure::unreachable(
            format!("cannot reach NATS at {}: {why}", global.nats_url),
            "start nats-server or set NATS_URL",
        )
    };
    match tokio::time::timeout(timeout, options.connect(global.nats_url.urls())).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(err)) => Err(unreachable(err.to_string())),
        Err(_) => Err(unreachable("timed out".into())),
    }
}

/// A discovery client with the configured credentials.
///
/// # Errors
///
/// Missing credentials (exit 2) or NATS unreachable (exit 3).
pub async fn client(global: &Global, env: Env<'_>) -> Result<DiscoveryClient, Failure> {
    let token = auth::token_source(global, env)?;
    let nats = nats(global).await?;
    Ok(DiscoveryClient::new(nats, global.project.clone(), token)
        .request_timeout(Duration::from_secs(global.timeout_secs.max(1))))
}

/// A discovery client for reading the KV key only (`watch`): no call is
/// sent, so no credentials are needed.
///
/// # Errors
///
/// NATS unreachable (exit 3).
pub async fn reader(global: &Global) -> Result<DiscoveryClient, Failure> {
    let nats = nats(global).await?;
    // The watch reads the KV key directly and never sends this token.
    let unused = TokenSource::issued("unused");
    Ok(DiscoveryClient::new(nats, global.project.clone(), unused))
}
