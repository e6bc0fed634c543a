//! Wiring for the binary: connect, open the bucket, start the service core and
//! the endpoints, serve until the root token is cancelled, then stop in order.
//!
//! Stop order: stop taking requests (the broker confirms the UNSUBs), answer the
//! requests already received, close the writer's input and let it commit its last
//! batch, flush NATS. All of it within the grace period.
//!
//! The registry writer is critical: if its task dies, every mutation would be
//! answered `UNAVAILABLE`, so `run` stops the same way and returns an error (the
//! binary exits non-zero and its supervisor restarts it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_nats::Client;
use tokio::task::JoinError;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::SystemClock;
use crate::config::Valid;
use crate::discovery::{DEFAULT_MAX_DELAY, DiscoveryConfig};
use crate::endpoints::serve::ServeError;
use crate::endpoints::{self, Stats};
use crate::metrics::{self, Metrics};
use crate::micro;
use crate::service::{HandlerConfig, ServiceCore};
use crate::store::StoreError;
use crate::store::jetstream::{JetStreamStore, JetStreamStoreConfig, bucket_name};

/// How long the service waits at start for a JetStream cluster that is still
/// forming (started beside it, a node not yet met) before it gives up.
pub const OPEN_PATIENCE: Duration = Duration::from_secs(60);

