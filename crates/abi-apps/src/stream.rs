//! Bodies that do not travel inline (`abi.app.v1` `BodyPull` / `BodyChunk`,
//! the reference's `app_streams`): the reader pulls chunk `n`, the holder
//! answers it, so a body is never produced faster than it is read. The
//! holder side serves bytes this process has, a file (read one chunk per
//! pull), or a body an app is still producing (server-sent events, a long
//! download: read one frame per pull, an empty chunk every 15 s while the
//! app says nothing, so memory holds a frame); the reader side pulls one.

use std::path::PathBuf;
use std::time::Duration;

use abi_proto::app::v1 as pb;
use abi_proto::common::v1::CallError;
use abi_wire::ErrorCode;
use abi_wire::apps as wire;
use async_nats::{RequestErrorKind, Subscriber};
use bytes::{Bytes, BytesMut};
use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::decide::Refused;
use crate::service::ResponseBody;

/// After the last chunk, a repeated pull is still answered this long (past
/// the reader's pull timeout, so the retry of a lost last reply finds it).
const LINGER: Duration = Duration::from_secs(wire::PULL_TIMEOUT_SECONDS + 5);
/// A pull with nothing new is answered empty after this: the reader asks
/// again (it keeps an idle stream alive through the pull timeout).
const KEEPALIVE: Duration = Duration::from_secs(15);

/// A body to hold for its reader.
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
    /// A body the app is still producing.
    Stream {
        /// The app's response body.
        body: ResponseBody,
        /// Server-sent events: a drain ends it at once (its reader
        /// reconnects elsewhere); any other stream may finish.
        ends_at_drain: bool,
    },
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Held::Bytes(b) => write!(f, "Bytes({})", b.len()),
            Held::File { path, size } => write!(f, "File({}, {size})", path.display()),
            Held::Stream { ends_at_drain, .. } => {
                write!(f, "Stream(ends_at_drain: {ends_at_drain})")
            }
        }
    }
}

/// When a held body ends besides its reader's pace.
#[derive(Debug, Clone, Default)]
pub struct Ends {
    /// The host drains: a body already sent whole stops waiting for a
    /// repeated last pull, and server-sent events end.
    pub draining: CancellationToken,
    /// The host stops: the next pull gets `MODULE_UNAVAILABLE`.
    pub stop: CancellationToken,
}

/// What a holder answers, chunk after chunk.
struct Source {
    held: Held,
    chunk_bytes: usize,
    /// A stream's frame not sent yet.
    pending: Bytes,
    /// The answer to the last new pull, for a repeated one.
    last_answer: Option<pb::BodyChunk>,
}

/// Whether a pull of `sequence` follows the last one answered (`None`
/// before the first): the same again (its reply was lost) or the next,
/// never past the end. Any other is refused, as the reference refuses it,
/// so two readers of one body cannot take each other's chunks.
fn in_sequence(sequence: u64, last: Option<&pb::BodyChunk>) -> bool {
    match last {
        None => sequence == 0,
        Some(last) if sequence == last.sequence => true,
        Some(last) => !last.last && last.error.is_none() && sequence == last.sequence + 1,
    }
}

fn chunk_answer(sequence: u64, data: Bytes, last: bool) -> pb::BodyChunk {
    pb::BodyChunk {
        error: None,
        sequence,
        data: data.to_vec(),
        last,
    }
}

fn error_answer(sequence: u64, code: ErrorCode, text: &str) -> pb::BodyChunk {
    pb::BodyChunk {
        error: Some(Refused::rpc(code, text).to_pb()),
        sequence,
        ..Default::default()
    }
}

impl Source {
    /// The answer to a pull of `sequence`.
    async fn answer(&mut self, sequence: u64) -> pb::BodyChunk {
        if !in_sequence(sequence, self.last_answer.as_ref()) {
            return pb::BodyChunk {
                error: Some(
                    Refused {
                        code: ErrorCode::InvalidArgument,
                        message: "Pull out of sequence".to_owned(),
                    }
                    .to_pb(),
                ),
                sequence,
                ..Default::default()
            };
        }
        if let Some(answer) = self.last_answer.as_ref().filter(|a| a.sequence == sequence) {
            return answer.clone();
        }
        let answer = self.next_answer(sequence).await;
        // A keepalive (empty, not the end) is no answer: the same pull comes again.
        if !answer.data.is_empty() || answer.last || answer.error.is_some() {
            self.last_answer = Some(answer.clone());
        }
        answer
    }

