//! The calling side of transfers: one protobuf exchange with an overflow
//! host, and the three walks over a session built on it (upload a request,
//! download a parked reply, read an upload for the service it was sent to).
//! Nothing here retries: a transfer operation is never replayed.

use std::time::Duration;

use abi_proto::common::v1 as common;
use abi_proto::transfer::v1 as pb;
use abi_wire::ErrorCode;
use abi_wire::overflow::{self as wire, TransferOp};
use async_nats::{HeaderMap, RequestErrorKind};
use bytes::{Bytes, BytesMut};
use prost::Message;
use tracing::warn;

use crate::error::TransferError;

/// A transfer reply's `CallError`.
pub(crate) trait TransferReply: Message + Default {
    fn error(&self) -> Option<&common::CallError>;
    fn failed(error: common::CallError) -> Self;
}

macro_rules! transfer_reply {
    ($($t:ty),*) => {$(
        impl TransferReply for $t {
            fn error(&self) -> Option<&common::CallError> {
                self.error.as_ref()
            }
            fn failed(error: common::CallError) -> Self {
                let mut reply = Self::default();
                reply.error = Some(error);
                reply
            }
        }
    )*};
}

transfer_reply!(
    pb::OpenResponse,
    pb::WriteResponse,
    pb::StartResponse,
    pb::ReadResponse,
    pb::CloseResponse
);

/// Who calls, and how: the connection, the headers every exchange carries
/// (the caller's token, a trace's context) and each exchange's deadline.
#[derive(Debug, Clone)]
pub struct Caller {
    client: async_nats::Client,
    headers: HeaderMap,
    timeout: Duration,
}

impl Caller {
    /// Exchanges over `client` carrying `headers` (at least the caller's
    /// `Nats-Auth-Token`: sessions are bound to it), each within `timeout`.
    pub fn new(client: async_nats::Client, headers: HeaderMap, timeout: Duration) -> Self {
        Self {
            client,
            headers,
            timeout,
        }
    }

    /// One exchange of `op` on session `id` (empty for `open`).
    async fn call<Resp: TransferReply>(
        &self,
        op: TransferOp,
        id: &str,
        request: impl Message,
    ) -> Result<Resp, TransferError> {
        let subject = wire::subject(op, id).ok_or_else(|| {
            TransferError::new(ErrorCode::InvalidArgument, "Invalid transfer owner")
        })?;
        let sent = self.client.send_request(
            subject,
            async_nats::Request::new()
                .headers(self.headers.clone())
                .payload(request.encode_to_vec().into())
                .timeout(Some(self.timeout)),
        );
        let reply = match sent.await {
            Ok(reply) => reply,
            Err(err) => {
                return Err(match err.kind() {
                    RequestErrorKind::NoResponders => TransferError::new(
                        ErrorCode::Unavailable,
                        format!("No overflow host answers {}", wire::PREFIX),
                    ),
                    RequestErrorKind::TimedOut => TransferError::new(
                        ErrorCode::DeadlineExceeded,
                        "The overflow host did not answer in time",
                    ),
                    _ => TransferError::new(
                        ErrorCode::Unavailable,
                        format!("Overflow transfer failed: {err}"),
                    ),
                });
            }
        };
        let response = Resp::decode(reply.payload.as_ref()).map_err(|_| {
            TransferError::new(ErrorCode::Internal, "Malformed overflow transfer reply")
        })?;
        if let Some(error) = response.error() {
            let code = ErrorCode::from_wire(&error.code).unwrap_or(ErrorCode::Internal);
            return Err(TransferError::new(code, error.message.clone()));
        }
        Ok(response)
    }

