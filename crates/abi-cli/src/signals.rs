//! Ctrl-C and SIGTERM, and `--for`, for the commands that run until stopped.

use std::time::Duration;

/// Resolves after `for_secs` seconds (never when `None`).
///
/// # Cancel safety
///
/// Cancel safe: it only sleeps (or waits forever); dropping it just drops the timer.
pub async fn after(for_secs: Option<f64>) {
    match for_secs {
        Some(secs) => tokio::time::sleep(Duration::from_secs_f64(secs.max(0.0))).await,
        None => std::future::pending().await,
    }
}

/// Resolves on SIGINT or SIGTERM (or at once if they cannot be watched).
///
/// # Cancel safety
///
/// Cancel safe: dropping it drops the listeners, but tokio keeps its handlers installed, so a
/// later SIGINT or SIGTERM no longer ends the process by itself.
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