    /// The answer to a new pull of `sequence`: the next chunk, or an empty
    /// keepalive while an app's stream says nothing.
    async fn next_answer(&mut self, sequence: u64) -> pb::BodyChunk {
        let chunk = self.chunk_bytes.max(1);
        match &mut self.held {
            Held::Bytes(bytes) => {
                let chunks = (bytes.len() as u64).div_ceil(chunk as u64).max(1);
                let n = sequence.min(chunks - 1);
                let start = usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .saturating_mul(chunk)
                    .min(bytes.len());
                let end = (start + chunk).min(bytes.len());
                chunk_answer(sequence, bytes.slice(start..end), n == chunks - 1)
            }
            Held::File { path, size } => {
                let chunks = size.div_ceil(chunk as u64).max(1);
                let n = sequence.min(chunks - 1);
                match read_at(path, n * chunk as u64, chunk, *size).await {
                    Ok(data) => chunk_answer(sequence, data, n == chunks - 1),
                    Err(error) => {
                        warn!(%error, "could not read a file to send");
                        error_answer(sequence, ErrorCode::AppError, "Could not read the file")
                    }
                }
            }
            Held::Stream { body, .. } => {
                loop {
                    if !self.pending.is_empty() {
                        let take = self.pending.len().min(chunk);
                        break chunk_answer(sequence, self.pending.split_to(take), false);
                    }
                    match tokio::time::timeout(KEEPALIVE, body.frame()).await {
                        // Nothing new: an empty chunk, the same sequence asked again.
                        Err(_) => break chunk_answer(sequence, Bytes::new(), false),
                        Ok(None) => break chunk_answer(sequence, Bytes::new(), true),
                        Ok(Some(Err(error))) => {
                            warn!(%error, "an app's response body failed");
                            break error_answer(sequence, ErrorCode::AppError, "App failed");
                        }
                        Ok(Some(Ok(frame))) => {
                            if let Ok(data) = frame.into_data() {
                                self.pending = data;
                            }
                        }
                    }
                }
            }
        }
    }

    fn ends_at_drain(&self) -> bool {
        matches!(
            self.held,
            Held::Stream {
                ends_at_drain: true,
                ..
            }
        )
    }
}

async fn read_at(
    path: &std::path::Path,
    start: u64,
    len: usize,
    size: u64,
) -> std::io::Result<Bytes> {
    let want = usize::try_from(size.saturating_sub(start))
        .unwrap_or(len)
        .min(len);
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(std::io::SeekFrom::Start(start)).await?;
    let mut buf = BytesMut::zeroed(want);
    file.read_exact(&mut buf).await?;
    Ok(buf.freeze())
}

/// Answers the next pull (waiting a second at most) with `code`, `text`.
async fn refuse_next(
    nats: &async_nats::Client,
    pulls: &mut Subscriber,
    code: ErrorCode,
    text: &str,
) {
    if let Ok(Some(pull)) = tokio::time::timeout(Duration::from_secs(1), pulls.next()).await
        && let Some(reply) = pull.reply
    {
        let sequence = pb::BodyPull::decode(pull.payload.as_ref()).map_or(0, |p| p.sequence);
        let failed = error_answer(sequence, code, text);
        if let Err(error) = nats.publish(reply, failed.encode_to_vec().into()).await {
            debug!(%error, "a body's last refusal was not sent");
        }
    }
}

