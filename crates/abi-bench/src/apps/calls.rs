//! The caller's timed calls, each checking its answer: a raw request-reply
//! of 1 KiB, a GET of 1 KiB through a host, a streamed download read chunk
//! by chunk and discarded, and an upload the app counts.

use std::time::{Duration, Instant};

use abi_sdk::apps::{AppClient, RequestBody};
use anyhow::{Context as _, ensure};
use bytes::Bytes;
use futures::StreamExt as _;

use super::{KIB, RAW_SUBJECT};
use crate::measure::WRONG_ANSWER;

/// One raw request-reply: a short request, 1 KiB back.
///
/// # Errors
///
/// No reply in the client's request timeout, or a reply of another size.
///
/// # Cancel safety
///
/// Cancel safe: the floor keeps nothing.
pub async fn raw_get(nats: &async_nats::Client) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let reply = nats
        .request(RAW_SUBJECT, Bytes::from_static(b"GET /kib"))
        .await
        .context("raw request")?;
    let elapsed = start.elapsed();
    ensure!(reply.payload.len() == KIB, WRONG_ANSWER);
    Ok(elapsed)
}

/// One `GET /kib` through the host: status 200 and 1 KiB.
///
/// # Errors
///
/// The call's failure, or another answer.
///
/// # Cancel safety
///
/// Cancel safe: a GET changes nothing.
pub async fn get(app: &AppClient) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let response = app
        .call(http::Request::get("/kib").body(Bytes::new())?)
        .await?;
    let elapsed = start.elapsed();
    ensure!(
        response.status() == http::StatusCode::OK && response.body().len() == KIB,
        "{WRONG_ANSWER}: {} of {} bytes",
        response.status(),
        response.body().len()
    );
    Ok(elapsed)
}

/// One download of `bytes` bytes with `call_streaming`, each chunk counted
/// and dropped: timed from the request to the last chunk.
///
/// # Errors
///
/// The call's or the body's failure, or another size.
///
/// # Cancel safety
///
/// Not cancel safe: dropped midway, the holder waits for its idle limit.
pub async fn download(app: &AppClient, bytes: u64) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let request = http::Request::get(format!("/download?bytes={bytes}")).body(Bytes::new())?;
    let response = app.call_streaming(request).await?;
    ensure!(response.status() == http::StatusCode::OK, response.status());
    let mut body = response.into_body();
    let mut read = 0u64;
    while let Some(chunk) = body.next().await {
        read += chunk?.len() as u64;
    }
    let elapsed = start.elapsed();
    ensure!(read == bytes, "{WRONG_ANSWER}: {read} of {bytes} bytes");
    Ok(elapsed)
}

/// One upload of `bytes` bytes to `POST /upload`, its body streamed
/// (`RequestBody::stream`: each frame made as the host pulls it): timed
/// from the request to the app's count, which must be the size sent.
///
/// # Errors
///
/// The call's failure, or another count.
///
/// # Cancel safety
///
/// Not cancel safe: dropped midway, the host keeps pulling until its idle limit.
pub async fn upload(app: &AppClient, bytes: u64) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let body = RequestBody::stream(super::serve::frames(bytes));
    let response = app.call(http::Request::post("/upload").body(body)?).await?;
    let elapsed = start.elapsed();
    let counted = String::from_utf8_lossy(response.body());
    ensure!(
        response.status() == http::StatusCode::OK && counted.trim() == bytes.to_string(),
        "{WRONG_ANSWER}: {} counted {counted:?} of {bytes} bytes",
        response.status()
    );
    Ok(elapsed)
}
