//! Web apps across implementations: our `AppHost` (an app folder and an
//! axum router) and the reference's (`tests/interop/app_peer.py serve`: the
//! same folder and an ASGI app answering the same JSON) get the same
//! requests from the reference's caller (`call_app`, `pull_body`), and the
//! answers are compared; raw refusals are compared code and message; our
//! `AppClient` calls both, with a body above the inline limit each way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::sync::Arc;

use abi_proto::Message as _;
use abi_proto::app::v1 as pb;
use abi_sdk::apps::{AppCaller, AppHost, AppService, AppSpec, AppsExt as _};
use abi_sdk::{CallErrorKind, Config, Module, ModuleSpec, Runner};
use abi_sdk_e2e::{SECRET, World};
use abi_test_support::{python, requests, workspace_root};
use axum::Extension;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::models_fixture::{DEADLINE, Process, caller, raw_request, ready_instances};

/// A file above the inline limit (256 KiB): it streams.
const BIG_FILE: usize = 300 * 1024;
/// A request body above the inline limit: it follows.
const BIG_BODY: usize = 600 * 1024;

/// The app folder both hosts serve.
pub(crate) fn folder(dir: &std::path::Path) -> std::path::PathBuf {
    let board = dir.join("board");
    std::fs::create_dir_all(&board).unwrap();
    std::fs::write(board.join("manifest.json"), r#"{"name": "Board"}"#).unwrap();
    std::fs::write(board.join("index.html"), "<h1>board</h1>").unwrap();
    std::fs::write(board.join("big.js"), vec![b'x'; BIG_FILE]).unwrap();
    board
}

/// The JSON both apps answer (the reference peer's `echo_app`); ours
/// takes 200 ms for a query `slow`.
async fn echo(
    Extension(who): Extension<AppCaller>,
    request: axum::extract::Request,
) -> axum::response::Response {
    if request.uri().query() == Some("slow") {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let answer = json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query().unwrap_or(""),
        "body_len": body.len(),
        "caller": who.caller,
        "user_id": who.user_id,
    });
    axum::response::Response::builder()
        .header("content-type", "application/json")
        .body(axum::body::Body::from(answer.to_string()))
        .unwrap()
}

struct Quiet;
impl Module for Quiet {}

/// Server-sent events: `one` at once, `two` once `go` is notified, then
/// the end.
async fn events(
    axum::extract::State(go): axum::extract::State<Arc<tokio::sync::Notify>>,
) -> axum::response::Response {
    let first = futures::stream::once(async {
        Ok::<_, std::convert::Infallible>(Bytes::from_static(b"data: one\n\n"))
    });
    let second = futures::stream::once(async move {
        go.notified().await;
        Ok(Bytes::from_static(b"data: two\n\n"))
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(futures::StreamExt::chain(
            first, second,
        )))
        .unwrap()
}

/// Our module `module` serving the app `board`, in this process; `go`
/// releases its event stream's second event.
pub(crate) fn ours(
    world: &World,
    module: &str,
    board: &std::path::Path,
    go: Arc<tokio::sync::Notify>,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), abi_sdk::RunError>>,
) {
    let router = axum::Router::new()
        .route("/api/events", axum::routing::get(events))
        .with_state(go)
        .fallback(echo);
    serve_app(world, module, board, router)
}

/// Our module `module` serving the app of the folder `board` with
/// `router`, in this process, until the token is cancelled.
pub(crate) fn serve_app(
    world: &World,
    module: &str,
    board: &std::path::Path,
    router: axum::Router,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), abi_sdk::RunError>>,
) {
    let host = AppHost::new()
        .app(
            AppSpec::read(board)
                .unwrap()
                .service(AppService::new(router)),
        )
        .unwrap();
    let env = world.module_env(module);
    let lookup = move |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let config = Config::from_lookup(module, &lookup).unwrap();
    let stop = CancellationToken::new();
    let runner = Runner::new(ModuleSpec::new(module).serve(Arc::new(host)))
        .config(config)
        .handle_signals(false)
        .stop_on(stop.clone());
    (stop, tokio::spawn(runner.run(Quiet)))
}

