//! A scripted stand-in for the discovery service on the SDK's in-process
//! transport ([`abi_sdk::LocalDiscovery`]): no NATS server, and under a paused
//! tokio clock the session's timers run in virtual time.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use abi_sdk::{DiscoveryClient, LocalDiscovery, LocalError, LocalSnapshot, TokenSource};
use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::watch;

/// The project every scripted client talks to.
pub const PROJECT: &str = "p";
/// How long a test waits for an event, in (virtual) tokio time.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub operation: String,
    pub payload: Vec<u8>,
    pub token: Option<String>,
}

type Answer = dyn Fn(&str, &[u8]) -> Option<Vec<u8>> + Send + Sync;

/// Answers discovery requests with `answer(operation, payload)`; `None` never
/// answers (the caller's deadline decides).
pub struct Fake {
    answer: Box<Answer>,
    /// Every request so far, in order; receivers wake on each one.
    seen_tx: watch::Sender<Vec<Seen>>,
}

impl fmt::Debug for Fake {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fake")
            .field("seen", &self.seen_tx.borrow().len())
            .finish_non_exhaustive()
    }
}

impl LocalDiscovery for Fake {
    fn request<'a>(
        &'a self,
        project: &'a str,
        operation: &'static str,
        token: &'a str,
        payload: Bytes,
    ) -> BoxFuture<'a, Result<Bytes, LocalError>> {
        if project != PROJECT {
            return Box::pin(std::future::ready(Err(LocalError::NoService(
                project.to_owned(),
            ))));
        }
        self.seen_tx.send_modify(|seen| {
            seen.push(Seen {
                operation: operation.to_owned(),
                payload: payload.to_vec(),
                token: (!token.is_empty()).then(|| token.to_owned()),
            });
        });
        match (self.answer)(operation, &payload) {
            Some(bytes) => Box::pin(std::future::ready(Ok(Bytes::from(bytes)))),
            None => Box::pin(std::future::pending()),
        }
    }

    fn snapshots(&self, _project: &str) -> Option<watch::Receiver<LocalSnapshot>> {
        None
    }
}

impl Fake {
    /// A fake serving [`PROJECT`] with `answer`.
    pub fn start<F>(answer: F) -> Arc<Self>
    where
        F: Fn(&str, &[u8]) -> Option<Vec<u8>> + Send + Sync + 'static,
    {
        Arc::new(Self {
            answer: Box::new(answer),
            seen_tx: watch::channel(Vec::new()).0,
        })
    }

    /// A client of [`PROJECT`] on this fake, sending `test-token`.
    pub fn client(self: &Arc<Self>) -> DiscoveryClient {
        DiscoveryClient::local(self.clone(), PROJECT, TokenSource::issued("test-token"))
    }

    pub fn ops(&self) -> Vec<String> {
        self.seen_tx
            .borrow()
            .iter()
            .map(|s| s.operation.clone())
            .collect()
    }

    pub fn requests(&self, operation: &str) -> Vec<Seen> {
        self.seen_tx
            .borrow()
            .iter()
            .filter(|s| s.operation == operation)
            .cloned()
            .collect()
    }

    /// Waits until `operation` was received `n` times and returns those
    /// requests; fails after [`DEADLINE`] of tokio time.
    pub async fn wait_for(&self, operation: &str, n: usize) -> Vec<Seen> {
        let mut seen_rx = self.seen_tx.subscribe();
        let count = |seen: &Vec<Seen>| seen.iter().filter(|s| s.operation == operation).count();
        tokio::time::timeout(DEADLINE, seen_rx.wait_for(|seen| count(seen) >= n))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{n} {operation} requests within {DEADLINE:?}, saw {:?}",
                    self.ops()
                )
            })
            .unwrap();
        self.requests(operation)
    }
}

/// Connects to a real nats-server (the KV watch tests).
pub async fn connect(url: &str) -> async_nats::Client {
    async_nats::connect(url).await.unwrap()
}

/// A NATS client of `project`, sending `test-token`.
pub fn client(nats: &async_nats::Client, project: &str) -> DiscoveryClient {
    DiscoveryClient::new(nats.clone(), project, TokenSource::issued("test-token"))
}
