//! [`AppHost`]: serves a module's web apps on the reference's subjects
//! (`abi.mod.<project>.<instance>.app.<name>.http`), one route per app on
//! the host kit's request loop: the checks of [`crate::decide`], discovery's
//! `authorize_app` (reused per caller token and app for 5 s, never past the
//! token), a file of the app's folder, or the app's service. A body above
//! the inline limit streams both ways ([`crate::stream`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant as StdInstant};

use abi_proto::app::v1 as pb;
use abi_proto::discovery::v1 as discovery_pb;
use abi_sdk_core::host::grants::Authorizations;
use abi_sdk_core::host::serve::{Handler, OnStop, Overload, RequestLoop, Route};
use abi_sdk_core::host::stopping::Stopping;
use abi_sdk_core::host::{self, Host, ServedHost};
use abi_sdk_core::{BoxError, DiscoveryClient, SessionHandle};
use abi_wire::ErrorCode;
use abi_wire::apps as wire;
use async_nats::Message;
use bytes::Bytes;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use prost::Message as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tracing::{error, info, warn};

use crate::decide::{self, Plan, Refused, Text};
use crate::files::{self, Etags};
use crate::service::{AppBody, AppCaller};
use crate::spec::AppSpec;
use crate::stream::{self, Held};
use crate::upload;

/// The host's name in logs and errors.
const HOST_NAME: &str = "apps";
/// Requests served at once, by default (the reference's `DEFAULT_LIMIT`).
pub const DEFAULT_MAX_CONCURRENCY: usize = 64;
/// Answers remembered from `authorize_app` at once.
const MAX_AUTHORIZATIONS: usize = 1024;
/// How long the close drains the subscriptions: requests the broker
/// delivered before it took effect are still answered (refused as
/// draining, so their callers go to another instance), none dropped.
const SUBSCRIPTION_DRAIN: Duration = Duration::from_secs(1);
/// The content type of server-sent events, which a drain ends at once.
const EVENT_STREAM: &str = "text/event-stream";
/// How long a drain waits for the request loop before it gives up.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Why an app could not be added.
#[derive(Debug, thiserror::Error)]
#[error("app {0:?} is declared twice")]
pub struct DuplicateApp(pub String);

/// Serves web apps. Build it, then hand it to the module with
/// [`abi_sdk_core::ModuleSpec::serve`]:
///
/// ```no_run
/// use std::sync::Arc;
/// use abi_apps::{AppHost, AppService, AppSpec};
///
/// # fn f(router: axum::Router) -> Result<(), abi_apps::DuplicateApp> {
/// let host = AppHost::new().app(
///     AppSpec::new("board").folder("apps/board").service(AppService::new(router)),
/// )?;
/// let spec = abi_sdk_core::ModuleSpec::new("provider").serve(Arc::new(host));
/// # let _ = spec; Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct AppHost {
    apps: BTreeMap<String, AppSpec>,
    max_concurrency: usize,
}

impl Default for AppHost {
    fn default() -> Self {
        Self::new()
    }
}

impl AppHost {
    /// A host serving no app yet, [`DEFAULT_MAX_CONCURRENCY`] requests at once.
    pub fn new() -> Self {
        Self {
            apps: BTreeMap::new(),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
        }
    }

    /// Serves `app`.
    ///
    /// # Errors
    ///
    /// [`DuplicateApp`] when an app of that name is served already (names
    /// are checked when the module starts, as the reference checks them).
    pub fn app(mut self, app: AppSpec) -> Result<Self, DuplicateApp> {
        let name = app.name().to_owned();
        if self.apps.contains_key(&name) {
            return Err(DuplicateApp(name));
        }
        self.apps.insert(name, app);
        Ok(self)
    }

    /// Requests served at once, at least one; the next waits.
    #[must_use]
    pub fn max_concurrency(mut self, limit: usize) -> Self {
        self.max_concurrency = limit.max(1);
        self
    }
}

impl ServedHost for AppHost {
    fn name(&self) -> &str {
        HOST_NAME
    }

    fn declare(&self, descriptor: &mut discovery_pb::ModuleDescriptor) {
        for app in self.apps.values() {
            if !descriptor.apps.iter().any(|a| a.name == app.name()) {
                descriptor.apps.push(app.descriptor().clone());
            }
        }
    }

