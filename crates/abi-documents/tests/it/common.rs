//! Fixtures shared by the tests that serve documents over NATS: our service
//! in process, the reference server as a child process, and tokens.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use abi_documents::config::{Storage, Valid};
use abi_documents::store::{SqliteConfig, SqliteStore};
use abi_process::{NatsSettings, Secret};
use abi_test_support::{python, workspace_root};
use abi_wire::ServerList;
use abi_wire::documents::{self, Operation};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// The project secret both servers check tokens with.
pub const SECRET: &str = "document-service-test-secret-32-bytes!";

/// Our service, in process, over a SQLite file in `dir`.
pub struct OurServer {
    stop: CancellationToken,
    done: tokio::task::JoinHandle<Result<(), abi_documents::run::RunError>>,
}

impl OurServer {
    pub async fn start(nats_url: &str, dir: &Path, strict: bool) -> Self {
        let store = SqliteStore::open(SqliteConfig::new(dir.join("docs.sqlite")))
            .await
            .expect("open the SQLite store");
        let config = Valid {
            nats: NatsSettings::plain(ServerList::parse(nats_url).expect("url")),
            storage: Storage::Sqlite(dir.join("docs.sqlite")),
            secret: Secret::new(SECRET),
            admin_identities: vec!["api".into(), "engine".into()],
            strict_namespaces: strict,
            shutdown_grace: Duration::from_secs(5),
            max_concurrent_requests: std::num::NonZeroUsize::new(64).expect("64"),
            metrics_addr: None,
        };
        let stop = CancellationToken::new();
        let done = tokio::spawn(abi_documents::run::run_with(config, store, stop.clone()));
        let server = Self { stop, done };
        server.wait_serving(nats_url).await;
        server
    }

    /// Until a request on the endpoints gets an answer (bounded).
    async fn wait_serving(&self, nats_url: &str) {
        let client = async_nats::connect(nats_url).await.expect("connect");
        for _ in 0..200 {
            let sent = client
                .request(
                    documents::operation(Operation::Collections),
                    Vec::new().into(),
                )
                .await;
            if sent.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("our document service never answered");
    }

    pub async fn stop(self) {
        self.stop.cancel();
        self.done
            .await
            .expect("the service task")
            .expect("a clean stop");
    }
}

/// The reference server (`tests/interop/document_peer.py serve`) over
/// `dir/reference.sqlite`, once it serves.
pub async fn reference_server(nats_url: &str, dir: &Path) -> Child {
    let mut child = Command::new(python())
        .arg(workspace_root().join("tests/interop/document_peer.py"))
        .args(["serve", nats_url, SECRET])
        .arg(dir.join("reference.sqlite"))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the reference document server");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the reference server starts within 60 s")
        .expect("read its stdout");
    assert_eq!(ready.as_deref(), Some("ready"));
    child
}

/// Runs `tests/interop/document_peer.py` with `args` (a client mode) and
/// returns the one JSON object it printed.
pub async fn document_peer(args: &[&str]) -> serde_json::Value {
    let out = Command::new(python())
        .arg(workspace_root().join("tests/interop/document_peer.py"))
        .args(args)
        .output()
        .await
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the Python client failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

/// A service token for `identity`, signed with [`SECRET`].
pub fn token(identity: &str) -> String {
    abi_auth::issue_service_token(
        identity,
        SECRET,
        Duration::from_secs(600),
        SystemTime::now(),
        None,
    )
    .expect("token")
}