/// The reference caller's answers to `requests` sent to `instance_id`.
async fn reference_calls(
    world: &World,
    module: &str,
    instance_id: &str,
    requests: &Value,
) -> Value {
    let out = Command::new(python())
        .arg(workspace_root().join("tests/interop/app_peer.py"))
        .args(["call", module, instance_id, &requests.to_string()])
        .envs(world.module_env("caller"))
        .stdin(Stdio::null())
        .output();
    let out = tokio::time::timeout(DEADLINE, out).await.unwrap().unwrap();
    assert!(
        out.status.success(),
        "app_peer.py call to {module} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A raw request to `instance_id`'s app: the refusal's (code, message).
async fn raw(
    world: &World,
    instance_id: &str,
    payload: Vec<u8>,
    headers: &[(&str, String)],
) -> (String, String) {
    let subject = abi_wire::apps::http_subject(&world.project, instance_id, "board");
    let reply = raw_request(world, subject, payload, headers).await;
    let response = pb::HttpResponse::decode(reply.payload.as_ref()).unwrap();
    let error = response.error.unwrap_or_default();
    (error.code, error.message)
}

/// The refusals both hosts must answer alike.
async fn refusals(world: &World, instance_id: &str) -> Vec<(String, String)> {
    let token = requests::bound_module_token(SECRET, "caller", instance_id);
    let auth = vec![(abi_wire::AUTH_HEADER, token.clone())];
    let get = |f: &dyn Fn(&mut pb::HttpRequest)| {
        let mut r = pb::HttpRequest {
            app: "board".into(),
            method: "GET".into(),
            path: "/".into(),
            ..Default::default()
        };
        f(&mut r);
        r.encode_to_vec()
    };
    let mut overflowed = auth.clone();
    overflowed.push((abi_wire::overflow::REQUEST_HEADER, "x:y".to_owned()));
    vec![
        raw(world, instance_id, b"\xff\xff garbage".to_vec(), &auth).await,
        raw(world, instance_id, get(&|_| {}), &overflowed).await,
        raw(world, instance_id, get(&|r| r.app = "other".into()), &auth).await,
        raw(world, instance_id, get(&|_| {}), &[]).await,
        raw(world, instance_id, get(&|r| r.path = "x".into()), &auth).await,
        raw(
            world,
            instance_id,
            get(&|r| {
                r.method = "POST".into();
                r.body_follows = true;
                r.body_inbox = "abi.not.an.inbox".into();
            }),
            &auth,
        )
        .await,
        raw(world, instance_id, get(&|r| r.user_id = "u1".into()), &auth).await,
    ]
}

/// What the reference caller sends to both hosts.
fn requests() -> Value {
    json!([
        {"path": "/"},
        {"path": "/index.html", "method": "HEAD"},
        {"path": "/big.js"},
        {"path": "/manifest.json"},
        {"path": "/../secret.html"},
        {"path": "/api/echo", "query": "x=1"},
        {"path": "/api/echo", "method": "POST", "body_len": 1000},
        {"path": "/", "user_id": "u1"},
    ])
}

/// An answer without what differs by design: the entity tag of a file
/// above the inline limit (the reference hashes its float mtime), and the
/// spacing of the apps' own JSON (compared as values).
fn comparable(mut answers: Value) -> Value {
    if let Some(big) = answers
        .get_mut(2)
        .and_then(|a| a.get_mut("headers"))
        .and_then(Value::as_object_mut)
    {
        big.remove("etag");
    }
    for answer in answers.as_array_mut().into_iter().flatten() {
        let parsed = answer["body"]
            .as_str()
            .and_then(|b| serde_json::from_str::<Value>(b).ok());
        if let Some(parsed) = parsed.filter(Value::is_object) {
            answer["body"] = parsed;
            answer["body_len"] = Value::Null;
            answer["headers"]["content-length"] = Value::Null;
        }
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_app_host_answers_the_reference_caller_as_the_reference_host_does() {
    let world = World::start(5.0).await;
    let dir = tempfile::tempdir().unwrap();
    let board = folder(dir.path());
    let go = Arc::new(tokio::sync::Notify::new());
    let (stop, task) = ours(&world, "rs_apps", &board, go.clone());
    let mut reference = Process::reference_app(&world, "py_apps", &board);
    let py_id = reference.instance_id().await;
    let rs_id = ready_instances(&world, "rs_apps", 1).await.remove(0);
    ready_instances(&world, "py_apps", 1).await;

    let from_ours = reference_calls(&world, "rs_apps", &rs_id, &requests()).await;
    let from_theirs = reference_calls(&world, "py_apps", &py_id, &requests()).await;
    assert_eq!(
        comparable(from_ours.clone()),
        comparable(from_theirs),
        "the same answers"
    );
    assert_eq!(from_ours[0]["body"], "<h1>board</h1>");
    assert_eq!(from_ours[0]["headers"]["cache-control"], "no-cache");
    assert_eq!(from_ours[1]["headers"]["content-length"], "14");
    assert_eq!(
        from_ours[2]["body_len"], BIG_FILE,
        "a file above the inline limit streams"
    );
    assert_eq!(
        from_ours[3]["status"], 200,
        "the manifest is not served: the app answers"
    );
    let echoed: Value = serde_json::from_str(from_ours[6]["body"].as_str().unwrap()).unwrap();
    assert_eq!(echoed["body_len"], 1000);
    assert_eq!(echoed["caller"], "caller");
    assert_eq!(
        from_ours[7]["error"],
        abi_wire::ErrorCode::PermissionDenied.as_str()
    );

    assert_eq!(
        refusals(&world, &rs_id).await,
        refusals(&world, &py_id).await
    );

    // Our caller, against both hosts: bodies above the inline limit both ways.
    let proxy = caller(&world, "caller").await;
    for module in ["rs_apps", "py_apps"] {
        let app = proxy.module(module, 1).web_app("board");
        let index = app
            .call(http::Request::get("/").body(Bytes::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(index.status(), 200, "{module}");
        assert_eq!(index.body().as_ref(), b"<h1>board</h1>", "{module}");
        let etag = index.headers()["etag"].clone();
        let again = app
            .call(
                http::Request::get("/")
                    .header("if-none-match", etag)
                    .body(Bytes::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{module}");
        let big = app
            .call(http::Request::get("/big.js").body(Bytes::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(big.body().len(), BIG_FILE, "{module}");
        let upload = app
            .call(
                http::Request::post("/api/echo")
                    .body(Bytes::from(vec![7u8; BIG_BODY]))
                    .unwrap(),
            )
            .await
            .unwrap();
        let echoed: Value = serde_json::from_slice(upload.body()).unwrap();
        assert_eq!(
            echoed["body_len"], BIG_BODY,
            "{module}: the upload followed"
        );
    }
    // Server-sent events leave as the app sends them: the first event is
    // read while the app still waits to send the second.
    let app = proxy.module("rs_apps", 1).web_app("board");
    let events = app
        .call_streaming(
            http::Request::get("/api/events")
                .body(Bytes::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let mut body = events.into_body();
    let first = tokio::time::timeout(DEADLINE, futures::StreamExt::next(&mut body))
        .await
        .expect("the first event arrives before the stream ends");
    assert_eq!(first.unwrap().unwrap().as_ref(), b"data: one\n\n");
    go.notify_one();
    let rest: Vec<Bytes> = futures::StreamExt::collect::<Vec<_>>(body)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rest.concat(), b"data: two\n\n");

    let missing = proxy.module("rs_apps", 1).web_app("nope");
    let err = missing
        .call(http::Request::get("/").body(Bytes::new()).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), CallErrorKind::AppNotFound);

    reference.sigterm();
    reference.exits_ok().await;
    stop.cancel();
    tokio::time::timeout(DEADLINE, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
