//! One request to a module instance's own subject (an agent operation, a
//! chat, an app request): the caller's token bound to that instance in
//! `Nats-Auth-Token`, one deadline, the transport's failures as typed
//! errors, the reply decoded. The agents, models and apps clients share it;
//! what a reply's `CallError` means stays theirs.

use std::time::Duration;

use async_nats::{HeaderMap, RequestErrorKind};
use bytes::Bytes;

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
    let request = async_nats::Request::new()
        .headers(headers)
        .payload(payload)
        .timeout(Some(timeout));
    let reply = match tokio::time::timeout(timeout, nats.send_request(subject.to_owned(), request))
        .await
    {
        Ok(Ok(reply)) => reply,
        Ok(Err(e)) => {
            let kind = match e.kind() {
                RequestErrorKind::NoResponders => CallErrorKind::NoResponders,
                RequestErrorKind::TimedOut => CallErrorKind::TimedOut,
                RequestErrorKind::MaxPayloadExceeded => CallErrorKind::PayloadTooLarge,
                _ => CallErrorKind::Transport,
            };
            return Err(CallError::new(kind, format!("request to {subject} failed")).with_source(e));
        }
        Err(_) => {
            return Err(CallError::new(
                CallErrorKind::TimedOut,
                format!("no reply on {subject} before the deadline"),
            ));
        }
    };
    Resp::decode(reply.payload.as_ref()).map_err(|e| {
        CallError::new(
            CallErrorKind::Decode,
            format!("malformed reply on {subject}"),
        )
        .with_source(e)
    })
}
