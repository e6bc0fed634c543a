//! `abictl serve-apps [--listen 127.0.0.1:8080]`: an HTTP gateway to the
//! project's web apps, so a browser reaches an app with no NATS client:
//! `http://<listen>/apps/<module>/<app>/<path>` goes to a READY instance
//! of `<module>` declaring `<app>` (the SDK's `AppClient`: an instance that
//! refuses before its app ran is passed over), and its response comes
//! back. `/apps/<module>/<app>` redirects to its trailing slash, so an
//! app's relative links resolve. Runs until Ctrl-C or SIGTERM.
//!
//! Calls are signed as abictl signs chats: with the project secret, a
//! service token for `--as` (default `api`) bound to the instance called;
//! no user or workspace is named (the gateway authenticates nobody).

use std::net::SocketAddr;
use std::time::Duration;

use abi_sdk::apps::{AppsExt as _, RequestBody};
use abi_sdk::{CallError, CallErrorKind, DiscoveryClient};
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use bytes::Bytes;
use tracing::Instrument as _;

use super::Ctx;
use crate::connect;
use crate::signals;

/// The gateway path of `module`'s app `app`.
pub fn mount(module: &str, app: &str) -> String {
    format!("/apps/{module}/{app}")
}

#[derive(Clone)]
struct Gateway {
    client: DiscoveryClient,
    major: u32,
    timeout: Duration,
}

/// Serves the gateway on `listen` until interrupted.
///
/// # Errors
///
/// The address cannot be bound (exit 2), NATS or discovery unreachable (exit 3).
///
/// # Cancel safety
///
/// Cancel safe: dropping it stops serving; calls in flight are dropped.
pub async fn run(cx: Ctx<'_>, listen: SocketAddr, major: u32) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let gateway = Gateway {
        client,
        major,
        timeout: Duration::from_secs(cx.global.timeout_secs.max(1)),
    };
    let router = axum::Router::new()
        .route("/apps/{module}/{app}", any(redirect))
        .route("/apps/{module}/{app}/", any(forward_root))
        .route("/apps/{module}/{app}/{*rest}", any(forward))
        .with_state(gateway);
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let bound = listener.local_addr()?;
    println!("serving apps on http://{bound}/apps/<module>/<app>/");
    tracing::info!(%bound, "app gateway serving");
    axum::serve(listener, router)
        .with_graceful_shutdown(signals::interrupted())
        .await?;
    Ok(())
}

async fn redirect(Path((module, app)): Path<(String, String)>) -> Response {
    let to = format!("{}/", mount(&module, &app));
    (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, to)]).into_response()
}

async fn forward_root(
    State(gateway): State<Gateway>,
    Path((module, app)): Path<(String, String)>,
    request: Request,
) -> Response {
    call(&gateway, &module, &app, "", request).await
}

async fn forward(
    State(gateway): State<Gateway>,
    Path((module, app, rest)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    call(&gateway, &module, &app, &rest, request).await
}

async fn call(
    gateway: &Gateway,
    module: &str,
    app: &str,
    rest: &str,
    request: Request,
) -> Response {
    // The body goes as the app reads it: an upload of any size crosses in
    // bounded memory, and the app's own limit applies (a 413 from its host).
    let (mut parts, body) = request.into_parts();
    let body = RequestBody::stream(body);
    let path = match parts.uri.query() {
        Some(query) => format!("/{rest}?{query}"),
        None => format!("/{rest}"),
    };
    let Ok(uri) = path.parse() else {
        return (StatusCode::BAD_REQUEST, "Invalid path").into_response();
    };
    parts.uri = uri;
    parts.headers.remove(header::HOST);
    // The browser's (or the proxy's) trace goes on into the app: a SERVER
    // span continuing the HTTP `traceparent`, under which the call's CLIENT
    // span puts its own in the NATS headers.
    let mut carried = async_nats::HeaderMap::new();
    for name in abi_wire::trace::HEADERS {
        if let Some(value) = parts.headers.get(name).and_then(|v| v.to_str().ok()) {
            carried.insert(name, value);
        }
    }
    let span = abi_process::traces::server_span(
        abi_process::traces::Kind::Server,
        &mount(module, app),
        Some(&format!("{} {}", parts.method, mount(module, app))),
        Some(&carried),
    );
    let client = gateway
        .client
        .module(module, gateway.major)
        .web_app(app)
        .mounted_at(mount(module, app))
        .timeout(gateway.timeout);
    // Streamed as it comes: server-sent events and long downloads too.
    match client
        .call_streaming(http::Request::from_parts(parts, body))
        .instrument(span)
        .await
    {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            Response::from_parts(parts, Body::from_stream(body))
        }
        Err(err) => refused(&err),
    }
}

/// A call that got no response from the app, as HTTP.
fn refused(err: &CallError) -> Response {
    let status = match err.kind() {
        CallErrorKind::AppNotFound | CallErrorKind::ModuleNotFound => StatusCode::NOT_FOUND,
        CallErrorKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        CallErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        CallErrorKind::TimedOut => StatusCode::GATEWAY_TIMEOUT,
        CallErrorKind::ModuleUnavailable | CallErrorKind::NoResponders => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::BAD_GATEWAY,
    };
    tracing::warn!(error = %err, "app call failed");
    (
        status,
        [(header::CONTENT_TYPE, "text/plain")],
        Bytes::from(err.to_string()),
    )
        .into_response()
}
