//! A scripted stand-in for the discovery service on a real nats-server.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use abi_sdk::{DiscoveryClient, TokenSource};
use futures::StreamExt;

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub operation: String,
    pub payload: Vec<u8>,
    pub token: Option<String>,
}

/// Answers discovery requests with `answer(operation, payload)`; `None` drops
/// the request (no reply).
pub struct Fake {
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fake {
    pub async fn start<F>(nats: &async_nats::Client, project: &str, answer: F) -> Self
    where
        F: Fn(&str, &[u8]) -> Option<Vec<u8>> + Send + Sync + 'static,
    {
        let mut sub = nats
            .subscribe(abi_wire::discovery::operation_named(project, ">"))
            .await
            .unwrap();
        nats.flush().await.unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let record = seen.clone();
        let nats = nats.clone();
        let task = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let operation = msg.subject.rsplit('.').next().unwrap().to_owned();
                let token = msg
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("Nats-Auth-Token"))
                    .map(|v| v.as_str().to_owned());
                record.lock().unwrap().push(Seen {
                    operation: operation.clone(),
                    payload: msg.payload.to_vec(),
                    token,
                });
                if let (Some(reply), Some(bytes)) = (msg.reply, answer(&operation, &msg.payload)) {
                    nats.publish(reply, bytes.into()).await.unwrap();
                }
            }
        });
        Self { seen, task }
    }

    pub fn ops(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.operation.clone())
            .collect()
    }

    pub fn requests(&self, operation: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.operation == operation)
            .cloned()
            .collect()
    }
}

pub async fn connect(url: &str) -> async_nats::Client {
    async_nats::connect(url).await.unwrap()
}

pub fn client(nats: &async_nats::Client, project: &str) -> DiscoveryClient {
    DiscoveryClient::new(nats.clone(), project, TokenSource::issued("test-token"))
}
