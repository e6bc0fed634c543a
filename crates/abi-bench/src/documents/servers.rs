//! The document servers as child processes: our `abi-documents` binary (on a
//! SQLite file or a PostgreSQL database) and the Python reference
//! (`tests/interop/document_peer.py serve`), and the check that nobody else
//! serves the document subjects when a target starts.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use abi_proto::document::v1::CollectionsResponse;
use abi_wire::documents::{self, Operation};
use anyhow::{Context as _, bail};
use async_nats::{Client, HeaderMap, RequestErrorKind};
use bytes::Bytes;
use prost::Message as _;
use tokio::process::Command;

use crate::service::{self, Service};

/// How long a server may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopped server's subscriptions may linger on the bus.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Interval between probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(50);
/// Deadline of one probe request.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Settings of `abi-documents` the bench leaves at their defaults, removed
/// from the environment it inherits so a developer's shell cannot change
/// what is measured.
const INHERITED_SETTINGS: [&str; 7] = [
    "ABI_DOCUMENTS_DATA_DIR",
    "ABI_DOCUMENTS_PG_SCHEMA",
    "ABI_DOCUMENTS_STRICT_NAMESPACES",
    "ABI_MAX_CONCURRENT_REQUESTS",
    "ABI_METRICS_ADDR",
    "ABI_JWT_SECRET_FILE",
    "ABI_ADMIN_IDENTITIES",
];

/// Starts the `abi-documents` binary at `bin` with `storage` as its
/// `ABI_DOCUMENTS_URL` (a file path or a `postgres://` URL) and waits until
/// it answers on the bus.
///
/// # Errors
///
/// When it does not start or does not answer within a minute.
///
/// # Cancel safety
///
/// Cancel safe: the child is spawned with `kill_on_drop`, so dropping the future before it answers
/// kills it.
pub async fn start_ours(
    bin: &Path,
    nats_url: &str,
    secret: &str,
    storage: &str,
    client: &Client,
    headers: &HeaderMap,
) -> anyhow::Result<Service> {
    let mut cmd = Command::new(bin);
    for name in INHERITED_SETTINGS {
        cmd.env_remove(name);
    }
    cmd.env("NATS_URL", nats_url)
        .env("ABI_DOCUMENTS_URL", storage)
        .env("ABI_JWT_SECRET", secret)
        .env("ABI_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("start {}", bin.display()))?;
    let pid = child.id().context("abi-documents exited at once")?;
    service::wait_answering(&mut child, "abi-documents", || answers(client, headers)).await?;
    Service::ready(child, pid)
}

/// Starts the reference server (`python script serve <url> <secret>
/// <sqlite_path>`) and waits for its `ready` line and its first answer.
///
/// # Errors
///
/// When it does not start or does not answer within a minute.
///
/// # Cancel safety
///
/// Cancel safe: the child is spawned with `kill_on_drop`, so dropping the future before it answers
/// kills it (it is already inside a [`Service`] once `ready` is read).
pub async fn start_reference(
    python: &Path,
    script: &Path,
    nats_url: &str,
    secret: &str,
    sqlite_path: &Path,
    client: &Client,
    headers: &HeaderMap,
) -> anyhow::Result<Service> {
    let child = Command::new(python)
        .arg(script)
        .args(["serve", nats_url, secret])
        .arg(sqlite_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("start {} {}", python.display(), script.display()))?;
    let svc = service::wait_ready_line(child, "reference document server").await?;
    let start = Instant::now();
    while !answers(client, headers).await {
        if start.elapsed() > START_TIMEOUT {
            bail!("the reference document server did not answer within {START_TIMEOUT:?}");
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
    Ok(svc)
}

/// Whether a document service answers `collections` (any decodable reply).
async fn answers(client: &Client, headers: &HeaderMap) -> bool {
    let subject = documents::operation(Operation::Collections);
    let sent = tokio::time::timeout(
        PROBE_TIMEOUT,
        client.request_with_headers(subject, headers.clone(), Bytes::new()),
    )
    .await;
    match sent {
        Ok(Ok(reply)) => CollectionsResponse::decode(reply.payload).is_ok(),
        _ => false,
    }
}

/// Waits until no document service is subscribed on the bus (a request gets
/// "no responders"): the document subjects carry no project, so a second
/// server would share the queue group with the one being measured.
///
/// # Errors
///
/// When one still answers after 10 s.
///
/// # Cancel safety
///
/// Cancel safe: it only sends probe requests and sleeps; dropping it abandons the probe in flight.
pub async fn wait_bus_free(client: &Client) -> anyhow::Result<()> {
    let subject = documents::operation(Operation::Collections);
    let start = Instant::now();
    loop {
        let sent =
            tokio::time::timeout(PROBE_TIMEOUT, client.request(subject.clone(), Bytes::new()))
                .await;
        if let Ok(Err(error)) = &sent
            && error.kind() == RequestErrorKind::NoResponders
        {
            return Ok(());
        }
        if start.elapsed() > LEAVE_TIMEOUT {
            bail!("a document service still answers on {subject}: the targets must run alone");
        }
        tokio::time::sleep(PROBE_INTERVAL).await;
    }
}
