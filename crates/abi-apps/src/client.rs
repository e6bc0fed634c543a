//! [`AppClient`]: calling a web app a module serves (the reference's
//! `call_app`, with the instance picked for the caller): an `http` request
//! in, an `http` response out, bodies above the inline limit streamed both
//! ways. An instance that refuses before its app ran (`MODULE_UNAVAILABLE`:
//! draining or full; nobody subscribed) is passed over for the next.

use std::sync::Arc;
use std::time::Duration;

use abi_proto::app::v1 as pb;
use abi_proto::common::v1 as common;
use abi_sdk_core::routes::Routes;
use abi_sdk_core::{BoundSigner, CallError, CallErrorKind, ModuleProxy};
use abi_wire::ErrorCode;
use abi_wire::apps as wire;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use http_body_util::BodyExt as _;
use prost::Message as _;

use crate::stream::{self, Held};

/// How long one app call may take unless set otherwise (its upload too).
pub const DEFAULT_APP_TIMEOUT: Duration = Duration::from_secs(120);

/// A web app served by a module; cheap to clone.
#[derive(Clone)]
pub struct AppClient {
    proxy: ModuleProxy,
    name: String,
    signer: BoundSigner,
    timeout: Duration,
    user: (String, String),
    root_path: String,
    routes: Arc<Routes>,
}

impl std::fmt::Debug for AppClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppClient")
            .field("module_id", &self.proxy.module_id())
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The app clients of a module proxy.
pub trait AppsExt {
    /// The web app `name` of this module (no lookup until the first call).
    fn web_app(&self, name: impl Into<String>) -> AppClient;
}

impl AppsExt for ModuleProxy {
    fn web_app(&self, name: impl Into<String>) -> AppClient {
        let tokens = self.client().token();
        AppClient {
            proxy: self.clone(),
            name: name.into(),
            signer: Arc::new(move |audience| tokens.for_audience(audience)),
            timeout: DEFAULT_APP_TIMEOUT,
            user: (String::new(), String::new()),
            root_path: String::new(),
            routes: Arc::new(Routes::new()),
        }
    }
}

impl AppClient {
    /// The deadline of each call.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Signs the instance-bound tokens with `signer` (a gateway holding the
    /// project secret, say) instead of the client's module key.
    #[must_use]
    pub fn bound_tokens(mut self, signer: BoundSigner) -> Self {
        self.signer = signer;
        self
    }

    /// Calls on behalf of a user and workspace (only the `api` identity may).
    #[must_use]
    pub fn on_behalf_of(
        mut self,
        user_id: impl Into<String>,
        workspace_id: impl Into<String>,
    ) -> Self {
        self.user = (user_id.into(), workspace_id.into());
        self
    }

    /// Where the caller mounts the app (a gateway's `/apps/<module>/<app>`),
    /// passed to the app as its root path.
    #[must_use]
    pub fn mounted_at(mut self, root_path: impl Into<String>) -> Self {
        self.root_path = root_path.into();
        self
    }

