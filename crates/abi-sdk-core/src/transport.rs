//! One request/reply exchange with the discovery service.
//!
//! Each call carries the `Nats-Auth-Token` header and a fresh `CallContext`,
//! has one deadline, and turns the reply's `CallError` into a typed error.
//! A "no responders" answer on the service's queue group means an owner is
//! handing over; the request was not delivered, so it is sent again for a
//! short while, stopping just before the caller's deadline. A request above
//! the broker's max payload is uploaded first and a parked reply downloaded
//! (RPC overflow, as the reference's clients do it).
//!
//! The bytes travel over NATS, or to an in-process [`LocalDiscovery`] (the
//! test kit); everything else is the same for both.

use std::sync::Arc;
use std::time::Duration;

use abi_overflow::{Caller, TransferError, frame};
use abi_process::traces;
use abi_proto::common::v1 as common;
use abi_wire::overflow;
use async_nats::{HeaderMap, RequestErrorKind};
use bytes::Bytes;
use prost::Message;
use tokio::time::Instant;
use tracing::{Instrument as _, debug};

use crate::error::{CallError, CallErrorKind};
use crate::ids;
use crate::local::{LocalDiscovery, LocalError};
use crate::subjects;
use crate::token::TokenSource;

/// How long a request is sent again while nobody serves the subject.
const NO_RESPONDERS_RETRY: Duration = Duration::from_secs(5);
/// The last resend lands this long before the deadline, so the caller sees
/// "no responders" (nobody serves) rather than a bare timeout.
const DEADLINE_MARGIN: Duration = Duration::from_millis(500);
const FIRST_RESEND_DELAY: Duration = Duration::from_millis(50);
const MAX_RESEND_DELAY: Duration = Duration::from_millis(500);

use abi_wire::rpc::Reply;
pub(crate) use abi_wire::rpc::Rpc;

/// Where requests go.
#[derive(Clone, Debug)]
pub(crate) enum Link {
    /// A NATS connection (production).
    Nats(async_nats::Client),
    /// A service in this process (the test kit).
    Local(Arc<dyn LocalDiscovery>),
}

/// The link, the token source and the per-call deadline.
#[derive(Clone, Debug)]
pub(crate) struct Transport {
    link: Link,
    token: Arc<TokenSource>,
    timeout: Duration,
}

impl Transport {
    pub(crate) fn new(link: Link, token: Arc<TokenSource>, timeout: Duration) -> Self {
        Self {
            link,
            token,
            timeout,
        }
    }

    pub(crate) fn link(&self) -> &Link {
        &self.link
    }

    pub(crate) fn token(&self) -> Arc<TokenSource> {
        self.token.clone()
    }

    /// Sends `request` to discovery `project` and decodes the answer.
    ///
    /// # Cancel safety
    ///
    /// Cancelling drops the request; a mutation may still have been applied.
    pub(crate) async fn call<R: Rpc>(
        &self,
        project: &str,
        request: &R,
    ) -> Result<R::Response, CallError> {
        let subject = subjects::discovery(project, R::OPERATION.as_str());
        let mut outgoing = request.clone();
        outgoing.set_context(self.context());
        let local = Some((project, R::OPERATION.as_str()));
        self.exchange(&subject, outgoing.encode_to_vec(), local)
            .await
    }

