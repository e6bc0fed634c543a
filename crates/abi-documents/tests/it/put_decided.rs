//! A put's early word (`Abi-Put-Decided`) over a real nats-server and SQLite
//! file: our service tells a stored put's stamps before its reply, which
//! still comes once the commit is durable, and tells nothing for a refused
//! put or a subject it will not publish to; the SDK's `put_deciding` reads
//! both answers from ours and the one reply from the reference's.

use std::time::Duration;

use abi_document_model::{Data, Value};
use abi_proto::document::v1 as pb;
use abi_sdk::CallErrorKind;
use abi_wire::documents::{self, Operation};
use futures::StreamExt as _;
use prost::Message as _;

use super::common::token;
use super::put_many::{Billing, ReferenceBilling};

fn data(n: i64) -> Data {
    Data::from([("n".to_owned(), Value::Int(n))])
}

fn put(id: &str, n: i64, if_version: Option<i64>) -> Vec<u8> {
    pb::PutRequest {
        namespace: "billing".into(),
        collection: "runs".into(),
        id: id.into(),
        data: Some(abi_document_model::pb::data_to_pb(&data(n))),
        if_version,
        ..Default::default()
    }
    .encode_to_vec()
}

/// Where one connection hears both a put's word and its reply, in the order
/// the broker delivered them.
struct Inbox {
    prefix: String,
    messages: async_nats::Subscriber,
}

impl Inbox {
    async fn open(client: &async_nats::Client) -> Self {
        let prefix = client.new_inbox();
        let messages = client
            .subscribe(format!("{prefix}.>"))
            .await
            .expect("subscribe");
        client.flush().await.expect("flush");
        Self { prefix, messages }
    }

    /// Sends put `body`, its reply to `<prefix>.reply.<n>`, its word asked
    /// for on `decided_to` (when given).
    async fn send(
        &self,
        client: &async_nats::Client,
        n: u32,
        decided_to: Option<&str>,
        body: Vec<u8>,
    ) {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(abi_wire::AUTH_HEADER, token("billing").as_str());
        if let Some(subject) = decided_to {
            headers.insert(documents::DECIDED_HEADER, subject);
        }
        client
            .publish_with_reply_and_headers(
                documents::operation(Operation::Put),
                format!("{}.reply.{n}", self.prefix),
                headers,
                body.into(),
            )
            .await
            .expect("publish");
    }

    fn word(&self, n: u32) -> String {
        format!("{}.word.{n}", self.prefix)
    }

    /// The next message: its subject after the prefix, and its answer.
    async fn next(&mut self) -> (String, documents::PutStamped) {
        let message = tokio::time::timeout(Duration::from_secs(10), self.messages.next())
            .await
            .expect("a message in time")
            .expect("the subscription open");
        let subject = message.subject.as_str()[self.prefix.len() + 1..].to_owned();
        let answer = documents::PutStamped::decode(message.payload).expect("a put's answer");
        (subject, answer)
    }
}

#[tokio::test]
async fn a_stored_put_is_told_before_its_reply_and_a_refused_one_is_not() {
    let Billing {
        dir: _dir,
        nats: _nats,
        ours,
        client,
        docs,
    } = Billing::start(false).await;
    let mut inbox = Inbox::open(&client).await;

    // Stored: the word first, with the stamps the reply then carries.
    inbox
        .send(&client, 1, Some(&inbox.word(1)), put("a", 1, Some(0)))
        .await;
    let (subject, word) = inbox.next().await;
    assert_eq!(subject, "word.1");
    let (subject, reply) = inbox.next().await;
    assert_eq!(subject, "reply.1");
    assert!(reply.error.is_none(), "{reply:?}");
    assert_eq!(word, reply);
    assert_eq!(reply.document.as_ref().map(|d| d.version), Some(1));

    // Refused: the reply alone (a word would have come before it).
    inbox
        .send(&client, 2, Some(&inbox.word(2)), put("a", 2, Some(0)))
        .await;
    let (subject, reply) = inbox.next().await;
    assert_eq!(subject, "reply.2");
    let code = reply.error.map(|e| e.code);
    assert_eq!(
        code.as_deref(),
        Some(abi_wire::ErrorCode::VersionConflict.as_str())
    );

    // A subject the service will not publish to, and no header at all:
    // stored, and answered only by the reply.
    let wildcard = format!("{}.*", inbox.prefix);
    inbox
        .send(&client, 3, Some(&wildcard), put("a", 3, Some(1)))
        .await;
    inbox.send(&client, 4, None, put("b", 4, None)).await;
    for n in [3, 4] {
        let (subject, reply) = inbox.next().await;
        assert_eq!(subject, format!("reply.{n}"));
        assert!(reply.error.is_none(), "{reply:?}");
    }
    let stored = docs.get("runs", "a").await.expect("stored");
    assert_eq!((stored.version, stored.data), (2, data(3)));

    // The SDK: decided, then the same document stored.
    let deciding = docs
        .put_deciding("runs", "c", &data(5), Some(0))
        .await
        .expect("decided");
    let written = deciding.stored.await.expect("stored");
    assert_eq!(deciding.written, written);
    assert_eq!(written.version, 1);
    let queued = docs.put_queue();
    let deciding = queued
        .put_deciding("runs", "c", &data(6), Some(1))
        .await
        .expect("decided");
    assert_eq!(deciding.stored.await.expect("stored").version, 2);
    let refused = docs
        .put_deciding("runs", "c", &data(7), Some(1))
        .await
        .expect_err("a stale version");
    assert_eq!(refused.kind(), CallErrorKind::VersionConflict);
    let stored = docs.get("runs", "c").await.expect("stored");
    assert_eq!((stored.version, stored.data), (2, data(6)));
    ours.stop().await;
}

#[tokio::test]
async fn put_deciding_against_the_reference_is_decided_by_its_reply() {
    let ReferenceBilling {
        dir: _dir,
        nats: _nats,
        mut reference,
        docs,
        ..
    } = ReferenceBilling::start().await;
    let deciding = docs
        .put_deciding("runs", "r", &data(1), Some(0))
        .await
        .expect("decided");
    let written = deciding.stored.await.expect("stored");
    assert_eq!((deciding.written.version, written.version), (1, 1));
    let refused = docs
        .put_deciding("runs", "r", &data(2), Some(0))
        .await
        .expect_err("exists");
    assert_eq!(refused.kind(), CallErrorKind::VersionConflict);
    let stored = docs.get("runs", "r").await.expect("stored");
    assert_eq!((stored.version, stored.data), (1, data(1)));
    reference.kill().await.expect("stop the reference server");
}
