//! The process signals that ask a module to drain: SIGTERM and SIGINT.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Cancels `stop` on the first SIGTERM or SIGINT. The returned task is
/// aborted by the runner when it finishes.
pub(crate) fn on_signal(stop: CancellationToken) -> JoinHandle<()> {
    tokio::spawn(async move {
        wait_for_signal().await;
        info!("stop signal received; draining");
        stop.cancel();
    })
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (term, int) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    match (term, int) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        (Err(err), _) | (_, Err(err)) => {
            warn!(error = %err, "cannot listen for stop signals");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    if let Err(err) = tokio::signal::ctrl_c().await {
        warn!(error = %err, "cannot listen for ctrl-c");
        std::future::pending::<()>().await;
    }
}
