//! Our overflow host and client beside the Python reference's on one real
//! nats-server, every direction: a reply parked by either host is downloaded
//! by the other side's client, and an upload held by either host is read by
//! the other host for its service. Each read is compared byte for byte (by
//! length and SHA-256), and each session is released once read.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Stdio;
use std::time::{Duration, SystemTime};

use abi_overflow::{Caller, OverflowHost};
use abi_test_support::{NatsServer, python, workspace_root};
use abi_wire::overflow as wire;
use async_nats::HeaderMap;
use bytes::Bytes;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const SECRET: &str = "overflow-interop-secret-of-32-bytes!";
/// Above the broker's 1 MiB, and not a multiple of a chunk.
const SIZE: usize = 2 * 1024 * 1024 + 515;

/// The bytes both sides move: `i % 251`, as `overflow_peer.py` builds them.
fn pattern() -> Bytes {
    (0..SIZE)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

fn summary(data: &[u8]) -> Value {
    json!({"len": data.len(), "sha256": hex::encode(Sha256::digest(data))})
}

fn token() -> String {
    abi_auth::issue_service_token(
        "mover",
        SECRET,
        Duration::from_secs(600),
        SystemTime::now(),
        None,
    )
    .expect("token")
}

fn auth_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(abi_wire::AUTH_HEADER, token().as_str());
    headers
}

/// The reference peer: its host and client, driven line by line.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Peer {
    async fn start(url: &str) -> (Self, Value) {
        let mut child = Command::new(python())
            .arg(workspace_root().join("tests/interop/overflow_peer.py"))
            .args([url, SECRET, &token(), &SIZE.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn overflow_peer.py");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut peer = Self {
            child,
            stdin,
            lines,
        };
        let ready = peer.next().await;
        (peer, ready)
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .expect("the peer answers within 60 s")
            .expect("read the peer")
            .expect("the peer is still running");
        serde_json::from_str(&line).expect("one JSON line")
    }

    async fn ask(&mut self, command: &str) -> Value {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .expect("write to the peer");
        self.next().await
    }

    async fn quit(mut self) {
        self.stdin.write_all(b"quit\n").await.expect("quit");
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the peer stops")
            .expect("wait");
        assert!(status.success());
    }
}

#[tokio::test]
async fn our_host_and_client_interoperate_with_the_reference_host_every_way() {
    let nats = NatsServer::start().await;
    // Alone on the bus, the reference host owns the upload it opens.
    let (mut peer, ready) = Peer::start(&nats.url()).await;
    let theirs = ready["owner"].as_str().expect("owner").to_owned();
    let their_upload = ready["upload"].as_str().expect("upload").to_owned();
    let their_parked = ready["parked"].as_str().expect("parked").to_owned();
    assert_eq!(wire::owner_of(&their_upload), Some(theirs.as_str()));

    let client = async_nats::connect(nats.url()).await.expect("connect");
    let ours = OverflowHost::start(client.clone(), SECRET)
        .await
        .expect("our host");
    let headers = auth_headers();
    let expected = summary(&pattern());

    // Their upload, read by our host for its service (over NATS: not ours).
    let fetched = ours
        .fetch(&their_upload, Some(&headers))
        .await
        .expect("our host reads the reference's upload");
    assert_eq!(summary(&fetched), expected);

    // Their parked reply, downloaded by our client.
    let caller = Caller::new(client.clone(), headers.clone(), Duration::from_secs(10));
    let downloaded = caller
        .download(&their_parked, SIZE)
        .await
        .expect("our client downloads the reference's parked reply");
    assert_eq!(summary(&downloaded), expected);

    // Our parked reply, downloaded by their client, then released.
    let parked = ours.park(Some(&headers), pattern()).expect("park");
    assert_eq!(ours.sessions(), 1);
    let read = peer.ask(&format!("download {parked} {SIZE}")).await;
    assert_eq!(
        read, expected,
        "the reference's client reads our parked reply"
    );
    assert_eq!(ours.sessions(), 0, "its close released it");

    // Our upload (their host no longer opens), read by their host.
    assert_eq!(peer.ask("stop_accepting").await["stopped_accepting"], true);
    let upload = caller
        .upload(
            &pattern(),
            wire::chunk_size(client.server_info().max_payload),
        )
        .await
        .expect("our client uploads");
    assert_eq!(wire::owner_of(&upload), Some(ours.owner()));
    let read = peer.ask(&format!("fetch {upload}")).await;
    assert_eq!(read, expected, "the reference's host reads our upload");
    assert_eq!(ours.sessions(), 0, "its close released it");

    // Another caller's session is not readable, and says so.
    let parked = ours.park(Some(&headers), pattern()).expect("park");
    let mut stranger = HeaderMap::new();
    let other = abi_auth::issue_service_token(
        "someone-else",
        SECRET,
        Duration::from_secs(600),
        SystemTime::now(),
        None,
    )
    .expect("token");
    stranger.insert(abi_wire::AUTH_HEADER, other.as_str());
    let err = Caller::new(client.clone(), stranger, Duration::from_secs(10))
        .download(&parked, SIZE)
        .await
        .expect_err("another caller's reply");
    assert_eq!(err.code, abi_wire::ErrorCode::PermissionDenied);
    assert_eq!(ours.sessions(), 1, "the refusal released nothing");

    peer.quit().await;
    ours.stop().await;
}
