//! Bodies that do not travel inline (`abi.app.v1` `BodyPull` / `BodyChunk`,
//! the reference's `app_streams`): the reader pulls chunk `n`, the holder
//! answers it, so a body is never produced faster than it is read. The
//! holder side serves a body this process has whole (a file is read one
//! chunk per pull, so memory holds a chunk); the reader side pulls an upload.

use std::path::PathBuf;
use std::time::Duration;

use abi_proto::app::v1 as pb;
use abi_proto::common::v1::CallError;
use abi_wire::ErrorCode;
use abi_wire::apps as wire;
use async_nats::RequestErrorKind;
use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::decide::Refused;

/// After the last chunk, a repeated pull is still answered this long (past
/// the reader's pull timeout, so the retry of a lost last reply finds it).
const LINGER: Duration = Duration::from_secs(wire::PULL_TIMEOUT_SECONDS + 5);

/// A body to hold for its reader.
#[derive(Debug, Clone)]
pub enum Held {
    /// Bytes in memory.
    Bytes(Bytes),
    /// A file of `size` bytes, read a chunk at a time.
    File {
        /// The file.
        path: PathBuf,
        /// Its size when answered.
        size: u64,
    },
}

impl Held {
    fn len(&self) -> u64 {
        match self {
            Held::Bytes(b) => b.len() as u64,
            Held::File { size, .. } => *size,
        }
    }

    async fn chunk(&self, start: u64, len: usize) -> std::io::Result<Bytes> {
        match self {
            Held::Bytes(b) => {
                let start = usize::try_from(start).unwrap_or(usize::MAX).min(b.len());
                Ok(b.slice(start..(start + len).min(b.len())))
            }
            Held::File { path, size } => {
                let want = usize::try_from(size.saturating_sub(start))
                    .unwrap_or(len)
                    .min(len);
                let mut file = tokio::fs::File::open(path).await?;
                file.seek(std::io::SeekFrom::Start(start)).await?;
                let mut buf = BytesMut::zeroed(want);
                file.read_exact(&mut buf).await?;
                Ok(buf.freeze())
            }
        }
    }
}

/// When a held body ends besides its reader's pace.
#[derive(Debug, Clone, Default)]
pub struct Ends {
    /// The host drains: a body already sent whole stops waiting for a
    /// repeated last pull.
    pub draining: CancellationToken,
    /// The host stops: the next pull gets `MODULE_UNAVAILABLE`.
    pub stop: CancellationToken,
}

/// Holds `body` on a new inbox of `nats` and answers its pulls until the
/// reader took the last chunk (and a little longer, for a lost reply,
/// unless the host drains), left (`cancel`), stopped pulling for the idle
/// limit, or the host stopped (`ends`); `guard` is dropped then. Returns
/// the inbox.
///
/// # Errors
///
/// The subscription failed.
///
/// # Cancel safety
///
/// Cancel safe until it returns; the holding runs in `tasks`.
pub async fn hold<G: Send + 'static>(
    nats: &async_nats::Client,
    body: Held,
    chunk_bytes: usize,
    tasks: &tokio_util::task::TaskTracker,
    ends: Ends,
    guard: G,
) -> Result<String, async_nats::SubscribeError> {
    let inbox = nats.new_inbox();
    let mut pulls = nats.subscribe(inbox.clone()).await?;
    let nats = nats.clone();
    let idle = Duration::from_secs(wire::IDLE_SECONDS);
    tasks.spawn(async move {
        // Held (a stream slot, say) until the body is done with.
        let _guard = guard;
        let total = body.len();
        let chunk = chunk_bytes.max(1) as u64;
        let chunks = total.div_ceil(chunk).max(1);
        let mut wait = idle;
        let mut lingering = false;
        loop {
            let next = tokio::select! {
                next = tokio::time::timeout(wait, pulls.next()) => next,
                () = ends.draining.cancelled(), if lingering => break,
                () = ends.stop.cancelled() => {
                    // The host stops: the next pull learns it.
                    if let Ok(Some(pull)) = tokio::time::timeout(Duration::from_secs(1), pulls.next()).await
                        && let Some(reply) = pull.reply {
                        let failed = pb::BodyChunk {
                            error: Some(Refused::rpc(ErrorCode::ModuleUnavailable, "The module stopped").to_pb()),
                            ..Default::default()
                        };
                        let _ = nats.publish(reply, failed.encode_to_vec().into()).await;
                    }
                    break;
                }
            };
            let Ok(Some(pull)) = next else { break };
            let Ok(asked) = pb::BodyPull::decode(pull.payload.as_ref()) else { continue };
            // A cancel comes without a reply subject: the reader is gone.
            if asked.cancel {
                break;
            }
            let Some(reply) = pull.reply else { continue };
            let sequence = asked.sequence.min(chunks - 1);
            let answer = match body.chunk(sequence * chunk, chunk as usize).await {
                Ok(data) => pb::BodyChunk {
                    error: None,
                    sequence: asked.sequence,
                    data: data.to_vec(),
                    last: sequence == chunks - 1,
                },
                Err(error) => {
                    warn!(%error, "could not read a body to send");
                    pb::BodyChunk {
                        error: Some(Refused::rpc(ErrorCode::AppError, "Could not read the file").to_pb()),
                        sequence: asked.sequence,
                        ..Default::default()
                    }
                }
            };
            let last = answer.last || answer.error.is_some();
            if let Err(error) = nats.publish(reply, answer.encode_to_vec().into()).await {
                debug!(%error, "a body chunk was not sent");
            }
            // After the last chunk, linger for a repeated pull only.
            lingering = last;
            wait = if last { LINGER } else { idle };
        }
    });
    Ok(inbox)
}