    fn bind(&self, links: &host::Links) -> Arc<dyn Host> {
        Arc::new(BoundAppHost {
            shared: Arc::new(Shared {
                apps: self.apps.clone(),
                nats: links.nats().clone(),
                discovery: links.discovery().clone(),
                session: links.session().clone(),
                stopping: Stopping::new(),
                requests: Arc::new(RequestLoop::new(
                    self.max_concurrency,
                    OnStop::Drain(SUBSCRIPTION_DRAIN),
                )),
                uploads: Arc::new(Semaphore::new(wire::MAX_UPLOADS)),
                streams: Arc::new(AtomicUsize::new(0)),
                grants: Authorizations::new(wire::AUTHORIZATION_SECONDS as f64, MAX_AUTHORIZATIONS),
                etags: Etags::default(),
                stream_ends: stream::Ends::default(),
            }),
        })
    }
}

struct BoundAppHost {
    shared: Arc<Shared>,
}

struct Shared {
    apps: BTreeMap<String, AppSpec>,
    nats: async_nats::Client,
    discovery: DiscoveryClient,
    session: SessionHandle,
    stopping: Stopping,
    requests: Arc<RequestLoop>,
    uploads: Arc<Semaphore>,
    /// Response bodies being held for their readers.
    streams: Arc<AtomicUsize>,
    grants: Authorizations<String>,
    etags: Etags,
    /// Ends the held bodies: lingering ones at a drain, all at close.
    stream_ends: stream::Ends,
}

/// One response body held: counted while it lasts.
struct StreamSlot(Arc<AtomicUsize>);

impl StreamSlot {
    fn take(streams: &Arc<AtomicUsize>) -> Self {
        streams.fetch_add(1, Ordering::Relaxed);
        Self(streams.clone())
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the host answers: a status, headers, and the body inline or held.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
}

enum Body {
    Inline(Bytes),
    Held(Held),
}

impl Answer {
    fn text(text: Text) -> Self {
        Self {
            status: text.status,
            headers: vec![("content-type".to_owned(), "text/plain".to_owned())],
            body: Body::Inline(Bytes::from_static(text.message.as_bytes())),
        }
    }
}

impl BoundAppHost {
    async fn start_serving(&self) -> Result<(), BoxError> {
        let shared = &self.shared;
        let project = shared.discovery.project().to_owned();
        let instance_id = shared.session.instance_id().to_owned();
        let routes = shared
            .apps
            .keys()
            .map(|name| Route {
                subject: wire::http_subject(&project, &instance_id, name),
                handle: serve(shared, name),
                overload: Overload::Wait,
            })
            .collect();
        shared.requests.start(&shared.nats, routes).await?;
        info!(apps = shared.apps.len(), instance_id = %instance_id, "app host started");
        Ok(())
    }

    async fn drain_within(&self, timeout: Duration) {
        self.shared.stopping.stop_accepting();
        self.shared.stream_ends.draining.cancel();
        let deadline = Instant::now() + timeout;
        if tokio::time::timeout_at(deadline, self.shared.requests.settled())
            .await
            .is_err()
        {
            warn!(
                requests = self.shared.requests.in_flight(),
                "app requests still going at the end of the drain"
            );
        }
        // Downloads in flight may finish within what is left.
        if !self.shared.stopping.settled_by(deadline).await {
            warn!("app responses still streaming at the end of the drain");
        }
    }

    async fn close_by(&self, deadline: Instant) {
        self.shared.stopping.close();
        self.shared.stream_ends.stop.cancel();
        let until = deadline.min(Instant::now() + CLOSE_GRACE);
        self.shared.requests.close(until).await;
        let _ = self.shared.stopping.settled_by(until).await;
    }
}

impl Host for BoundAppHost {
    fn name(&self) -> &str {
        HOST_NAME
    }

    fn start(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(self.start_serving())
    }

    fn drain(&self, timeout: Duration) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move {
            self.drain_within(timeout).await;
            Ok(())
        })
    }

    fn close(&self, deadline: Instant) -> BoxFuture<'_, ()> {
        Box::pin(self.close_by(deadline))
    }
}

