//! Ctrl-C and SIGTERM, and `--for`, for the commands that run until stopped.

use std::time::Duration;

/// Resolves after `for_secs` seconds (never when `None`).
pub async fn after(for_secs: Option<f64>) {
    match for_secs {
        Some(secs) => tokio::time::sleep(Duration::from_secs_f64(secs.max(0.0))).await,
        None => std::future::pending().await,
    }
}

/// Resolves on SIGINT or SIGTERM (or at once if they cannot be watched).
pub async fn interrupted() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
