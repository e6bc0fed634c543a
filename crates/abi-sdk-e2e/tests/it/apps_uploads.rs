//! Uploads of any size, on our `AppHost` beside the reference's: a body
//! that follows its request reaches the app chunk by chunk as the app reads
//! it (the host holds a chunk, never the whole upload, and the caller gives
//! up no more than it is asked for); past the app's limit both hosts answer
//! 413; an app that fails is answered `APP_ERROR` by both, ours even when
//! its handler panics, rather than leaving the caller to its deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use abi_sdk::CallErrorKind;
use abi_sdk::apps::{AppsExt as _, RequestBody};
use abi_sdk_e2e::World;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

use super::apps_interop::serve_app;
use super::models_fixture::{DEADLINE, Process, caller, ready_instances};

/// The frames of an upload, and their size: 640 KiB, well above the inline
/// limit, sent with no length (as a chunked HTTP upload comes).
const FRAMES: usize = 40;
const FRAME: usize = 16 * 1024;
/// The apps' upload limit: between one frame and the whole upload.
const LIMIT: usize = 300_000;

/// What the test sees of the app reading its upload.
#[derive(Clone)]
struct Reading {
    /// The app got its first frame.
    first: mpsc::UnboundedSender<()>,
    /// The app may read the rest.
    go: Arc<Notify>,
}

/// Reads one frame, says so, waits for `go`, reads the rest.
async fn count(State(reading): State<Reading>, request: Request) -> Response {
    let mut body = request.into_body();
    let mut read = match body.frame().await {
        Some(Ok(frame)) => frame.into_data().map_or(0, |d| d.len()),
        _ => return (http::StatusCode::BAD_REQUEST, "no first frame").into_response(),
    };
    reading.first.send(()).unwrap();
    reading.go.notified().await;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => read += frame.into_data().map_or(0, |d| d.len()),
            Err(_) => return http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    }
    json_answer(&json!({"body_len": read}))
}

/// The reference peer's echo, as far as this test needs it: the body's
/// length, a 500 when the body fails (as an app answers a broken upload),
/// and `/fail` failing (here by panicking).
async fn echo(request: Request) -> Response {
    assert!(!request.uri().path().ends_with("/fail"), "asked to fail");
    match axum::body::to_bytes(request.into_body(), usize::MAX).await {
        Ok(body) => json_answer(&json!({"body_len": body.len()})),
        Err(_) => http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn json_answer(value: &Value) -> Response {
    (
        [(http::header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// An upload of [`FRAMES`] frames with no known length, counting the
/// frames its holder took from it.
fn upload(taken: Arc<AtomicUsize>) -> RequestBody {
    let frames = futures::stream::iter(0..FRAMES).map(move |_| {
        taken.fetch_add(1, Ordering::SeqCst);
        Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(vec![7u8; FRAME])))
    });
    RequestBody::stream(http_body_util::StreamBody::new(frames))
}

fn board(dir: &std::path::Path) -> std::path::PathBuf {
    let board = dir.join("board");
    std::fs::create_dir_all(&board).unwrap();
    let manifest = json!({"name": "Board", "max_upload_bytes": LIMIT});
    std::fs::write(board.join("manifest.json"), manifest.to_string()).unwrap();
    std::fs::write(board.join("index.html"), "<h1>board</h1>").unwrap();
    board
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_reach_the_app_as_it_reads_them_and_limits_and_failures_match_the_reference() {
    let world = World::start(5.0).await;
    let dir = tempfile::tempdir().unwrap();
    let board = board(dir.path());
    let (first_tx, mut first_rx) = mpsc::unbounded_channel();
    let reading = Reading {
        first: first_tx,
        go: Arc::new(Notify::new()),
    };
    let router = axum::Router::new()
        .route("/api/count", axum::routing::post(count))
        .with_state(reading.clone())
        .fallback(echo);
    let (stop, task) = serve_app(&world, "rs_up", &board, router);
    let mut reference = Process::reference_app(&world, "py_up", &board);
    reference.instance_id().await;
    ready_instances(&world, "rs_up", 1).await;
    ready_instances(&world, "py_up", 1).await;
    let proxy = caller(&world, "caller").await;

    // The app has its first frame while the caller has given up at most one
    // more: nothing is read ahead of the app, so nothing is held whole.
    let ours = proxy.module("rs_up", 1).web_app("board");
    let taken = Arc::new(AtomicUsize::new(0));
    let call = {
        let (ours, taken) = (ours.clone(), taken.clone());
        tokio::spawn(async move {
            let request = http::Request::post("/api/count")
                .body(upload(taken))
                .unwrap();
            ours.call(request).await
        })
    };
    tokio::time::timeout(DEADLINE, first_rx.recv())
        .await
        .expect("the app is called before its upload is read")
        .unwrap();
    let ahead = taken.load(Ordering::SeqCst);
    assert!(
        ahead <= 2,
        "{ahead} frames of {FRAMES} taken before the app read its second"
    );
    reading.go.notify_one();
    let counted = tokio::time::timeout(DEADLINE, call)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // The count route reads past the limit: its host answers 413, not the
    // app's 500.
    assert_eq!(counted.status(), 413, "{counted:?}");
    assert_eq!(counted.body().as_ref(), b"Request body too large");
    let read = taken.load(Ordering::SeqCst);
    assert!(
        read < FRAMES,
        "the holder stopped at the limit: {read} of {FRAMES} frames taken"
    );

    // Both hosts: within the limit the app reads it all; past it, 413; an
    // app that fails, APP_ERROR.
    for module in ["rs_up", "py_up"] {
        let app = proxy.module(module, 1).web_app("board");
        let small = futures::stream::iter(0..10).map(|_| {
            Ok::<_, std::convert::Infallible>(http_body::Frame::data(Bytes::from(vec![1u8; FRAME])))
        });
        let body = RequestBody::stream(http_body_util::StreamBody::new(small));
        let answer = app
            .call(http::Request::post("/api/echo").body(body).unwrap())
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{module}");
        let echoed: Value = serde_json::from_slice(answer.body()).unwrap();
        assert_eq!(echoed["body_len"], 10 * FRAME, "{module}");

        let taken = Arc::new(AtomicUsize::new(0));
        let request = http::Request::post("/api/echo")
            .body(upload(taken))
            .unwrap();
        let answer = app.call(request).await.unwrap();
        assert_eq!(answer.status(), 413, "{module}");
        assert_eq!(
            answer.body().as_ref(),
            b"Request body too large",
            "{module}"
        );

        let failed = app
            .call(http::Request::post("/api/fail").body(()).unwrap())
            .await
            .unwrap_err();
        assert_eq!(failed.kind(), CallErrorKind::AppError, "{module}: {failed}");
        assert_eq!(failed.message(), "App failed", "{module}");
    }

    reference.sigterm();
    reference.exits_ok().await;
    stop.cancel();
    tokio::time::timeout(DEADLINE, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