/// One app's requests, each answered (a refusal, a file, the service's).
fn serve(shared: &Arc<Shared>, name: &str) -> Handler {
    let (shared, name) = (shared.clone(), name.to_owned());
    Arc::new(move |msg: Message| {
        let (shared, name) = (shared.clone(), name.clone());
        Box::pin(async move {
            let Some(reply) = msg.reply.clone() else {
                return;
            };
            let response = match handle(&shared, &name, &msg).await {
                Ok(response) => response,
                Err(refused) => pb::HttpResponse {
                    error: Some(refused.to_pb()),
                    ..Default::default()
                },
            };
            let mut bytes = response.encode_to_vec();
            if bytes.len() > shared.nats.max_payload() {
                warn!(app = %name, "an app answered with more headers than a message holds");
                bytes = pb::HttpResponse {
                    error: Some(
                        Refused {
                            code: ErrorCode::AppError,
                            message: "The app's response headers are too large".to_owned(),
                        }
                        .to_pb(),
                    ),
                    ..Default::default()
                }
                .encode_to_vec();
            }
            if let Err(error) = shared.nats.publish(reply, bytes.into()).await {
                warn!(app = %name, %error, "could not send an app's answer");
            }
        })
    })
}

async fn handle(shared: &Shared, name: &str, msg: &Message) -> Result<pb::HttpResponse, Refused> {
    let headers = msg.headers.as_ref();
    let overflowed = headers
        .and_then(|h| h.get(abi_wire::overflow::REQUEST_HEADER))
        .is_some();
    // What the reference decides as the request arrives: a draining host
    // takes nothing, an upload needs one of its own slots (held while the
    // app reads the body).
    let decoded = (msg.payload.len() <= wire::MAX_REQUEST_BYTES)
        .then(|| pb::HttpRequest::decode(msg.payload.as_ref()).ok())
        .flatten();
    let upload = decoded.as_ref().is_some_and(|r| r.body_follows);
    let upload_slot = upload
        .then(|| shared.uploads.clone().try_acquire_owned().ok())
        .flatten();
    decide::on_receive(!shared.stopping.accepting(), upload, upload_slot.is_some())?;
    decide::check_message(msg.payload.len(), overflowed)?;
    let request = decoded.ok_or_else(Refused::app_failed)?;
    decide::check_request(&request, name, !shared.stopping.accepting())?;
    let token = headers
        .and_then(|h| h.get(abi_wire::AUTH_HEADER))
        .map_or("", |v| v.as_str());
    let caller = authorize(shared, name, token).await?;
    decide::check_caller(&request, &caller)?;
    let app = shared.apps.get(name).ok_or_else(Refused::app_failed)?;
    let answer = answer(shared, app, request, caller, upload_slot).await?;
    let mut response = pb::HttpResponse {
        status: u32::from(answer.status),
        headers: answer
            .headers
            .into_iter()
            .map(|(name, value)| pb::Header { name, value })
            .collect(),
        ..Default::default()
    };
    match answer.body {
        Body::Inline(bytes) => response.body = bytes.to_vec(),
        Body::Held(held) => {
            let chunk = wire::chunk_bytes(shared.nats.max_payload());
            let inbox = stream::hold(
                &shared.nats,
                held,
                chunk,
                shared.stopping.work(),
                shared.stream_ends.clone(),
                StreamSlot::take(&shared.streams),
            )
            .await;
            response.body_follows = true;
            response.body_inbox = inbox.map_err(|_| Refused::app_failed())?;
        }
    }
    Ok(response)
}

/// The caller's identity, as discovery vouches for it.
async fn authorize(shared: &Shared, name: &str, token: &str) -> Result<String, Refused> {
    let now = StdInstant::now();
    if let Some(caller) = shared.grants.cached(token, name, now) {
        return Ok(caller);
    }
    let reply = shared
        .discovery
        .call(&discovery_pb::AuthorizeAppRequest {
            instance_id: shared.session.instance_id().to_owned(),
            lease_token: shared.session.lease_token(),
            app_name: name.to_owned(),
            caller_token: token.to_owned(),
            ..Default::default()
        })
        .await
        .map_err(|err| Refused::from_authorization(&err))?;
    shared
        .grants
        .remember(token, name, &reply.caller_identity, now);
    Ok(reply.caller_identity)
}

