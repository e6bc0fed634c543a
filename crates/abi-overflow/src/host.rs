//! The overflow host of one process: serves `abi.rpc.overflow.*` (the
//! reference's `OverflowHost`), parks the replies its services cannot send
//! whole, and reads the uploads callers sent with their requests. Session
//! state is [`crate::session::Sessions`]; this file only does the I/O.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use abi_auth::Verifier;
use abi_proto::common::v1 as common;
use abi_proto::transfer::v1 as pb;
use abi_wire::ErrorCode;
use abi_wire::overflow::{self as wire, TransferOp};
use async_nats::{HeaderMap, Message};
use bytes::Bytes;
use futures::StreamExt as _;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::error::TransferError;
use crate::exchange::{Caller, TransferReply};
use crate::session::{Limits, Sessions};

/// How often idle sessions are looked for.
const EXPIRY_TICK: Duration = Duration::from_secs(1);
/// How long [`OverflowHost::stop`] waits for the broker to confirm the
/// unsubscribes.
const STOP_FLUSH: Duration = Duration::from_secs(1);
/// The trace headers a read of an upload passes on.
const TRACE_HEADERS: [&str; 2] = ["traceparent", "tracestate"];

struct Shared {
    client: async_nats::Client,
    verifier: Verifier,
    sessions: Mutex<Sessions>,
}

impl Shared {
    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn caller(&self, headers: Option<&HeaderMap>) -> Result<String, TransferError> {
        let token = headers
            .and_then(|h| h.get(abi_wire::AUTH_HEADER))
            .map_or("", |v| v.as_str());
        self.verifier
            .verify(token, None)
            .map_err(|_| TransferError::new(ErrorCode::Unauthenticated, "Invalid service token"))
    }
}

