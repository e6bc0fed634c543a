//! The `--serve` side: the raw floor (a core NATS responder answering
//! 1 KiB) and our module (an `AppHost` serving the bench app, an axum
//! router), each until SIGTERM.

use std::sync::Arc;

use abi_sdk::apps::{AppHost, AppService, AppSpec};
use abi_sdk::{Config, DiscoveryConfig, Module, ModuleSpec, Runner, TokenSource};
use anyhow::{Context as _, ensure};
use axum::body::Body;
use axum::http::{StatusCode, Uri, header};
use bytes::Bytes;
use futures::StreamExt as _;

use super::{APP, FRAME_BYTES, KIB, PROJECT, RAW_SUBJECT, module_key};

/// The module our host serves in.
pub const OURS_MODULE: &str = "bench.ours";
/// The module the reference's host serves in.
pub const REFERENCE_MODULE: &str = "bench.reference";

/// What `/kib` answers and the raw floor replies.
static KIB_BODY: [u8; KIB] = [b'k'; KIB];
/// The frame a download repeats (zeroes: no page of the binary is read).
static FRAME: [u8; FRAME_BYTES] = [0; FRAME_BYTES];

/// This process as the target `kind` on `url`: `raw` (the floor) or
/// `ours` (our module), until SIGTERM.
///
/// # Errors
///
/// Another kind, or a target that cannot start.
///
/// # Cancel safety
///
/// Not cancel safe: our module's runner, dropped, skips its drain.
pub async fn run(kind: &str, url: &str) -> anyhow::Result<()> {
    if kind == "raw" {
        return raw_floor(url).await;
    }
    ensure!(kind == "ours", "unknown target {kind:?} (raw, ours)");
    our_module(url).await
}

/// The floor: one core-NATS subscription answering every request with
/// 1 KiB; SIGTERM ends the process (no handler).
async fn raw_floor(url: &str) -> anyhow::Result<()> {
    let nats = async_nats::connect(url).await.context("connect to nats")?;
    let mut requests = nats.subscribe(RAW_SUBJECT).await?;
    while let Some(request) = requests.next().await {
        if let Some(reply) = request.reply {
            // A lost reply shows up as a failed call in the bench.
            let _ = nats.publish(reply, Bytes::from_static(&KIB_BODY)).await;
        }
    }
    Ok(())
}

/// The module's own work: none (the runner waits for SIGTERM).
struct Idle;

impl Module for Idle {}

/// Our module: an `AppHost` with its default options serving [`APP`],
/// under the runner (which drains on SIGTERM).
async fn our_module(url: &str) -> anyhow::Result<()> {
    let app = AppSpec::new(APP).service(AppService::new(router()));
    let host = AppHost::new().app(app)?;
    let token = TokenSource::module_key(OURS_MODULE, module_key(OURS_MODULE)?);
    let discovery = DiscoveryConfig::default().project(PROJECT);
    let config = Config::default().nats_url(url).token(token);
    Runner::new(ModuleSpec::new(OURS_MODULE).serve(Arc::new(host)))
        .config(config.discovery(discovery))
        .run(Idle)
        .await?;
    Ok(())
}

/// The bench app: `GET /kib`, `GET /download?bytes=N`, `POST /upload`.
fn router() -> axum::Router {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/kib", get(|| async { Bytes::from_static(&KIB_BODY) }))
        .route("/download", get(download))
        .route("/upload", post(upload))
}

/// `bytes` bytes (the query `bytes=N`), produced a frame at a time as the
/// host pulls them, with their content length.
async fn download(uri: Uri) -> Result<axum::response::Response, StatusCode> {
    let size: u64 = uri
        .query()
        .and_then(|q| q.strip_prefix("bytes="))
        .and_then(|n| n.parse().ok())
        .ok_or(StatusCode::BAD_REQUEST)?;
    axum::response::Response::builder()
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, size)
        .body(frames(size))
        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)
}

/// A body of `size` zero bytes in frames of [`FRAME_BYTES`], each made
/// when it is read: a download's, and an upload's on the caller's side.
pub fn frames(size: u64) -> Body {
    let frames = futures::stream::unfold(size, |left| async move {
        let take = usize::try_from(left).map_or(FRAME_BYTES, |left| left.min(FRAME_BYTES));
        let frame = Bytes::from_static(&FRAME[..take]);
        (take > 0).then_some((Ok::<_, std::convert::Infallible>(frame), left - take as u64))
    });
    Body::from_stream(frames)
}

/// Counts the bytes of the request body, read as a stream, and answers
/// the count.
async fn upload(body: Body) -> Result<String, StatusCode> {
    let mut chunks = body.into_data_stream();
    let mut size = 0usize;
    while let Some(chunk) = chunks.next().await {
        size += chunk.map_err(|_| StatusCode::BAD_REQUEST)?.len();
    }
    Ok(size.to_string())
}