    /// The READY instances that declare this app.
    ///
    /// # Errors
    ///
    /// As [`ModuleProxy::ready_instances`]; `AppNotFound` when none does.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn instances(&self) -> Result<Vec<String>, CallError> {
        let ids: Vec<String> = self
            .proxy
            .ready_instances()
            .await?
            .into_iter()
            .filter(|i| {
                i.descriptor
                    .as_ref()
                    .is_some_and(|d| d.apps.iter().any(|a| a.name == self.name))
            })
            .map(|i| i.instance_id)
            .collect();
        if ids.is_empty() {
            return Err(
                CallError::new(CallErrorKind::AppNotFound, self.name.clone())
                    .with_code(ErrorCode::AppNotFound.as_str()),
            );
        }
        Ok(ids)
    }

    /// Sends `request` (its path and query below the app's root) and
    /// returns the app's response, its body read whole. The request's body
    /// is bytes, or a body read as the app pulls it ([`RequestBody::stream`]).
    ///
    /// # Errors
    ///
    /// `AppNotFound`; the host's refusal (`PERMISSION_DENIED`,
    /// `APP_ERROR`, ...); `TimedOut`; the last instance's refusal when every
    /// one was unavailable; the body's holder failing midway.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the app may have run.
    pub async fn call(
        &self,
        request: http::Request<impl Into<RequestBody>>,
    ) -> Result<http::Response<Bytes>, CallError> {
        let (parts, body) = self.send(request).await?.into_parts();
        let whole = match body.reader {
            Some(reader) => stream::read_rest(reader, body.first, u64::MAX)
                .await
                .map_err(refused)?
                .unwrap_or_default(),
            None => body.first,
        };
        Ok(http::Response::from_parts(parts, whole))
    }

    /// As [`AppClient::call`], the response body as it comes (server-sent
    /// events, a long download): each item a chunk, the holder's failure as
    /// the last.
    ///
    /// # Errors
    ///
    /// As [`AppClient::call`], before the body.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the app may have run. Dropping the body stream
    /// leaves the holder to its idle limit.
    pub async fn call_streaming(
        &self,
        request: http::Request<impl Into<RequestBody>>,
    ) -> Result<http::Response<BoxStream<'static, Result<Bytes, CallError>>>, CallError> {
        let (parts, body) = self.send(request).await?.into_parts();
        let first = futures::stream::iter((!body.first.is_empty()).then_some(Ok(body.first)));
        let rest = futures::stream::unfold(body.reader, |reader| async move {
            let mut reader = reader?;
            match reader.next_chunk().await {
                Ok(Some(chunk)) => Some((Ok(chunk), Some(reader))),
                Ok(None) => None,
                Err(err) => Some((Err(refused(err)), None)),
            }
        });
        Ok(http::Response::from_parts(parts, first.chain(rest).boxed()))
    }

    /// Sends `request` to the first instance that takes it, the instances
    /// remembered for a second and taken in turn. A body above the inline
    /// limit is held once, here, for whichever instance takes the request:
    /// an instance that refuses does so before it pulls any of it.
    async fn send(
        &self,
        request: http::Request<impl Into<RequestBody>>,
    ) -> Result<http::Response<Streamed>, CallError> {
        let Some(nats) = self.proxy.client().nats().cloned() else {
            return Err(CallError::new(
                CallErrorKind::NoResponders,
                "apps are served over NATS only",
            ));
        };
        let (parts, body) = request.into_parts();
        let holding = stream::Ends::default();
        let tasks = tokio_util::task::TaskTracker::new();
        // Once answered, the host read the body (or never will).
        let _stop_holding = holding.stop.clone().drop_guard();
        let body = match body.into().outgoing().await? {
            Outgoing::Inline(bytes) => SentBody::Inline(bytes),
            Outgoing::Held { held, size } => {
                let chunk = wire::chunk_bytes(nats.max_payload());
                let inbox = stream::hold(&nats, held, chunk, &tasks, holding.clone(), ())
                    .await
                    .map_err(|e| {
                        CallError::new(CallErrorKind::Transport, "could not hold the request body")
                            .with_source(e)
                    })?;
                SentBody::Held { inbox, size }
            }
        };
        let (parts, body, nats) = (&parts, &body, &nats);
        self.routes
            .call(
                || self.instances(),
                |id| async move { self.exchange(nats, &id, parts, body).await },
                retry_elsewhere,
                || CallError::new(CallErrorKind::AppNotFound, self.name.clone()),
            )
            .await
    }

    async fn exchange(
        &self,
        nats: &async_nats::Client,
        instance_id: &str,
        parts: &http::request::Parts,
        body: &SentBody,
    ) -> Result<http::Response<Streamed>, CallError> {
        let subject = wire::http_subject(self.proxy.client().project(), instance_id, &self.name);
        let mut request = pb::HttpRequest {
            context: Some(common::CallContext {
                trace_id: abi_sdk_core::ids::uuid4(),
                timeout_ms: i32::try_from(self.timeout.as_millis()).unwrap_or(i32::MAX),
                ..Default::default()
            }),
            app: self.name.clone(),
            method: parts.method.as_str().to_owned(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or("").to_owned(),
            headers: parts
                .headers
                .iter()
                .map(|(name, value)| pb::Header {
                    name: name.as_str().to_owned(),
                    value: value.as_bytes().iter().map(|&b| char::from(b)).collect(),
                })
                .collect(),
            user_id: self.user.0.clone(),
            workspace_id: self.user.1.clone(),
            root_path: self.root_path.clone(),
            ..Default::default()
        };
        match body {
            SentBody::Inline(bytes) => request.body = bytes.to_vec(),
            SentBody::Held { inbox, size } => {
                request.body_follows = true;
                request.max_body_bytes = size.unwrap_or(0);
                request.body_inbox = inbox.clone();
            }
        }
        let token = (self.signer)(instance_id)?;
        let response: pb::HttpResponse = abi_sdk_core::instance_call::call_instance(
            nats,
            &subject,
            &token,
            request.encode_to_vec().into(),
            self.timeout,
        )
        .await?;
        if let Some(error) = response.error.filter(|e| !e.code.is_empty()) {
            return Err(
                CallError::new(CallErrorKind::from_code(&error.code), error.message)
                    .with_code(error.code),
            );
        }
        let body = Streamed {
            first: Bytes::from(response.body),
            reader: response
                .body_follows
                .then(|| stream::Reader::new(nats.clone(), response.body_inbox)),
        };
        let status = u16::try_from(response.status)
            .ok()
            .and_then(|s| http::StatusCode::from_u16(s).ok())
            .ok_or_else(|| {
                CallError::new(CallErrorKind::Decode, "the app answered an invalid status")
            })?;
        let mut builder = http::Response::builder().status(status);
        for header in response.headers {
            let value: Vec<u8> = header
                .value
                .chars()
                .filter_map(|c| u8::try_from(u32::from(c)).ok())
                .collect();
            builder = builder.header(header.name, value);
        }
        builder.body(body).map_err(|e| {
            CallError::new(CallErrorKind::Decode, "the app answered an invalid header")
                .with_source(e)
        })
    }
}