async fn answer(
    shared: &Shared,
    app: &AppSpec,
    request: pb::HttpRequest,
    caller: String,
    upload_slot: Option<OwnedSemaphorePermit>,
) -> Result<Answer, Refused> {
    let files_first = match decide::plan(&request, app.upload_limit(), app.root().is_some())? {
        Plan::Text(text) => return Ok(Answer::text(text)),
        Plan::Serve { files_first } => files_first,
    };
    if files_first && let Some(found) = file(shared, app, &request).await {
        return Ok(found);
    }
    let streams_full = shared.streams.load(Ordering::Relaxed) >= wire::MAX_STREAMS;
    if let Some(text) = decide::after_files(app.app_service().is_some(), streams_full)? {
        return Ok(Answer::text(text));
    }
    let Some(service) = app.app_service() else {
        return Ok(Answer::text(Text {
            status: 404,
            message: "Not found",
        }));
    };
    let too_large = upload::TooLarge::default();
    let body = if request.body_follows {
        // The app's own limit, lower if the caller asks for less.
        let mut limit = app.upload_limit();
        if request.max_body_bytes > 0 {
            limit = limit.min(request.max_body_bytes);
        }
        let reader = stream::Reader::new(shared.nats.clone(), request.body_inbox.clone());
        let first = Bytes::from(request.body.clone());
        upload::pulled(reader, first, limit, too_large.clone(), upload_slot)
    } else {
        AppBody::from_bytes(Bytes::from(request.body.clone()))
    };
    let http_request = http_request(&request, body, caller)?;
    let idle = Duration::from_secs(wire::IDLE_SECONDS);
    // An app that panics failed, as one that raised does in the reference:
    // its caller is told at once instead of waiting out its deadline.
    let called = std::panic::AssertUnwindSafe(service.call(http_request)).catch_unwind();
    let response = match tokio::time::timeout(idle, called).await {
        Err(_) => {
            return Ok(Answer::text(Text {
                status: 504,
                message: "App timed out",
            }));
        }
        // The app read past the limit and answered the failed read (often
        // with a 500): the caller sent too much, which is what it is told.
        Ok(_) if too_large.happened() => {
            return Ok(Answer::text(Text {
                status: 413,
                message: "Request body too large",
            }));
        }
        Ok(Err(_panic)) => {
            error!(app = %app.name(), "app panicked");
            return Err(Refused::app_failed());
        }
        Ok(Ok(Err(err))) => {
            error!(app = %app.name(), error = %err, "app failed");
            return Err(Refused::app_failed());
        }
        Ok(Ok(Ok(response))) => response,
    };
    let (parts, body) = response.into_parts();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter(|(name, _)| {
            let name = name.as_str();
            name == "content-length" || !wire::is_hop_by_hop(name)
        })
        .map(|(name, value)| (name.as_str().to_owned(), latin1(value.as_bytes())))
        .collect();
    let max_payload = shared.nats.max_payload();
    let known = http_body::Body::size_hint(&body)
        .exact()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| fits_inline(n, &headers, max_payload));
    let body = match known {
        // A small body of known size: read now, answered inline.
        Some(_) => match tokio::time::timeout(idle, body.collect()).await {
            Ok(Ok(collected)) => Body::Inline(collected.to_bytes()),
            Ok(Err(err)) => {
                error!(app = %app.name(), error = %err, "app failed");
                return Err(Refused::app_failed());
            }
            Err(_) => {
                return Ok(Answer::text(Text {
                    status: 504,
                    message: "App timed out",
                }));
            }
        },
        // Anything else leaves as the app produces it.
        None => {
            let event_stream = headers
                .iter()
                .any(|(k, v)| k == "content-type" && v.starts_with(EVENT_STREAM));
            Body::Held(Held::Stream {
                body,
                ends_at_drain: event_stream,
            })
        }
    };
    Ok(Answer {
        status: parts.status.as_u16(),
        headers,
        body,
    })
}