    fn context(&self) -> Option<common::CallContext> {
        Some(common::CallContext {
            timeout_ms: i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX),
            ..Default::default()
        })
    }

    /// Uploads `payload`, a request above the broker's limit, in chunks of
    /// `chunk_bytes`; returns the transfer id to send with the call. The
    /// session stays open for the service to read: [`Caller::close`] it
    /// after the call. Memory: one chunk's copy at a time.
    ///
    /// # Errors
    ///
    /// The host's refusal (its code and message), or `UNAVAILABLE` when no
    /// host answers; a failed upload is closed before returning.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the session stays open until the
    /// host's idle expiry.
    pub async fn upload(
        &self,
        payload: &Bytes,
        chunk_bytes: usize,
    ) -> Result<String, TransferError> {
        let opened: pb::OpenResponse = self
            .call(
                TransferOp::Open,
                "",
                pb::OpenRequest {
                    context: self.context(),
                    operation: wire::UPLOAD_OPERATION.to_owned(),
                    metadata: Vec::new(),
                    chunk_bytes: u32::try_from(chunk_bytes).unwrap_or(u32::MAX),
                },
            )
            .await?;
        let granted = usize::try_from(opened.chunk_bytes).unwrap_or(0);
        if granted == 0 {
            self.close(&opened.id).await;
            return Err(TransferError::new(
                ErrorCode::Internal,
                "The overflow host granted no chunk size",
            ));
        }
        let written = self.write_all(&opened.id, payload, granted).await;
        if let Err(err) = written {
            self.close(&opened.id).await;
            return Err(err);
        }
        Ok(opened.id)
    }

    async fn write_all(
        &self,
        id: &str,
        payload: &Bytes,
        chunk_bytes: usize,
    ) -> Result<(), TransferError> {
        let mut sequence = 0u64;
        let mut offset = 0;
        while offset < payload.len() {
            let end = (offset + chunk_bytes).min(payload.len());
            let _: pb::WriteResponse = self
                .call(
                    TransferOp::Write,
                    id,
                    pb::WriteRequest {
                        context: self.context(),
                        id: id.to_owned(),
                        sequence,
                        data: payload.slice(offset..end).to_vec(),
                    },
                )
                .await?;
            sequence += 1;
            offset = end;
        }
        Ok(())
    }

    /// Downloads the parked reply `id` of `size` bytes (as announced), then
    /// releases it.
    ///
    /// # Errors
    ///
    /// `PAYLOAD_TOO_LARGE` when `size` is above the overflow limit, `INTERNAL`
    /// when the bytes read are not `size`, or the host's refusal.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the reply stays parked until the
    /// host's idle expiry.
    pub async fn download(&self, id: &str, size: usize) -> Result<Bytes, TransferError> {
        let read = async {
            if size > wire::MAX_VALUE_BYTES {
                return Err(TransferError::too_large(size, self.client.max_payload()));
            }
            let data = self.read_to_end(id, size).await?;
            if data.len() != size {
                return Err(TransferError::new(
                    ErrorCode::Internal,
                    format!("overflow reply has {} bytes, announced {size}", data.len()),
                ));
            }
            Ok(data)
        }
        .await;
        self.close(id).await;
        read
    }

    /// Reads the upload `id` a caller sent with its request (for the
    /// service the request reached): starts it, reads it whole (at most
    /// `limit` bytes), releases it.
    ///
    /// # Errors
    ///
    /// `NOT_FOUND` when the upload's owner is gone, `PAYLOAD_TOO_LARGE`
    /// above `limit`, or the host's refusal.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped midway, the upload stays open until the
    /// host's idle expiry.
    pub async fn read_upload(&self, id: &str, limit: usize) -> Result<Bytes, TransferError> {
        let read = async {
            let _: pb::StartResponse = self
                .call(
                    TransferOp::Start,
                    id,
                    pb::StartRequest {
                        context: self.context(),
                        id: id.to_owned(),
                    },
                )
                .await
                .map_err(owner_gone)?;
            let data = self.read_to_end(id, limit).await.map_err(owner_gone)?;
            if data.len() > limit {
                return Err(TransferError::new(
                    ErrorCode::PayloadTooLarge,
                    "Request exceeds the overflow value limit",
                ));
            }
            Ok(data)
        }
        .await;
        self.close(id).await;
        read
    }

    /// Every chunk of session `id`, stopping once more than `limit` bytes
    /// came (so a lying host cannot make it hold more).
    async fn read_to_end(&self, id: &str, limit: usize) -> Result<Bytes, TransferError> {
        let mut data = BytesMut::with_capacity(limit.min(wire::MAX_VALUE_BYTES));
        let mut sequence = 0u64;
        loop {
            let chunk: pb::ReadResponse = self
                .call(
                    TransferOp::Read,
                    id,
                    pb::ReadRequest {
                        context: self.context(),
                        id: id.to_owned(),
                        sequence,
                    },
                )
                .await?;
            if chunk.sequence != sequence {
                return Err(TransferError::new(
                    ErrorCode::Internal,
                    "Transfer sequence mismatch",
                ));
            }
            if chunk.done {
                return Ok(data.freeze());
            }
            if chunk.pending {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            data.extend_from_slice(&chunk.data);
            sequence += 1;
            if data.len() > limit {
                return Ok(data.freeze());
            }
        }
    }

    /// Releases session `id`; a failure is logged (the host's idle expiry
    /// then releases it), never returned: cleanup cannot replace the call's
    /// own outcome.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the session is released now or by its expiry.
    pub async fn close(&self, id: &str) {
        let closed: Result<pb::CloseResponse, _> = self
            .call(
                TransferOp::Close,
                id,
                pb::CloseRequest {
                    context: self.context(),
                    id: id.to_owned(),
                },
            )
            .await;
        if let Err(error) = closed {
            warn!(%error, "could not close an overflow transfer; idle expiry applies");
        }
    }
}

/// Nobody answering for an upload's owner means the owner is gone.
fn owner_gone(err: TransferError) -> TransferError {
    if err.code == ErrorCode::Unavailable {
        TransferError::new(ErrorCode::NotFound, "The overflow upload's owner is gone")
    } else {
        err
    }
}
