//! [`AppService`]: any `tower::Service` over `http` requests, an axum
//! `Router` among them, erased so a host can hold several. Who called rides
//! in the request's extensions ([`AppCaller`]).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use tower::ServiceExt as _;

use abi_sdk_core::BoxError;

/// The body an app's service receives: the request's bytes, or, for an
/// upload above the inline limit, its chunks pulled from the caller as the
/// app reads them (never ahead of it), so an app reads any size in bounded
/// memory. A read past the app's upload limit fails (the host answers 413).
pub struct AppBody(UnsyncBoxBody<Bytes, BoxError>);

impl AppBody {
    /// A body of these bytes.
    pub fn from_bytes(bytes: Bytes) -> Self {
        Self::new(http_body_util::Full::new(bytes))
    }

    /// Any body, boxed.
    pub fn new<B>(body: B) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Self(body.map_err(Into::into).boxed_unsync())
    }
}

impl fmt::Debug for AppBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AppBody")
    }
}

impl http_body::Body for AppBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        std::pin::Pin::new(&mut self.0).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.size_hint()
    }
}

/// The body an app's service answers with, as the host reads it: frame by
/// frame, so a stream (server-sent events, a long download) leaves as the
/// app produces it.
pub type ResponseBody = UnsyncBoxBody<Bytes, BoxError>;

/// Who a request comes from, in the request's extensions (axum:
/// `Extension<AppCaller>`): the caller's service identity, as discovery
/// vouched for it, and the user and workspace only the API may name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppCaller {
    /// The caller's service identity (`api` for Nexus).
    pub caller: String,
    /// The signed-in user, empty unless the caller is the API.
    pub user_id: String,
    /// The workspace the user opened the app from.
    pub workspace_id: String,
    /// Where the gateway mounts the app (`/apps/<module>/<app>`).
    pub root_path: String,
}

type Call = dyn Fn(http::Request<AppBody>) -> BoxFuture<'static, Result<http::Response<ResponseBody>, BoxError>>
    + Send
    + Sync;

/// An app's service; cheap to clone.
#[derive(Clone)]
pub struct AppService {
    call: Arc<Call>,
}

impl fmt::Debug for AppService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AppService")
    }
}

impl AppService {
    /// Serves requests with `service` (cloned per request, as tower services
    /// are).
    pub fn new<S, B>(service: S) -> Self
    where
        S: tower::Service<http::Request<AppBody>, Response = http::Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let call = move |request: http::Request<AppBody>| {
            let service = service.clone();
            Box::pin(async move {
                let response = service.oneshot(request).await.map_err(Into::into)?;
                Ok(response.map(|body| body.map_err(Into::into).boxed_unsync()))
            }) as BoxFuture<'static, _>
        };
        Self {
            call: Arc::new(call),
        }
    }

    /// Answers `request`.
    ///
    /// # Errors
    ///
    /// The service's failure, or its body's.
    ///
    /// # Cancel safety
    ///
    /// As the service's own future.
    pub async fn call(
        &self,
        request: http::Request<AppBody>,
    ) -> Result<http::Response<ResponseBody>, BoxError> {
        (self.call)(request).await
    }
}
