//! The only place a service binary handles process signals: SIGTERM or SIGINT
//! cancels the root [`CancellationToken`]; everything else watches that token
//! (or a child of it). Used by `abi-discovery` and `abi-documents`.

use tokio_util::sync::CancellationToken;

/// Spawns the signal watcher and returns the root token it cancels on the first
/// SIGTERM or SIGINT. A second signal exits at once with status 130, for an operator
/// who does not want to wait for the grace period.
///
/// # Errors
///
/// The I/O error of installing a signal handler.
pub fn on_signals() -> std::io::Result<CancellationToken> {
    use tokio::signal::unix::{SignalKind, signal};

    let root = CancellationToken::new();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let token = root.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!(signal = "SIGTERM", "shutting down"),
            _ = int.recv() => tracing::info!(signal = "SIGINT", "shutting down"),
        }
        token.cancel();
        tokio::select! {
            _ = term.recv() => {},
            _ = int.recv() => {},
        }
        tracing::warn!("second signal: exiting without waiting");
        std::process::exit(130);
    });
    Ok(root)
}