/// A request's body as a caller hands it over: bytes, or a body of any
/// size read only as the app pulls it (a file, an incoming HTTP upload).
pub struct RequestBody(Kind);

enum Kind {
    Bytes(Bytes),
    Stream(crate::ResponseBody),
}

impl RequestBody {
    /// A body read chunk by chunk as the app pulls it; one whose exact size
    /// is known and fits the inline limit is sent inline instead.
    pub fn stream<B>(body: B) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<abi_sdk_core::BoxError>,
    {
        Self(Kind::Stream(body.map_err(Into::into).boxed_unsync()))
    }

    /// How it leaves: inline, or held for the host to pull, with its size
    /// when known.
    async fn outgoing(self) -> Result<Outgoing, CallError> {
        match self.0 {
            Kind::Bytes(bytes) if bytes.len() <= wire::INLINE_BYTES => Ok(Outgoing::Inline(bytes)),
            Kind::Bytes(bytes) => {
                let size = Some(bytes.len() as u64);
                Ok(Outgoing::Held {
                    held: Held::Bytes(bytes),
                    size,
                })
            }
            Kind::Stream(body) => {
                let size = http_body::Body::size_hint(&body).exact();
                if size.is_some_and(|n| n <= wire::INLINE_BYTES as u64) {
                    let bytes = body.collect().await.map_err(|e| {
                        CallError::new(CallErrorKind::Transport, "could not read the request body")
                            .with_source(e)
                    })?;
                    return Ok(Outgoing::Inline(bytes.to_bytes()));
                }
                Ok(Outgoing::Held {
                    held: Held::Stream {
                        body,
                        ends_at_drain: false,
                    },
                    size,
                })
            }
        }
    }
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Kind::Bytes(bytes) => write!(f, "RequestBody::Bytes({})", bytes.len()),
            Kind::Stream(_) => f.write_str("RequestBody::Stream"),
        }
    }
}

impl From<Bytes> for RequestBody {
    fn from(bytes: Bytes) -> Self {
        Self(Kind::Bytes(bytes))
    }
}

impl From<Vec<u8>> for RequestBody {
    fn from(bytes: Vec<u8>) -> Self {
        Self(Kind::Bytes(bytes.into()))
    }
}

impl From<String> for RequestBody {
    fn from(text: String) -> Self {
        Self(Kind::Bytes(text.into()))
    }
}

impl From<&'static str> for RequestBody {
    fn from(text: &'static str) -> Self {
        Self(Kind::Bytes(Bytes::from_static(text.as_bytes())))
    }
}

impl From<()> for RequestBody {
    fn from((): ()) -> Self {
        Self(Kind::Bytes(Bytes::new()))
    }
}

/// A request body ready to go.
enum Outgoing {
    Inline(Bytes),
    Held { held: Held, size: Option<u64> },
}

/// A request body as each instance is sent it.
enum SentBody {
    Inline(Bytes),
    Held { inbox: String, size: Option<u64> },
}

/// A response body: its first bytes, and the reader of the rest when it
/// follows.
struct Streamed {
    first: Bytes,
    reader: Option<stream::Reader>,
}

/// A body holder's refusal as a call's.
fn refused(r: crate::decide::Refused) -> CallError {
    CallError::new(CallErrorKind::from(r.code), r.message).with_code(r.code.as_str())
}

/// A refusal that means the app never ran on that instance.
fn retry_elsewhere(err: &CallError) -> bool {
    matches!(
        err.kind(),
        CallErrorKind::ModuleUnavailable
            | CallErrorKind::NoResponders
            | CallErrorKind::LeaseExpired
    )
}
