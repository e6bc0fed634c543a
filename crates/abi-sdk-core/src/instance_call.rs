//! One request to a module instance's own subject (an agent operation, a
//! chat, an app request): the caller's token bound to that instance in
//! `Nats-Auth-Token`, one deadline, the transport's failures as typed
//! errors, the reply decoded. The agents, models and apps clients share it;
//! what a reply's `CallError` means stays theirs.

use std::time::Duration;

use abi_wire::ErrorCode;
use async_nats::{HeaderMap, RequestErrorKind};
use bytes::Bytes;
use tracing::Instrument as _;

use crate::error::{CallError, CallErrorKind};

/// Sends `payload` to `subject` with `token`, waits at most `timeout`, and
/// decodes the reply as `Resp`.
///
/// # Errors
///
/// `NoResponders` (nobody serves the subject: the handler never ran),
/// `TimedOut`, `PayloadTooLarge`, `Transport`, or `Decode`.
///
/// # Cancel safety
///
/// Cancelling drops the request; the instance may still act on it.
pub async fn call_instance<Resp: prost::Message + Default>(
    nats: &async_nats::Client,
    subject: &str,
    token: &str,
    payload: Bytes,
    timeout: Duration,
) -> Result<Resp, CallError> {
    let mut headers = HeaderMap::new();
    headers.insert(abi_wire::AUTH_HEADER, token);
    let span = abi_process::traces::client_span(subject, payload.len(), &mut headers);
    let request = async_nats::Request::new()
        .headers(headers)
        .payload(payload)
        .timeout(Some(timeout));
    let sent = nats
        .send_request(subject.to_owned(), request)
        .instrument(span.clone());
    let reply = match tokio::time::timeout(timeout, sent).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => {
            let (kind, code) = match e.kind() {
                RequestErrorKind::NoResponders => {
                    (CallErrorKind::NoResponders, ErrorCode::Unavailable)
                }
                RequestErrorKind::TimedOut => {
                    (CallErrorKind::TimedOut, ErrorCode::DeadlineExceeded)
                }
                RequestErrorKind::MaxPayloadExceeded => {
                    (CallErrorKind::PayloadTooLarge, ErrorCode::PayloadTooLarge)
                }
                _ => (CallErrorKind::Transport, ErrorCode::Unavailable),
            };
            abi_process::traces::record_error(&span, code.as_str(), &e.to_string());
            return Err(CallError::new(kind, format!("request to {subject} failed")).with_source(e));
        }
        Err(_) => {
            abi_process::traces::record_error(&span, ErrorCode::DeadlineExceeded.as_str(), "");
            return Err(CallError::new(
                CallErrorKind::TimedOut,
                format!("no reply on {subject} before the deadline"),
            ));
        }
    };
    abi_process::traces::record_reply(&span, reply.payload.len());
    Resp::decode(reply.payload.as_ref()).map_err(|e| {
        CallError::new(
            CallErrorKind::Decode,
            format!("malformed reply on {subject}"),
        )
        .with_source(e)
    })
}