    /// Sends an encoded request to `subject` and decodes its `Resp` reply,
    /// a refusal left in it (for replies that say more beside it). `local`
    /// names the project and operation for an in-process service; without it
    /// (a service other than discovery), an in-process link has nobody to
    /// send to.
    ///
    /// # Cancel safety
    ///
    /// Cancelling drops the request; a mutation may still have been applied.
    pub(crate) async fn exchange_reply<Resp>(
        &self,
        subject: &str,
        payload: Vec<u8>,
        local: Option<(&str, &'static str)>,
    ) -> Result<Resp, CallError>
    where
        Resp: Message + Default + Reply,
    {
        self.exchange_reply_told(subject, payload, local, None)
            .await
    }

    /// [`Self::exchange`] of a put that asks for its early word on
    /// `decided_to` ([`abi_wire::documents::DECIDED_HEADER`]).
    ///
    /// # Cancel safety
    ///
    /// As [`Self::exchange`].
    pub(crate) async fn exchange_told<Resp>(
        &self,
        subject: &str,
        payload: Vec<u8>,
        decided_to: &str,
    ) -> Result<Resp, CallError>
    where
        Resp: Message + Default + Reply,
    {
        let response: Resp = self
            .exchange_reply_told(subject, payload, None, Some(decided_to))
            .await?;
        if let Some(error) = response.call_error() {
            return Err(refusal(error));
        }
        Ok(response)
    }

    /// [`Self::exchange_reply`], its request asking for a put's early word
    /// on `decided_to` when given.
    async fn exchange_reply_told<Resp>(
        &self,
        subject: &str,
        payload: Vec<u8>,
        local: Option<(&str, &'static str)>,
        decided_to: Option<&str>,
    ) -> Result<Resp, CallError>
    where
        Resp: Message + Default + Reply,
    {
        let token = self.token.token()?;
        let payload = Bytes::from(payload);
        let started = Instant::now();
        // A CLIENT span per call, its context carried on in the headers
        // (disabled, and free, when traces are not exported).
        let span = traces::message_span(traces::Kind::Client, subject, None);
        let answer = self.exchange_in(subject, token, payload, (local, decided_to), started, &span);
        // Boxed: under it, the NATS client's request and what sends it
        // (over a KiB); above it, every caller's future (a document put's,
        // a job run's), which would otherwise carry that inline and copy it
        // whole each time one is created and moved into its caller.
        let answer = Box::pin(answer).instrument(span.clone()).await;
        match &answer {
            Ok(reply) => traces::record_reply(&span, reply.len()),
            Err(err) => traces::record_error(&span, trace_code(err), &err.to_string()),
        }
        let reply = answer?;
        let response = Resp::decode(reply.as_ref()).map_err(|e| {
            CallError::new(
                CallErrorKind::Decode,
                format!("malformed reply on {subject}"),
            )
            .with_source(e)
        })?;
        if let Some(error) = response.call_error() {
            traces::record_error(&span, &error.code, &error.message);
        }
        Ok(response)
    }

    /// [`Self::exchange_reply`], a refusal in the reply being a typed error.
    ///
    /// # Cancel safety
    ///
    /// Cancelling drops the request; a mutation may still have been applied.
    pub(crate) async fn exchange<Resp>(
        &self,
        subject: &str,
        payload: Vec<u8>,
        local: Option<(&str, &'static str)>,
    ) -> Result<Resp, CallError>
    where
        Resp: Message + Default + Reply,
    {
        let response: Resp = self.exchange_reply(subject, payload, local).await?;
        if let Some(error) = response.call_error() {
            return Err(refusal(error));
        }
        Ok(response)
    }

    /// The reply's bytes, over the link this transport has.
    async fn exchange_in(
        &self,
        subject: &str,
        token: String,
        payload: Bytes,
        (local, decided_to): (Option<(&str, &'static str)>, Option<&str>),
        started: Instant,
        span: &tracing::Span,
    ) -> Result<Bytes, CallError> {
        let reply = match (&self.link, local) {
            (Link::Nats(client), _) => {
                let sent = Sent {
                    token: &token,
                    decided_to,
                    started,
                };
                self.send_nats(client, subject, sent, payload, span).await?
            }
            (Link::Local(service), Some((project, operation))) => {
                self.send_local(service.as_ref(), project, operation, &token, payload)
                    .await?
            }
            (Link::Local(_), None) => {
                return Err(CallError::new(
                    CallErrorKind::NoResponders,
                    format!("{subject} is served over NATS only"),
                ));
            }
        };
        debug!(subject = %subject, elapsed_ms = started.elapsed().as_millis() as u64, "call answered");
        Ok(reply)
    }

    /// A fresh call envelope: a trace id and the deadline.
    pub(crate) fn context(&self) -> common::CallContext {
        common::CallContext {
            trace_id: ids::uuid4(),
            timeout_ms: i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX),
            ..Default::default()
        }
    }
}

impl Transport {
    /// Sends over NATS, resending while nobody serves the queue group: a
    /// request above the broker's max payload is uploaded first, a parked
    /// reply downloaded (RPC overflow, [`abi_overflow`]).
    async fn send_nats(
        &self,
        client: &async_nats::Client,
        subject: &str,
        sent: Sent<'_>,
        payload: Bytes,
        span: &tracing::Span,
    ) -> Result<Bytes, CallError> {
        let Sent {
            token,
            decided_to,
            started,
        } = sent;
        let headers = call_headers(token, span, None, decided_to);
        span.record(abi_wire::trace::attribute::BODY_SIZE, payload.len());
        // The chunk exchanges carry the token only (built when a message
        // overflows).
        let transfers = || {
            let mut auth = HeaderMap::new();
            auth.insert(abi_auth::AUTH_HEADER, token);
            Caller::new(client.clone(), auth, self.timeout)
        };
        let max_payload = client.max_payload();
        let mut upload = None;
        let payload = if max_payload > 0 && !frame::fits(payload.len(), &headers, max_payload) {
            if !overflow::possible(max_payload) || payload.len() > overflow::MAX_VALUE_BYTES {
                return Err(transfer_failed(TransferError::too_large(
                    payload.len(),
                    max_payload,
                )));
            }
            // The transfers are boxed, here and below: they are rare, and
            // their futures would otherwise weigh on every call's.
            let id = Box::pin(transfers().upload(&payload, overflow::chunk_size(max_payload)))
                .await
                .map_err(transfer_failed)?;
            upload = Some(id);
            Bytes::new()
        } else {
            payload
        };
        let headers = match &upload {
            None => headers,
            Some(id) => call_headers(token, span, Some(id), decided_to),
        };
        let again = || call_headers(token, span, upload.as_deref(), decided_to);
        let answered = self
            .send_headed(client, subject, headers, &again, payload, started)
            .await;
        if let Some(id) = upload {
            // The service released it when it read it; this covers a
            // service that never did.
            Box::pin(transfers().close(&id)).await;
        }
        let reply = answered?;
        match frame::parked_reply(reply.headers.as_ref()) {
            None => Ok(reply.payload),
            Some((id, Some(size))) => Box::pin(transfers().download(id, size))
                .await
                .map_err(transfer_failed),
            Some((id, None)) => {
                Box::pin(transfers().close(id)).await;
                Err(CallError::new(
                    CallErrorKind::Decode,
                    format!("a parked reply on {subject} without a valid size"),
                ))
            }
        }
    }

    /// Sends one request with `headers`, resending while nobody serves the
    /// queue group (each resend with the headers `again` builds: a request
    /// takes its headers, and copying them for a resend that seldom comes
    /// cost more than building them twice when it does); the reply whole
    /// (its headers too).
    async fn send_headed(
        &self,
        client: &async_nats::Client,
        subject: &str,
        headers: HeaderMap,
        again: &(dyn Fn() -> HeaderMap + Sync),
        payload: Bytes,
        started: Instant,
    ) -> Result<async_nats::Message, CallError> {
        let mut headers = Some(headers);
        let deadline = started + self.timeout;
        let resend_until =
            started + NO_RESPONDERS_RETRY.min(self.timeout.saturating_sub(DEADLINE_MARGIN));
        let resend = subjects::served_by_queue_group(subject);
        let mut delay = FIRST_RESEND_DELAY;
        let reply = loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let request = async_nats::Request::new()
                .headers(headers.take().unwrap_or_else(again))
                .payload(payload.clone())
                .timeout(Some(remaining));
            let sent =
                tokio::time::timeout_at(deadline, client.send_request(subject.to_owned(), request))
                    .await;
            match sent {
                Ok(Ok(reply)) => break reply,
                Ok(Err(err)) if err.kind() == RequestErrorKind::NoResponders => {
                    let now = Instant::now();
                    if !resend || now >= resend_until {
                        return Err(CallError::new(
                            CallErrorKind::NoResponders,
                            format!("nobody serves {subject}"),
                        ));
                    }
                    tokio::time::sleep(delay.min(resend_until - now)).await;
                    delay = (delay * 2).min(MAX_RESEND_DELAY);
                }
                Ok(Err(err)) if err.kind() == RequestErrorKind::TimedOut => {
                    return Err(timed_out(subject));
                }
                Ok(Err(err)) => {
                    let kind = match err.kind() {
                        RequestErrorKind::MaxPayloadExceeded => CallErrorKind::PayloadTooLarge,
                        _ => CallErrorKind::Transport,
                    };
                    return Err(CallError::new(kind, format!("request to {subject} failed"))
                        .with_source(err));
                }
                Err(_) => return Err(timed_out(subject)),
            }
        };
        if let Some(headers) = &reply.headers {
            // A NATS micro-service framework error instead of a protobuf reply.
            if let Some(code) = headers.get("Nats-Service-Error-Code") {
                let code = code.as_str().to_owned();
                let message = headers
                    .get("Nats-Service-Error")
                    .map(|m| m.as_str().to_owned())
                    .unwrap_or_else(|| "remote error".into());
                return Err(
                    CallError::new(CallErrorKind::from_code(&code), message).with_code(code)
                );
            }
        }
        Ok(reply)
    }

    /// Hands the request to the in-process service, with the same deadline.
    async fn send_local(
        &self,
        service: &dyn LocalDiscovery,
        project: &str,
        operation: &'static str,
        token: &str,
        payload: Bytes,
    ) -> Result<Bytes, CallError> {
        let answered = tokio::time::timeout(
            self.timeout,
            service.request(project, operation, token, payload),
        )
        .await;
        match answered {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(err @ LocalError::NoService(_))) => {
                Err(CallError::new(CallErrorKind::NoResponders, err.to_string()))
            }
            Ok(Err(err)) => Err(CallError::new(CallErrorKind::Transport, err.to_string())),
            Err(_) => Err(timed_out(&subjects::discovery(project, operation))),
        }
    }
}

/// A call's headers: the token, the trace context, that the caller reads
/// a parked reply (as the reference's clients all do), and the upload that
/// holds an overflowed request's body.
fn call_headers(
    token: &str,
    span: &tracing::Span,
    upload: Option<&str>,
    decided_to: Option<&str>,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(abi_auth::AUTH_HEADER, token);
    traces::inject(span, &mut headers);
    headers.insert(overflow::ACCEPT_HEADER, overflow::ACCEPT_VALUE);
    if let Some(id) = upload {
        headers.insert(overflow::REQUEST_HEADER, id);
    }
    if let Some(subject) = decided_to {
        headers.insert(abi_wire::documents::DECIDED_HEADER, subject);
    }
    headers
}

/// Who sends a request over NATS, and when it began.
#[derive(Clone, Copy)]
struct Sent<'a> {
    /// The token it is signed with.
    token: &'a str,
    /// Where a put's early word goes ([`abi_wire::documents::DECIDED_HEADER`]).
    decided_to: Option<&'a str>,
    /// When the call began (its deadline counts from here).
    started: Instant,
}

/// A transfer's failure as a call's: its wire code, its message.
fn transfer_failed(err: TransferError) -> CallError {
    CallError::new(CallErrorKind::from(err.code), err.message).with_code(err.code.as_str())
}

fn timed_out(subject: &str) -> CallError {
    CallError::new(
        CallErrorKind::TimedOut,
        format!("no reply on {subject} before the deadline"),
    )
}

/// The wire code a failed call is recorded with on its span: the service's
/// own, or the one its kind stands for when nothing answered.
fn trace_code(err: &CallError) -> &str {
    err.code().unwrap_or(match err.kind() {
        CallErrorKind::TimedOut => abi_wire::ErrorCode::DeadlineExceeded.as_str(),
        CallErrorKind::PayloadTooLarge => abi_wire::ErrorCode::PayloadTooLarge.as_str(),
        CallErrorKind::Decode | CallErrorKind::Token => abi_wire::ErrorCode::Internal.as_str(),
        _ => abi_wire::ErrorCode::Unavailable.as_str(),
    })
}

/// A refusal carried in a reply, as a typed error.
pub(crate) fn refusal(error: &abi_proto::common::v1::CallError) -> CallError {
    CallError::new(CallErrorKind::from_code(&error.code), error.message.clone())
        .with_code(error.code.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_call_carries_its_token_says_it_reads_parked_replies_and_names_its_upload() {
        let span = tracing::Span::none();
        let plain = call_headers("tok", &span, None, None);
        assert_eq!(plain.get(abi_auth::AUTH_HEADER).unwrap().as_str(), "tok");
        assert_eq!(
            plain.get(overflow::ACCEPT_HEADER).unwrap().as_str(),
            overflow::ACCEPT_VALUE
        );
        assert!(plain.get(overflow::REQUEST_HEADER).is_none());
        assert!(plain.get(abi_wire::documents::DECIDED_HEADER).is_none());
        let told = call_headers("tok", &span, None, Some("_INBOX.x"));
        assert_eq!(
            told.get(abi_wire::documents::DECIDED_HEADER)
                .unwrap()
                .as_str(),
            "_INBOX.x"
        );
        let uploaded = call_headers("tok", &span, Some("u1"), None);
        assert_eq!(
            uploaded.get(overflow::REQUEST_HEADER).unwrap().as_str(),
            "u1"
        );
        // A resend builds the same headers again.
        assert_eq!(call_headers("tok", &span, Some("u1"), None), uploaded);
    }
}
