//! The HTTP probes: `GET /health` (liveness, 200 while the process runs) and
//! `GET /ready` (200 when the instance is READY or runs without discovery,
//! 503 otherwise, the status as body).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::status::Status;

/// What `/ready` reports.
pub(crate) type StatusFn = Arc<dyn Fn() -> Status + Send + Sync>;

/// A running probe server.
#[derive(Debug)]
pub(crate) struct HealthServer {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl HealthServer {
    /// Binds `addr` and serves until [`HealthServer::close`].
    pub(crate) async fn start(addr: SocketAddr, status: StatusFn) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let app = router(status);
        let shutdown = stop.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                warn!(error = %err, "health probe server failed");
            }
        });
        info!(addr = %addr, "health probe listening");
        Ok(Self { addr, stop, task })
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) async fn close(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

fn router(status: StatusFn) -> Router {
    Router::new()
        .route("/health", get(|| async { (StatusCode::OK, "ok\n") }))
        .route("/ready", get(ready))
        .with_state(status)
}

async fn ready(State(status): State<StatusFn>) -> (StatusCode, String) {
    let current = status();
    let code = match current {
        Status::Ready | Status::Disabled => StatusCode::OK,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    (code, format!("{current}\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Mutex;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn get_status(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let code = response[9..12].parse().unwrap();
        let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        (code, body)
    }

    #[tokio::test]
    async fn ready_follows_the_status_and_health_is_always_ok() {
        let current = Arc::new(Mutex::new(Status::Starting));
        let read = current.clone();
        let server = HealthServer::start(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(move || *read.lock().unwrap()),
        )
        .await
        .unwrap();
        let addr = server.addr();
        assert_eq!(get_status(addr, "/health").await.0, 200);
        assert_eq!(get_status(addr, "/ready").await, (503, "STARTING\n".into()));
        *current.lock().unwrap() = Status::Ready;
        assert_eq!(get_status(addr, "/ready").await, (200, "READY\n".into()));
        *current.lock().unwrap() = Status::Disabled;
        assert_eq!(get_status(addr, "/ready").await.0, 200);
        *current.lock().unwrap() = Status::Draining;
        assert_eq!(get_status(addr, "/ready").await.0, 503);
        assert_eq!(get_status(addr, "/nope").await.0, 404);
        server.close().await;
    }
}
