//! [`AppClient`]: calling a web app a module serves (the reference's
//! `call_app`, with the instance picked for the caller): an `http` request
//! in, an `http` response out, bodies above the inline limit streamed both
//! ways. An instance that refuses before its app ran (`MODULE_UNAVAILABLE`:
//! draining or full; nobody subscribed) is passed over for the next.

use std::sync::Arc;
use std::time::Duration;

use abi_proto::app::v1 as pb;
use abi_proto::common::v1 as common;
use abi_sdk_core::{BoundSigner, CallError, CallErrorKind, ModuleProxy};
use abi_wire::ErrorCode;
use abi_wire::apps as wire;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
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
    /// returns the app's response, its body read whole.
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
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, CallError> {
        let (parts, mut body) = self.send(request).await?.into_parts();
        let mut whole = bytes::BytesMut::from(body.first.as_ref());
        if let Some(reader) = body.reader.as_mut() {
            while let Some(chunk) = reader.next_chunk().await.map_err(refused)? {
                whole.extend_from_slice(&chunk);
            }
        }
        Ok(http::Response::from_parts(parts, whole.freeze()))
    }

    /// As [`AppClient::call`], the body as it comes (server-sent events, a
    /// long download): each item a chunk, the holder's failure as the last.
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
        request: http::Request<Bytes>,
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

    /// Sends `request` to the first instance that takes it.
    async fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Streamed>, CallError> {
        let Some(nats) = self.proxy.client().nats().cloned() else {
            return Err(CallError::new(
                CallErrorKind::NoResponders,
                "apps are served over NATS only",
            ));
        };
        let (parts, body) = request.into_parts();
        let mut last = None;
        for instance_id in self.instances().await? {
            match self
                .exchange(&nats, &instance_id, &parts, body.clone())
                .await
            {
                Err(err) if retry_elsewhere(&err) => last = Some(err),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| CallError::new(CallErrorKind::AppNotFound, self.name.clone())))
    }

    async fn exchange(
        &self,
        nats: &async_nats::Client,
        instance_id: &str,
        parts: &http::request::Parts,
        body: Bytes,
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
        // A body above the inline limit is held here and pulled by the host.
        let holding = stream::Ends::default();
        let tasks = tokio_util::task::TaskTracker::new();
        // Once answered, the host read the body (or never will).
        let _stop_holding = holding.stop.clone().drop_guard();
        if body.len() > wire::INLINE_BYTES {
            let chunk = wire::chunk_bytes(nats.server_info().max_payload);
            request.body_follows = true;
            request.max_body_bytes = body.len() as u64;
            request.body_inbox =
                stream::hold(nats, Held::Bytes(body), chunk, &tasks, holding.clone(), ())
                    .await
                    .map_err(|e| {
                        CallError::new(CallErrorKind::Transport, "could not hold the request body")
                            .with_source(e)
                    })?;
        } else {
            request.body = body.to_vec();
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