/// A file of the app's folder for a `GET` or `HEAD`, if the path names one.
async fn file(shared: &Shared, app: &AppSpec, request: &pb::HttpRequest) -> Option<Answer> {
    let root = app.root()?;
    let path = files::resolve(root, &app.descriptor().entry, &request.path)?;
    let meta = tokio::fs::metadata(&path).await.ok()?;
    let size = meta.len();
    let mtime = meta.modified().ok()?;
    let small = size <= wire::INLINE_BYTES as u64;
    let content = if small {
        Some(Bytes::from(tokio::fs::read(&path).await.ok()?))
    } else {
        None
    };
    let etag = shared.etags.of(&path, mtime, size, content.as_deref());
    let mut headers = vec![
        (
            "content-type".to_owned(),
            files::content_type(&path.to_string_lossy())
                .unwrap_or("application/octet-stream")
                .to_owned(),
        ),
        ("etag".to_owned(), etag.clone()),
        ("cache-control".to_owned(), "no-cache".to_owned()),
    ];
    let if_none_match = request
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("if-none-match"))
        .map(|h| h.value.as_str());
    if if_none_match == Some(etag.as_str()) {
        return Some(Answer {
            status: 304,
            headers,
            body: Body::Inline(Bytes::new()),
        });
    }
    headers.push(("content-length".to_owned(), size.to_string()));
    if request.method.eq_ignore_ascii_case("HEAD") {
        return Some(Answer {
            status: 200,
            headers,
            body: Body::Inline(Bytes::new()),
        });
    }
    let max_payload = shared.nats.max_payload();
    let body = match content {
        Some(bytes) if fits_inline(bytes.len(), &headers, max_payload) => Body::Inline(bytes),
        _ => Body::Held(Held::File { path, size }),
    };
    Some(Answer {
        status: 200,
        headers,
        body,
    })
}

/// Whether a body of `size` bytes is answered inline: up to the inline
/// limit, and one broker message with its headers and envelope.
fn fits_inline(size: usize, headers: &[(String, String)], max_payload: usize) -> bool {
    if size > wire::INLINE_BYTES {
        return false;
    }
    let total = size
        + headers
            .iter()
            .map(|(k, v)| k.len() + v.len() + 8)
            .sum::<usize>();
    total <= wire::chunk_bytes(max_payload)
}

/// The request the app's service sees: the method, the path below the
/// app's root with its query, the headers that cross (latin-1, as HTTP has
/// them), the body, and who called ([`AppCaller`]).
fn http_request(
    request: &pb::HttpRequest,
    body: AppBody,
    caller: String,
) -> Result<http::Request<AppBody>, Refused> {
    let not_latin1 = || Refused::rpc(ErrorCode::InvalidArgument, "A header is not latin-1 text");
    let uri = if request.query.is_empty() {
        request.path.clone()
    } else {
        format!("{}?{}", request.path, request.query)
    };
    let method = http::Method::from_bytes(request.method.to_ascii_uppercase().as_bytes())
        .map_err(|_| Refused::rpc(ErrorCode::InvalidArgument, "Invalid HTTP method"))?;
    let mut builder = http::Request::builder().method(method).uri(uri);
    for header in &request.headers {
        let name = header.name.to_ascii_lowercase();
        if wire::is_hop_by_hop(&name) {
            continue;
        }
        let value: Vec<u8> = header
            .value
            .chars()
            .map(|c| u8::try_from(u32::from(c)).map_err(|_| not_latin1()))
            .collect::<Result<_, _>>()?;
        let value = http::HeaderValue::from_bytes(&value).map_err(|_| not_latin1())?;
        builder = builder.header(name, value);
    }
    let mut http_request = builder
        .body(body)
        .map_err(|_| Refused::rpc(ErrorCode::InvalidArgument, "Invalid HTTP request"))?;
    http_request.extensions_mut().insert(AppCaller {
        caller,
        user_id: request.user_id.clone(),
        workspace_id: request.workspace_id.clone(),
        root_path: request.root_path.trim_end_matches('/').to_owned(),
    });
    Ok(http_request)
}

/// Header bytes as text, each byte one character (latin-1).
fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}