/// A process's overflow host. Dropping it stops serving (the subscriptions
/// end with its task); [`OverflowHost::stop`] also waits for the broker.
pub struct OverflowHost {
    shared: Arc<Shared>,
    owner: String,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for OverflowHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OverflowHost")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl Drop for OverflowHost {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OverflowHost {
    /// Subscribes to `abi.rpc.overflow.*` on `client` (`open` through the
    /// owners' queue group, the other operations on the shared subjects and
    /// on this host's own), checking every caller's token against `secret`,
    /// with the reference's limits. The subscriptions are confirmed by the
    /// broker when this returns.
    ///
    /// # Errors
    ///
    /// A subscription or the flush failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is served until it returns.
    pub async fn start(
        client: async_nats::Client,
        secret: &str,
    ) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        let owner = uuid::Uuid::new_v4().simple().to_string();
        let limits = Limits::for_broker(client.max_payload());
        let mut streams = Vec::new();
        for op in TransferOp::ALL {
            let shared_subject = format!("{}.{}", wire::PREFIX, op.as_str());
            let subscriber = if op == TransferOp::Open {
                client
                    .queue_subscribe(shared_subject, wire::OPEN_QUEUE_GROUP.to_owned())
                    .await?
            } else {
                client.subscribe(shared_subject).await?
            };
            streams.push(subscriber.map(move |m| (op, m)).boxed());
            if op != TransferOp::Open {
                let own = client
                    .subscribe(format!("{}.{owner}.{}", wire::PREFIX, op.as_str()))
                    .await?;
                streams.push(own.map(move |m| (op, m)).boxed());
            }
        }
        client.flush().await?;
        let shared = Arc::new(Shared {
            client,
            verifier: Verifier::new(secret),
            sessions: Mutex::new(Sessions::new(owner.clone(), limits)),
        });
        let task = tokio::spawn(serve(shared.clone(), futures::stream::select_all(streams)));
        Ok(Self {
            shared,
            owner,
            task,
        })
    }

    /// This host's id: the owner part of its session ids.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Sessions open now (uploads and parked replies).
    pub fn sessions(&self) -> usize {
        self.shared.sessions().len()
    }

    /// Whether a reply of `size` bytes may be parked at all.
    pub fn accepts(&self, size: usize) -> bool {
        size <= self.shared.sessions().limits().max_value_bytes
    }

    /// Parks `data`, a reply too large to send, for the caller whose
    /// request carried `headers`; returns the transfer id to answer with
    /// ([`wire::REPLY_HEADER`]).
    ///
    /// # Errors
    ///
    /// `UNAUTHENTICATED` without a valid token, `PAYLOAD_TOO_LARGE` above
    /// the value limit, `RESOURCE_EXHAUSTED` when the host is full.
    pub fn park(&self, headers: Option<&HeaderMap>, data: Bytes) -> Result<String, TransferError> {
        let caller = self.shared.caller(headers)?;
        let key = uuid::Uuid::new_v4().simple().to_string();
        self.shared
            .sessions()
            .park(&caller, data, &key, Instant::now())
    }

    /// The body of a request whose caller uploaded it first (`transfer_id`
    /// from [`wire::REQUEST_HEADER`]), read with the caller's token from
    /// `headers`: from this host's own sessions when it holds the upload,
    /// else from the host that does, over NATS. The upload is released.
    ///
    /// # Errors
    ///
    /// `NOT_FOUND` when the upload is gone (or its owner), `PERMISSION_DENIED`
    /// when it is another caller's, `PAYLOAD_TOO_LARGE`, `DEADLINE_EXCEEDED`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped while reading a remote upload, that upload
    /// stays open until its host's idle expiry.
    pub async fn fetch(
        &self,
        transfer_id: &str,
        headers: Option<&HeaderMap>,
    ) -> Result<Bytes, TransferError> {
        if wire::owner_of(transfer_id) == Some(self.owner.as_str()) {
            let caller = self.shared.caller(headers)?;
            return self.shared.sessions().take_upload(&caller, transfer_id);
        }
        let mut forwarded = HeaderMap::new();
        for name in std::iter::once(abi_wire::AUTH_HEADER).chain(TRACE_HEADERS) {
            if let Some(value) = headers.and_then(|h| h.get(name)) {
                forwarded.insert(name, value.as_str());
            }
        }
        let caller = Caller::new(
            self.shared.client.clone(),
            forwarded,
            Duration::from_secs(wire::FETCH_TIMEOUT_SECONDS),
        );
        let limit = self.shared.sessions().limits().max_value_bytes;
        caller.read_upload(transfer_id, limit).await
    }

    /// Stops serving: unsubscribes, then waits (at most a second) for the
    /// broker to have dropped the subjects. Open sessions are dropped.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the subscriptions end either way.
    pub async fn stop(self) {
        self.task.abort();
        let client = self.shared.client.clone();
        drop(self);
        if tokio::time::timeout(STOP_FLUSH, client.flush())
            .await
            .is_err()
        {
            debug!("the broker did not confirm the overflow host's unsubscribes in time");
        }
    }
}

/// Answers every transfer request, and drops idle sessions.
async fn serve(
    shared: Arc<Shared>,
    mut requests: impl futures::Stream<Item = (TransferOp, Message)> + Unpin,
) {
    let mut expiry = tokio::time::interval(EXPIRY_TICK);
    loop {
        tokio::select! {
            next = requests.next() => {
                let Some((op, message)) = next else { break };
                let Some(reply) = message.reply.clone() else { continue };
                let Some(answer) = answer(&shared, op, &message) else { continue };
                if let Err(error) = shared.client.publish(reply, answer.into()).await {
                    warn!(%error, "could not answer an overflow transfer request");
                }
            }
            _ = expiry.tick() => {
                let expired = shared.sessions().expire(Instant::now());
                if expired > 0 {
                    debug!(expired, "overflow sessions expired");
                }
            }
        }
    }
}

