//! `abictl console [--listen 127.0.0.1:8080] [--allow-actions]`: the live
//! web console of the project (`abi-console`), with abictl's connection
//! settings and credentials, until Ctrl-C or SIGTERM.
//!
//! It lives in abictl rather than in a binary of its own: operators already
//! have abictl, configured for their project (NATS settings, `ABI_PROJECT`,
//! the secret file), and one binary to install is one thing less to keep in
//! step. The console itself is a library crate, so its pages and tests stay
//! apart from the command line's.

use std::net::SocketAddr;

use abi_console::{Console, ConsoleOptions};
use tokio_util::sync::CancellationToken;

use super::Ctx;
use crate::cli::DEFAULT_IDENTITY;
use crate::connect;
use crate::error::Failure;
use crate::signals;

/// Serves the console on `listen` until interrupted.
///
/// # Errors
///
/// The address cannot be bound (exit 2), NATS unreachable (exit 3).
///
/// # Cancel safety
///
/// Cancel safe: dropping it stops serving and the console's tasks.
pub async fn run(cx: Ctx<'_>, listen: SocketAddr, allow_actions: bool) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| Failure::usage(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener.local_addr()?;
    let stop = CancellationToken::new();
    let _stop_on_drop = stop.clone().drop_guard();
    let identity = cx
        .global
        .identity
        .clone()
        .unwrap_or_else(|| DEFAULT_IDENTITY.to_owned());
    let options = ConsoleOptions {
        allow_actions,
        identity,
    };
    let console = Console::start(client, options, stop.clone()).await?;
    println!("console on http://{bound}/");
    tracing::info!(%bound, allow_actions, "console serving");
    let stopping = stop.clone();
    tokio::spawn(async move {
        signals::interrupted().await;
        stopping.cancel();
    });
    console.serve(listener).await?;
    Ok(())
}