/// Why the service could not start, or did not stop cleanly. `Display` is one
/// line for an operator; the cause, when there is one, is the source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// Connecting to NATS failed (the message says where and why).
    #[error(transparent)]
    Connect(#[from] abi_process::ConnectError),
    /// The registry bucket could not be opened or created.
    #[error("could not open the registry bucket {bucket}")]
    OpenBucket {
        /// The bucket's name.
        bucket: String,
        /// What the store said.
        #[source]
        source: StoreError,
    },
    /// The lease or admin settings do not make valid rules.
    #[error("invalid registry rules")]
    Rules(#[source] abi_registry::RulesError),
    /// The metrics address could not be bound.
    #[error("could not serve metrics on {addr} (ABI_METRICS_ADDR)")]
    Metrics {
        /// The address asked for.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The discovery endpoints could not be subscribed.
    #[error("could not subscribe the discovery endpoints")]
    Subscribe(#[source] ServeError),
    /// The `$SRV` endpoints could not be subscribed.
    #[error("could not subscribe the micro-service endpoints")]
    SubscribeMicro(#[source] async_nats::SubscribeError),
    /// The endpoints did not stop within the grace period.
    #[error("stopping the endpoints took longer than the grace period")]
    StopOverran,
    /// The registry writer task died (its panic was logged).
    #[error("the registry writer task died")]
    WriterDied,
    /// The endpoints stopped with an error (say the connection closed).
    #[error("discovery endpoints failed")]
    Endpoints(#[source] ServeError),
    /// The endpoints' task panicked or was cancelled.
    #[error("discovery endpoints task failed")]
    EndpointsTask(#[source] JoinError),
    /// Requests were still being handled when the grace period ended.
    #[error("some requests were still running when the grace period ended")]
    RequestsOverran,
    /// The writer had not committed its last batch when the grace period ended.
    #[error("the registry writer did not finish within the grace period")]
    WriterOverran,
    /// The last replies could not be flushed to the broker.
    #[error("could not flush the last replies to NATS")]
    Flush,
}

/// Runs the service until `shutdown` is cancelled, then stops gracefully.
///
/// # Errors
///
/// Connecting, opening the bucket or subscribing failed (one line each, with its
/// cause), the connection was lost for good, the writer died, or stopping overran
/// the grace period: one [`RunError`] variant each.
///
/// # Cancel safety
///
/// Cancel `shutdown` instead of dropping this future: dropping it abandons the
/// requests in flight.
pub async fn run(cfg: Valid, shutdown: CancellationToken) -> Result<(), RunError> {
    let client = connect(&cfg).await?;
    let max_payload = client.max_payload();
    let jetstream = async_nats::jetstream::new(client.clone());
    let store_cfg = JetStreamStoreConfig {
        project: cfg.project.to_string(),
        replicas: cfg.kv_replicas.get(),
        timeout: cfg.store_timeout,
    };
    let opened = tokio::select! {
        opened = JetStreamStore::open_within(&jetstream, &store_cfg, OPEN_PATIENCE) => opened,
        () = shutdown.cancelled() => return Ok(()),
    };
    let store = opened.map_err(|source| RunError::OpenBucket {
        bucket: bucket_name(cfg.project.as_str()),
        source,
    })?;

    // Before discovery serves: a module registering at once finds the streams
    // it may not create. A failure is reported and discovery serves on.
    match crate::platform::prepare_module_streams(
        &jetstream,
        cfg.project.as_str(),
        cfg.kv_replicas.get(),
    )
    .await
    {
        Ok(()) => {}
        Err(error @ crate::platform::PrepareError::Unsupported { .. }) => {
            tracing::warn!(%error, "the jobs stream lacks what scheduled jobs need");
        }
        Err(error) => tracing::error!(%error, "modules' job hosts will not find their stream"),
    }

    let rules = abi_registry::Rules::new(cfg.lease_seconds, cfg.admin_identities.iter().cloned())
        .map_err(RunError::Rules)?;
    // The writer outlives the endpoints: it stops only once every request received
    // has been answered, so it gets its own token.
    let writer_stop = CancellationToken::new();
    let core = ServiceCore::start(
        Arc::new(store),
        rules,
        Arc::new(SystemClock),
        DiscoveryConfig {
            queue_capacity: cfg.queue_capacity,
            max_batch: cfg.max_batch,
            max_delay: DEFAULT_MAX_DELAY,
            store_timeout: cfg.store_timeout,
        },
        HandlerConfig {
            secret: cfg.secret.clone(),
            broker_max_payload: max_payload,
        },
        writer_stop.clone(),
    );
    let discovery = core.discovery().clone();

    let stats = Arc::new(Stats::default());
    let writer_failed = discovery.writer_failed();
    let metrics_stop = CancellationToken::new();
    // Also stops the metrics when a later start step fails and we return early.
    let _stop_metrics_on_return = metrics_stop.clone().drop_guard();
    let metrics_task = match cfg.metrics_addr {
        Some(addr) => Some(
            metrics::serve(
                addr,
                Metrics::new(Arc::clone(&stats), discovery.clone()),
                metrics_stop.clone(),
            )
            .await
            .map_err(|source| RunError::Metrics { addr, source })?,
        ),
        None => None,
    };
    let requests = TaskTracker::new();
    let stop_serving = shutdown.child_token();
    let mut serving = endpoints::serve(
        client.clone(),
        &cfg.project,
        Arc::clone(core.handler()),
        Arc::clone(&stats),
        endpoints::Limits {
            max_concurrent: cfg.max_concurrent_requests,
            timeout: cfg.store_timeout,
        },
        requests.clone(),
        stop_serving.clone(),
    )
    .await
    .map_err(RunError::Subscribe)?;
    // Announced only once the endpoints serve (the broker confirmed them), so a tool
    // that sees this process in `$SRV.PING` can reach it through the queue group.
    let micro_task = micro::serve(
        client.clone(),
        micro::Identity::new(cfg.project.clone()),
        Arc::clone(&stats),
        stop_serving.clone(),
    )
    .await
    .map_err(RunError::SubscribeMicro)?;
    tracing::info!(
        project = %cfg.project,
        lease_seconds = cfg.lease_seconds,
        max_payload = max_payload.min(endpoints::MAX_PAYLOAD_CAP),
        "abi-discovery ready"
    );

    // The writer's death is logged where it is caught; here it only stops us.
    let ended_early = tokio::select! {
        () = shutdown.cancelled() => None,
        ended = &mut serving.task => Some(ended),
        () = writer_failed => None,
    };
    let deadline = Instant::now() + cfg.shutdown_grace;
    stop_serving.cancel();
    let serve_result = match ended_early {
        Some(ended) => ended,
        None => match tokio::time::timeout_at(deadline, &mut serving.task).await {
            Ok(ended) => ended,
            Err(_) => return Err(RunError::StopOverran),
        },
    };
    // Requests received are answered before the writer stops.
    requests.close();
    let answered = tokio::time::timeout_at(deadline, requests.wait())
        .await
        .is_ok();
    writer_stop.cancel();
    let committed = tokio::time::timeout_at(deadline, core.stopped())
        .await
        .is_ok();
    let _ = tokio::time::timeout_at(deadline, micro_task).await;
    let flushed = matches!(
        tokio::time::timeout_at(deadline + Duration::from_secs(1), client.flush()).await,
        Ok(Ok(()))
    );
    metrics_stop.cancel();
    if let Some(mut task) = metrics_task {
        // A scrape still running when the deadline passes is abandoned.
        if tokio::time::timeout_at(deadline + Duration::from_secs(1), &mut task)
            .await
            .is_err()
        {
            task.abort();
        }
    }

    if discovery.writer_has_failed() {
        return Err(RunError::WriterDied);
    }

    match serve_result {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(RunError::Endpoints(error)),
        Err(join) => return Err(RunError::EndpointsTask(join)),
    }
    if !answered {
        return Err(RunError::RequestsOverran);
    }
    if !committed {
        return Err(RunError::WriterOverran);
    }
    if !flushed {
        return Err(RunError::Flush);
    }
    tracing::info!("abi-discovery stopped");
    Ok(())
}

/// Connects with the configured servers, authentication and TLS, within
/// the connect deadline.
async fn connect(cfg: &Valid) -> Result<Client, abi_process::ConnectError> {
    cfg.nats.connect(micro::SERVICE_NAME).await
}