/// The encoded answer to one request; `None` when another host owns the
/// session it names (on a shared subject, only the owner answers).
fn answer(shared: &Shared, op: TransferOp, message: &Message) -> Option<Vec<u8>> {
    let body = message.payload.as_ref();
    let headers = message.headers.as_ref();
    Some(match op {
        TransferOp::Open => run(
            shared,
            headers,
            body,
            decode(body, |s, caller, r: pb::OpenRequest| {
                let key = uuid::Uuid::new_v4().simple().to_string();
                let (id, chunk_bytes) = s.open(
                    caller,
                    &r.operation,
                    r.metadata.len(),
                    r.chunk_bytes,
                    &key,
                    Instant::now(),
                )?;
                Ok(pb::OpenResponse {
                    id,
                    chunk_bytes,
                    error: None,
                })
            }),
        ),
        TransferOp::Write => run(
            shared,
            headers,
            body,
            owned(shared, body, |s, caller, r: pb::WriteRequest| {
                s.write(caller, &r.id, r.sequence, &r.data, Instant::now())?;
                Ok(pb::WriteResponse::default())
            })?,
        ),
        TransferOp::Start => run(
            shared,
            headers,
            body,
            owned(shared, body, |s, caller, r: pb::StartRequest| {
                s.start(caller, &r.id, Instant::now())?;
                Ok(pb::StartResponse::default())
            })?,
        ),
        TransferOp::Read => run(
            shared,
            headers,
            body,
            owned(shared, body, |s, caller, r: pb::ReadRequest| {
                let chunk = s.read(caller, &r.id, r.sequence, Instant::now())?;
                Ok(pb::ReadResponse {
                    data: chunk.data.to_vec(),
                    sequence: chunk.sequence,
                    frame_end: chunk.frame_end,
                    pending: false,
                    done: chunk.done,
                    error: None,
                })
            })?,
        ),
        TransferOp::Close => run(
            shared,
            headers,
            body,
            owned(shared, body, |s, caller, r: pb::CloseRequest| {
                s.close(caller, &r.id)?;
                Ok(pb::CloseResponse::default())
            })?,
        ),
    })
}

/// A request naming a session.
trait Addressed: prost::Message + Default {
    fn id(&self) -> &str;
}

macro_rules! addressed {
    ($($t:ty),*) => {$(
        impl Addressed for $t {
            fn id(&self) -> &str {
                &self.id
            }
        }
    )*};
}

addressed!(
    pb::WriteRequest,
    pb::StartRequest,
    pb::ReadRequest,
    pb::CloseRequest
);

/// An operation on sessions, given its caller.
type Operation<'b, Resp> = Box<dyn FnOnce(&mut Sessions, &str) -> Result<Resp, TransferError> + 'b>;

/// `op` over the decoded request (a malformed one refused once the caller
/// is known, as the reference orders it).
fn decode<'b, Req, Resp>(
    body: &[u8],
    op: impl FnOnce(&mut Sessions, &str, Req) -> Result<Resp, TransferError> + 'b,
) -> Operation<'b, Resp>
where
    Req: prost::Message + Default + 'b,
{
    let decoded = Req::decode(body);
    Box::new(move |sessions, caller| {
        let request = decoded.map_err(|_| TransferError::invalid())?;
        op(sessions, caller, request)
    })
}

/// As [`decode`], `None` when the request names another host's session.
fn owned<'b, Req, Resp>(
    shared: &Shared,
    body: &[u8],
    op: impl FnOnce(&mut Sessions, &str, Req) -> Result<Resp, TransferError> + 'b,
) -> Option<Operation<'b, Resp>>
where
    Req: Addressed + 'b,
{
    if let Ok(request) = Req::decode(body) {
        let owner = wire::owner_of(request.id());
        if owner.is_some_and(|o| o != shared.sessions().owner()) {
            return None;
        }
    }
    Some(decode(body, op))
}

/// Checks the caller's token and the packet's size, runs `op` on the
/// sessions, and encodes the outcome (a refusal in the reply's `error`).
fn run<Resp: TransferReply>(
    shared: &Shared,
    headers: Option<&HeaderMap>,
    body: &[u8],
    op: Operation<'_, Resp>,
) -> Vec<u8> {
    let max_payload = shared.client.max_payload();
    let outcome = shared.caller(headers).and_then(|caller| {
        if body.len() > max_payload {
            return Err(TransferError::new(
                ErrorCode::PayloadTooLarge,
                "Transfer packet exceeds broker limit",
            ));
        }
        op(&mut shared.sessions(), &caller)
    });
    match outcome {
        Ok(response) => response.encode_to_vec(),
        Err(err) => Resp::failed(common::CallError {
            code: err.code.as_str().to_owned(),
            message: err.message,
            retryable: false,
            ..Default::default()
        })
        .encode_to_vec(),
    }
}