/// Pulls the body held at `inbox`, at most `max_bytes` (the app's limit).
///
/// # Errors
///
/// The holder's error, `DEADLINE_EXCEEDED` when it stopped answering,
/// `UNAVAILABLE` when it is gone, `Ok(None)` past `max_bytes` (a 413).
///
/// # Cancel safety
///
/// Not cancel safe: dropped midway, the holder is not told (it stops at its
/// idle limit).
pub async fn pull(
    nats: &async_nats::Client,
    inbox: &str,
    first: Bytes,
    max_bytes: u64,
) -> Result<Option<Bytes>, Refused> {
    let mut body = BytesMut::from(first.as_ref());
    let mut sequence = 0u64;
    let timeout = Duration::from_secs(wire::PULL_TIMEOUT_SECONDS);
    loop {
        let mut reply = None;
        for _ in 0..wire::PULL_RETRIES {
            let request = async_nats::Request::new()
                .payload(
                    pb::BodyPull {
                        sequence,
                        cancel: false,
                    }
                    .encode_to_vec()
                    .into(),
                )
                .timeout(Some(timeout));
            match nats.send_request(inbox.to_owned(), request).await {
                Ok(message) => {
                    reply = Some(message);
                    break;
                }
                Err(err) if err.kind() == RequestErrorKind::NoResponders => {
                    return Err(Refused::rpc(
                        ErrorCode::Unavailable,
                        "The body's holder is gone",
                    ));
                }
                Err(_) => continue,
            }
        }
        let Some(reply) = reply else {
            return Err(Refused::rpc(
                ErrorCode::DeadlineExceeded,
                "The body's holder stopped answering",
            ));
        };
        let chunk = pb::BodyChunk::decode(reply.payload.as_ref())
            .map_err(|_| Refused::rpc(ErrorCode::InvalidArgument, "Body chunk out of sequence"))?;
        if let Some(CallError { code, message, .. }) = chunk.error.filter(|e| !e.code.is_empty()) {
            let code = ErrorCode::from_wire(&code).unwrap_or(ErrorCode::Unavailable);
            return Err(Refused { code, message });
        }
        if chunk.sequence != sequence {
            return Err(Refused::rpc(
                ErrorCode::InvalidArgument,
                "Body chunk out of sequence",
            ));
        }
        if chunk.data.is_empty() && !chunk.last {
            continue; // keepalive: nothing new yet
        }
        if (body.len() + chunk.data.len()) as u64 > max_bytes {
            cancel(nats, inbox).await;
            return Ok(None);
        }
        body.extend_from_slice(&chunk.data);
        if chunk.last {
            return Ok(Some(body.freeze()));
        }
        sequence += 1;
    }
}

/// Tells the holder at `inbox` that its reader left.
async fn cancel(nats: &async_nats::Client, inbox: &str) {
    let pull = pb::BodyPull {
        sequence: 0,
        cancel: true,
    };
    if let Err(error) = nats
        .publish(inbox.to_owned(), pull.encode_to_vec().into())
        .await
    {
        debug!(%error, "could not tell a body's holder its reader left");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;
    use abi_test_support::NatsServer;
    use tokio_util::task::TaskTracker;

    /// Above the inline limit, not a multiple of a chunk.
    const SIZE: usize = 600 * 1024 + 3;

    fn body() -> Bytes {
        (0..SIZE)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>()
            .into()
    }

    #[tokio::test]
    async fn a_held_body_is_pulled_whole_and_lingers_until_the_host_drains() {
        let server = NatsServer::start().await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        let tasks = TaskTracker::new();
        let ends = Ends::default();
        let chunk = wire::chunk_bytes(nats.server_info().max_payload);
        let inbox = hold(&nats, Held::Bytes(body()), chunk, &tasks, ends.clone(), ())
            .await
            .unwrap();
        let pulled = pull(&nats, &inbox, Bytes::new(), u64::MAX).await.unwrap();
        assert_eq!(pulled, Some(body()));
        tasks.close();
        // Taken whole, it still answers a repeated last pull...
        assert!(
            tokio::time::timeout(Duration::from_millis(300), tasks.wait())
                .await
                .is_err()
        );
        // ...until the host drains.
        ends.draining.cancel();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("a drain ends a body sent whole");
    }

    #[tokio::test]
    async fn a_reader_past_its_limit_stops_and_the_holder_ends() {
        let server = NatsServer::start().await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        let tasks = TaskTracker::new();
        let chunk = wire::chunk_bytes(nats.server_info().max_payload);
        let inbox = hold(
            &nats,
            Held::Bytes(body()),
            chunk,
            &tasks,
            Ends::default(),
            (),
        )
        .await
        .unwrap();
        let pulled = pull(&nats, &inbox, Bytes::new(), 1000).await.unwrap();
        assert_eq!(pulled, None, "above the limit: a 413 for the caller");
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("the reader's cancel ends the holder");
        let gone = pull(&nats, &inbox, Bytes::new(), u64::MAX)
            .await
            .unwrap_err();
        assert_eq!(gone.code, ErrorCode::Unavailable, "{gone:?}");
    }
}