/// Holds `body` on a new inbox of `nats` and answers its pulls until the
/// reader took the last chunk (and a little longer, for a lost reply,
/// unless the host drains), left (`cancel`), stopped pulling for the idle
/// limit, or the host ended it (`ends`); `guard` is dropped then. Returns
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
        let mut source = Source {
            held: body,
            chunk_bytes,
            pending: Bytes::new(),
            last_answer: None,
        };
        let ends_at_drain = source.ends_at_drain();
        let mut wait = idle;
        let mut lingering = false;
        loop {
            let next = tokio::select! {
                next = tokio::time::timeout(wait, pulls.next()) => next,
                () = ends.draining.cancelled(), if lingering => break,
                () = ends.draining.cancelled(), if ends_at_drain => {
                    refuse_next(&nats, &mut pulls, ErrorCode::ModuleUnavailable, "The module is stopping").await;
                    break;
                }
                () = ends.stop.cancelled() => {
                    refuse_next(&nats, &mut pulls, ErrorCode::ModuleUnavailable, "The module stopped").await;
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
            // An app's stream may say nothing for long: a drain (for events)
            // or a stop answers the pull meanwhile.
            let answer = tokio::select! {
                answer = source.answer(asked.sequence) => answer,
                () = ends.draining.cancelled(), if ends_at_drain => {
                    error_answer(asked.sequence, ErrorCode::ModuleUnavailable, "The module is stopping")
                }
                () = ends.stop.cancelled() => {
                    error_answer(asked.sequence, ErrorCode::ModuleUnavailable, "The module stopped")
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

/// A reader of the body held at an inbox, chunk by chunk.
#[derive(Debug)]
pub struct Reader {
    nats: async_nats::Client,
    inbox: String,
    sequence: u64,
    done: bool,
}

impl Reader {
    /// A reader of the body at `inbox`.
    pub fn new(nats: async_nats::Client, inbox: impl Into<String>) -> Self {
        Self {
            nats,
            inbox: inbox.into(),
            sequence: 0,
            done: false,
        }
    }

    /// Whether the body was read to its end, or the reader gave up.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next chunk (never empty), `None` after the last.
    ///
    /// # Errors
    ///
    /// The holder's error, `DEADLINE_EXCEEDED` when it stopped answering,
    /// `UNAVAILABLE` when it is gone.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a chunk answered while dropped is lost.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, Refused> {
        let timeout = Duration::from_secs(wire::PULL_TIMEOUT_SECONDS);
        while !self.done {
            let mut reply = None;
            for _ in 0..wire::PULL_RETRIES {
                let asked = pb::BodyPull {
                    sequence: self.sequence,
                    cancel: false,
                };
                let request = async_nats::Request::new()
                    .payload(asked.encode_to_vec().into())
                    .timeout(Some(timeout));
                match self.nats.send_request(self.inbox.clone(), request).await {
                    Ok(message) => {
                        reply = Some(message);
                        break;
                    }
                    Err(err) if err.kind() == RequestErrorKind::NoResponders => {
                        self.done = true;
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
            let chunk = pb::BodyChunk::decode(reply.payload.as_ref()).map_err(|_| {
                Refused::rpc(ErrorCode::InvalidArgument, "Body chunk out of sequence")
            })?;
            if let Some(CallError { code, message, .. }) =
                chunk.error.filter(|e| !e.code.is_empty())
            {
                self.done = true;
                let code = ErrorCode::from_wire(&code).unwrap_or(ErrorCode::Unavailable);
                return Err(Refused { code, message });
            }
            if chunk.sequence != self.sequence {
                return Err(Refused::rpc(
                    ErrorCode::InvalidArgument,
                    "Body chunk out of sequence",
                ));
            }
            if chunk.data.is_empty() && !chunk.last {
                continue; // keepalive: nothing new yet
            }
            self.done = chunk.last;
            self.sequence += 1;
            if !chunk.data.is_empty() {
                return Ok(Some(Bytes::from(chunk.data)));
            }
        }
        Ok(None)
    }

    /// Tells the holder its reader left (when it has not ended).
    pub async fn cancel(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let pull = pb::BodyPull {
            sequence: 0,
            cancel: true,
        };
        if let Err(error) = self
            .nats
            .publish(self.inbox.clone(), pull.encode_to_vec().into())
            .await
        {
            debug!(%error, "could not tell a body's holder its reader left");
        }
    }
}

/// Pulls the body held at `inbox` whole after `first`, at most `max_bytes`
/// (the app's limit).
///
/// # Errors
///
/// As [`Reader::next_chunk`]; `Ok(None)` past `max_bytes` (a 413; the
/// holder is told).
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
    read_rest(Reader::new(nats.clone(), inbox), first, max_bytes).await
}

/// The rest of `reader`'s body after `first`, whole, at most `max_bytes`.
///
/// # Errors
///
/// As [`pull`].
///
/// # Cancel safety
///
/// As [`pull`].
pub async fn read_rest(
    mut reader: Reader,
    first: Bytes,
    max_bytes: u64,
) -> Result<Option<Bytes>, Refused> {
    let mut body = BytesMut::from(first.as_ref());
    while let Some(chunk) = reader.next_chunk().await? {
        if (body.len() + chunk.len()) as u64 > max_bytes {
            reader.cancel().await;
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body.freeze()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;
    use abi_test_support::NatsServer;
    use tokio_util::task::TaskTracker;

    /// Above the inline limit, not a multiple of a chunk.
    const SIZE: usize = 600 * 1024 + 3;

    /// A nats-server, a connection to it, and a tracker for the holders.
    async fn bus() -> (NatsServer, async_nats::Client, TaskTracker) {
        let server = NatsServer::start().await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        (server, nats, TaskTracker::new())
    }

    fn chunk_of(nats: &async_nats::Client) -> usize {
        wire::chunk_bytes(nats.max_payload())
    }

    /// [`body`] held on a new inbox.
    async fn hold_bytes(nats: &async_nats::Client, tasks: &TaskTracker, ends: Ends) -> String {
        hold(nats, Held::Bytes(body()), chunk_of(nats), tasks, ends, ())
            .await
            .unwrap()
    }

    fn body() -> Bytes {
        (0..SIZE)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>()
            .into()
    }

    #[tokio::test]
    async fn a_held_body_is_pulled_whole_and_lingers_until_the_host_drains() {
        let (_server, nats, tasks) = bus().await;
        let ends = Ends::default();
        let chunk = chunk_of(&nats);
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
        let (_server, nats, tasks) = bus().await;
        let inbox = hold_bytes(&nats, &tasks, Ends::default()).await;
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

    #[tokio::test]
    async fn server_sent_events_stream_as_sent_and_end_at_a_drain() {
        let (_server, nats, tasks) = bus().await;
        let ends = Ends::default();
        // One event, then nothing, for ever.
        let events = futures::stream::once(async {
            Ok::<_, abi_sdk_core::BoxError>(http_body::Frame::data(Bytes::from_static(
                b"data: one\n\n",
            )))
        })
        .chain(futures::stream::pending());
        let body = http_body_util::StreamBody::new(events).boxed_unsync();
        let held = Held::Stream {
            body,
            ends_at_drain: true,
        };
        let inbox = hold(&nats, held, 1024, &tasks, ends.clone(), ())
            .await
            .unwrap();
        let mut reader = Reader::new(nats.clone(), inbox);
        let first = reader.next_chunk().await.unwrap();
        assert_eq!(first.as_deref(), Some(&b"data: one\n\n"[..]));
        // The next pull waits on the app; the drain answers it.
        let next = tokio::spawn(async move { reader.next_chunk().await });
        ends.draining.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(5), next)
            .await
            .expect("the drain answers the waiting pull")
            .unwrap()
            .unwrap_err();
        assert_eq!(ended.code, ErrorCode::ModuleUnavailable, "{ended:?}");
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("the holder ends");
    }

    #[tokio::test]
    async fn a_reader_that_stops_pulling_does_not_stall_another_stream() {
        let (_server, nats, tasks) = bus().await;
        let chunk = chunk_of(&nats);
        let slow = hold_bytes(&nats, &tasks, Ends::default()).await;
        let fast = hold_bytes(&nats, &tasks, Ends::default()).await;
        // One chunk of the first, then that reader goes quiet...
        let mut stalled = Reader::new(nats.clone(), slow);
        assert!(stalled.next_chunk().await.unwrap().is_some());
        // ...while the other is read whole.
        let whole = tokio::time::timeout(
            Duration::from_secs(10),
            pull(&nats, &fast, Bytes::new(), u64::MAX),
        )
        .await
        .expect("the other stream is not held up");
        assert_eq!(whole.unwrap(), Some(body()));
        // The quiet one still answers where its reader left off.
        let mut rest = BytesMut::new();
        while let Some(chunk) = stalled.next_chunk().await.unwrap() {
            rest.extend_from_slice(&chunk);
        }
        assert_eq!(rest.len(), SIZE - chunk);
    }
}
