//! Wiring for the binary: open the storage, connect, serve until the root
//! token is cancelled, drain, and stop.
//!
//! Order: the store opens first (a bad database URL or an unwritable data
//! directory fails before anything is announced on NATS), then the endpoints
//! subscribe; on shutdown they drain, the received requests are answered, and
//! the store closes with everything it acknowledged on disk.

use abi_overflow::OverflowHost;
use std::net::SocketAddr;
use std::sync::Arc;

use abi_document_model::{DocumentError, DocumentStore};
use tokio_util::sync::CancellationToken;

use crate::config::{Storage, Valid};
use crate::service::{Handler, HandlerConfig, Metrics, ServeConfig, ServeError, serve};

/// Why the service could not start, or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Connecting to NATS failed.
    #[error(transparent)]
    Connect(#[from] abi_process::ConnectError),
    /// The storage could not be opened.
    #[error("could not open the document storage ({what})")]
    Storage {
        /// Which storage (a path, or "PostgreSQL": never the URL).
        what: String,
        /// What the adapter said.
        #[source]
        source: DocumentError,
    },
    /// The metrics address could not be bound.
    #[error("could not serve metrics on {addr} (ABI_METRICS_ADDR)")]
    Metrics {
        /// The address asked for.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The overflow host (`abi.rpc.overflow.*`) could not subscribe.
    #[error("could not start the overflow host")]
    Overflow(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The endpoints failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Runs the service until `root` is cancelled.
///
/// # Errors
///
/// See [`RunError`].
///
/// # Cancel safety
///
/// Not cancel safe: dropping it skips the drain (requests in flight go unanswered); cancel `root` instead.
pub async fn run(config: Valid, root: CancellationToken) -> Result<(), RunError> {
    match &config.storage {
        Storage::Sqlite(path) => {
            let store = crate::store::SqliteStore::open(crate::store::SqliteConfig::new(path))
                .await
                .map_err(|source| RunError::Storage {
                    what: path.display().to_string(),
                    source,
                })?;
            tracing::info!(path = %path.display(), "documents stored in SQLite");
            run_with(config, store, root).await
        }
        Storage::Postgres { url, schema } => {
            let mut settings = crate::store::postgres::PostgresConfig::new(url.expose());
            settings.schema = schema.clone();
            let store = crate::store::postgres::PostgresStore::open(settings)
                .await
                .map_err(|source| RunError::Storage {
                    what: "PostgreSQL".to_owned(),
                    source,
                })?;
            tracing::info!(schema = %schema, "documents stored in PostgreSQL");
            run_with(config, store, root).await
        }
    }
}

/// Serves `store` until `root` is cancelled (the embedders' entry point: a
/// test or another binary can bring its own store).
///
/// # Errors
///
/// See [`RunError`].
///
/// # Cancel safety
///
/// Not cancel safe: as [`run`].
pub async fn run_with<S: DocumentStore>(
    config: Valid,
    store: S,
    root: CancellationToken,
) -> Result<(), RunError> {
    let client = config.nats.connect("abi-documents").await?;
    let metrics = Arc::new(Metrics::default());
    if let Some(addr) = config.metrics_addr {
        serve_metrics(addr, metrics.clone(), root.clone()).await?;
    }
    // Requests and replies above the broker's max payload (RPC overflow).
    let overflow = OverflowHost::start(client.clone(), config.secret.expose())
        .await
        .map(Arc::new)
        .map_err(RunError::Overflow)?;
    let handler = Arc::new(
        Handler::new(
            Arc::new(store),
            HandlerConfig {
                secret: config.secret.clone(),
                admin_identities: config.admin_identities.clone(),
                strict_namespaces: config.strict_namespaces,
            },
        )
        .with_overflow(overflow.clone()),
    );
    let serve_config = ServeConfig {
        max_concurrent_requests: config.max_concurrent_requests.get(),
        shutdown_grace: config.shutdown_grace,
    };
    let served = serve(client, handler, metrics, serve_config, root).await;
    // Every request is answered: the parked replies go with the host.
    if let Some(host) = Arc::into_inner(overflow) {
        host.stop().await;
    }
    tracing::info!("document service stopped");
    Ok(served?)
}

async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    root: CancellationToken,
) -> Result<(), RunError> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| RunError::Metrics { addr, source })?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move { metrics.render() }
        }),
    );
    tokio::spawn(async move {
        let stopped = root.cancelled_owned();
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::warn!(%error, "the metrics server stopped");
        }
    });
    tracing::info!(%addr, "metrics at /metrics");
    Ok(())
}
