//! Wiring for the binary: connect, open the bucket, start the writer and the
//! endpoints, serve until the root token is cancelled, then stop in order.
//!
//! Stop order: stop taking requests (the broker confirms the UNSUBs), answer the
//! requests already received, close the writer's input and let it commit its last
//! batch, flush NATS. All of it within the grace period.
//!
//! The registry writer is critical: if its task dies, every mutation would be
//! answered `UNAVAILABLE`, so `run` stops the same way and returns an error (the
//! binary exits non-zero and its supervisor restarts it).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use async_nats::{Client, ConnectOptions};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::clock::SystemClock;
use crate::config::{NatsAuth, Valid};
use crate::discovery::{DEFAULT_MAX_DELAY, Discovery, DiscoveryConfig};
use crate::endpoints::{self, Handler, Stats};
use crate::metrics::{self, Metrics};
use crate::micro;
use crate::store::jetstream::{JetStreamStore, JetStreamStoreConfig, bucket_name};

/// Runs the service until `shutdown` is cancelled, then stops gracefully.
///
/// # Errors
///
/// Connecting, opening the bucket or subscribing failed (one line each, with its
/// cause), the connection was lost for good, or stopping overran the grace period.
///
/// # Cancel safety
///
/// Cancel `shutdown` instead of dropping this future: dropping it abandons the
/// requests in flight.
pub async fn run(cfg: Valid, shutdown: CancellationToken) -> anyhow::Result<()> {
    let client = connect(&cfg).await?;
    let max_payload = client.server_info().max_payload;
    let jetstream = async_nats::jetstream::new(client.clone());
    let store = JetStreamStore::open(
        &jetstream,
        &JetStreamStoreConfig {
            project: cfg.project.to_string(),
            replicas: cfg.kv_replicas.get(),
            timeout: cfg.store_timeout,
        },
    )
    .await
    .with_context(|| {
        format!(
            "could not open the registry bucket {}",
            bucket_name(cfg.project.as_str())
        )
    })?;

    let rules = abi_registry::Rules::new(cfg.lease_seconds, cfg.admin_identities.iter().cloned())
        .context("invalid registry rules")?;
    // The writer outlives the endpoints: it stops only once every request received
    // has been answered, so it gets its own token and tracker.
    let writer_tracker = TaskTracker::new();
    let writer_stop = CancellationToken::new();
    let discovery = Discovery::start(
        Arc::new(store),
        rules,
        Arc::new(SystemClock),
        DiscoveryConfig {
            queue_capacity: cfg.queue_capacity,
            max_batch: cfg.max_batch,
            max_delay: DEFAULT_MAX_DELAY,
            store_timeout: cfg.store_timeout,
        },
        &writer_tracker,
        writer_stop.clone(),
    );
    writer_tracker.close();

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
            .with_context(|| format!("could not serve metrics on {addr} (ABI_METRICS_ADDR)"))?,
        ),
        None => None,
    };
    let handler = Arc::new(Handler::new(
        discovery.clone(),
        cfg.secret.clone(),
        max_payload,
    ));
    let requests = TaskTracker::new();
    let stop_serving = shutdown.child_token();
    let mut serving = endpoints::serve(
        client.clone(),
        &cfg.project,
        handler,
        Arc::clone(&stats),
        endpoints::Limits {
            max_concurrent: cfg.max_concurrent_requests,
            timeout: cfg.store_timeout,
        },
        requests.clone(),
        stop_serving.clone(),
    )
    .await
    .context("could not subscribe the discovery endpoints")?;
    // Announced only once the endpoints serve (the broker confirmed them), so a tool
    // that sees this process in `$SRV.PING` can reach it through the queue group.
    let micro_task = micro::serve(
        client.clone(),
        micro::Identity::new(cfg.project.clone()),
        Arc::clone(&stats),
        stop_serving.clone(),
    )
    .await
    .context("could not subscribe the micro-service endpoints")?;
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
            Err(_) => bail!("stopping the endpoints took longer than the grace period"),
        },
    };
    // Requests received are answered before the writer stops.
    requests.close();
    let answered = tokio::time::timeout_at(deadline, requests.wait())
        .await
        .is_ok();
    writer_stop.cancel();
    let committed = tokio::time::timeout_at(deadline, writer_tracker.wait())
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
        bail!("the registry writer task died");
    }

    match serve_result {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(error).context("discovery endpoints failed"),
        Err(join) => return Err(join).context("discovery endpoints task failed"),
    }
    if !answered {
        bail!("some requests were still running when the grace period ended");
    }
    if !committed {
        bail!("the registry writer did not finish within the grace period");
    }
    if !flushed {
        bail!("could not flush the last replies to NATS");
    }
    tracing::info!("abi-discovery stopped");
    Ok(())
}

/// Connects with the configured authentication and TLS, within the connect deadline.
async fn connect(cfg: &Valid) -> anyhow::Result<Client> {
    let mut options = match &cfg.nats_auth {
        NatsAuth::CredsFile(path) => ConnectOptions::with_credentials_file(path)
            .await
            .with_context(|| {
                format!(
                    "could not read the NATS credentials file {}",
                    path.display()
                )
            })?,
        _ => ConnectOptions::new(),
    };
    options = match &cfg.nats_auth {
        NatsAuth::None | NatsAuth::CredsFile(_) => options,
        NatsAuth::UserPassword(user, password) => {
            options.user_and_password(user.clone(), password.expose().to_owned())
        }
        NatsAuth::Token(token) => options.token(token.expose().to_owned()),
        NatsAuth::NKey(seed) => options.nkey(seed.expose().to_owned()),
    };
    if let Some(ca) = &cfg.nats_tls.ca {
        options = options.add_root_certificates(ca.clone());
    }
    if let Some((cert, key)) = &cfg.nats_tls.client_cert {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    options = options
        .require_tls(cfg.nats_tls.required)
        .name(micro::SERVICE_NAME)
        .connection_timeout(cfg.connect_timeout);
    let shown = &cfg.nats_url;
    match tokio::time::timeout(cfg.connect_timeout, options.connect(cfg.nats_url.urls())).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => {
            Err(error).with_context(|| format!("could not connect to NATS at {shown}"))
        }
        Err(_) => bail!(
            "could not connect to NATS at {shown}: no answer within {:?}",
            cfg.connect_timeout
        ),
    }
}
