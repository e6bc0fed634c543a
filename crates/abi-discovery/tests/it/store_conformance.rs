//! One conformance suite for the snapshot store port, run against the
//! in-memory adapter and the JetStream adapter (real nats-server), plus
//! JetStream-specific checks: buckets made by the reference, other
//! connections' writes, the create race, deadlines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::core_common;

use std::sync::Arc;
use std::time::Duration;

use abi_discovery::store::jetstream::{
    JetStreamStore, JetStreamStoreConfig, KEY, MAX_VALUE_BYTES, MODE_REFRESH, bucket_name,
};
use abi_discovery::store::memory::MemoryStore;
use abi_discovery::store::{CasError, Snapshot, SnapshotStore, StoreError};
use abi_test_support::{NatsServer, unique_name};
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use core_common::{connect, jetstream_store};

/// The port's contract, on an empty store.
async fn conformance(store: &dyn SnapshotStore) {
    // A missing key reads as empty at revision 0.
    assert_eq!(store.read().await.unwrap(), Snapshot::default());
    assert_eq!(store.revision().await.unwrap(), 0);

    // Creating needs revision 0.
    let r1 = store
        .compare_and_swap(Bytes::from_static(b"one"), 0)
        .await
        .unwrap();
    assert!(r1 > 0);
    let read = store.read().await.unwrap();
    assert_eq!((read.bytes.as_ref(), read.revision), (&b"one"[..], r1));
    assert_eq!(store.revision().await.unwrap(), r1);

    // Creating again (revision 0) conflicts and changes nothing.
    let again = store.compare_and_swap(Bytes::from_static(b"zero"), 0).await;
    assert!(matches!(again, Err(CasError::Conflict)), "{again:?}");
    let read = store.read().await.unwrap();
    assert_eq!((read.bytes.as_ref(), read.revision), (&b"one"[..], r1));

    // Writing on the current revision moves it on.
    let r2 = store
        .compare_and_swap(Bytes::from_static(b"two"), r1)
        .await
        .unwrap();
    assert!(r2 > r1);

    // A stale revision conflicts and changes nothing.
    let stale = store
        .compare_and_swap(Bytes::from_static(b"stale"), r1)
        .await;
    assert!(matches!(stale, Err(CasError::Conflict)), "{stale:?}");
    let future = store
        .compare_and_swap(Bytes::from_static(b"future"), r2 + 10)
        .await;
    assert!(matches!(future, Err(CasError::Conflict)), "{future:?}");
    let read = store.read().await.unwrap();
    assert_eq!((read.bytes.as_ref(), read.revision), (&b"two"[..], r2));
    assert_eq!(store.revision().await.unwrap(), r2);

    // An empty value is a valid snapshot (an empty registry).
    let r3 = store.compare_and_swap(Bytes::new(), r2).await.unwrap();
    assert_eq!(
        store.read().await.unwrap(),
        Snapshot {
            bytes: Bytes::new(),
            revision: r3
        }
    );
}

#[tokio::test]
async fn memory_store_conforms() {
    conformance(&MemoryStore::new()).await;
}

#[tokio::test]
async fn memory_store_concurrent_cas_has_one_winner() {
    let store = Arc::new(MemoryStore::new());
    let attempts = (0..16).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .compare_and_swap(Bytes::from(format!("{i}")), 0)
                .await
                .is_ok()
        })
    });
    let wins = futures::future::join_all(attempts)
        .await
        .into_iter()
        .filter(|won| *won.as_ref().unwrap())
        .count();
    assert_eq!(wins, 1);
    assert_eq!(store.revision().await.unwrap(), 1);
}

#[tokio::test]
async fn jetstream_store_conforms() {
    let server = NatsServer::start().await;
    let client = connect(&[server.url()]).await;
    let store = jetstream_store(&client, &unique_name("conform"), 1).await;
    conformance(&store).await;
}

#[tokio::test]
async fn jetstream_bucket_has_the_reference_settings() {
    let server = NatsServer::start().await;
    let client = connect(&[server.url()]).await;
    let project = unique_name("settings");
    let _store = jetstream_store(&client, &project, 1).await;
    let context = jetstream::new(client);
    let mut stream = context
        .get_stream(format!("KV_{}", bucket_name(&project)))
        .await
        .unwrap();
    let config = &stream.info().await.unwrap().config;
    assert_eq!(config.max_messages_per_subject, 1);
    assert_eq!(config.max_message_size, MAX_VALUE_BYTES);
    assert_eq!(config.num_replicas, 1);
    assert_eq!(
        config.subjects,
        vec![format!("$KV.{}.>", bucket_name(&project))]
    );
}

#[tokio::test]
async fn jetstream_store_opens_a_bucket_made_like_the_reference() {
    let server = NatsServer::start().await;
    let client = connect(&[server.url()]).await;
    let project = unique_name("reference");
    let bucket = bucket_name(&project);
    // What nats.py's create_key_value(history=1, max_value_size=512 KiB)
    // sends: no direct gets, rollups allowed, deletes denied, discard new.
    let context = jetstream::new(client.clone());
    context
        .create_stream(stream::Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            allow_direct: false,
            allow_rollup: true,
            deny_delete: true,
            discard: stream::DiscardPolicy::New,
            duplicate_window: Duration::from_secs(120),
            max_messages_per_subject: 1,
            max_message_size: MAX_VALUE_BYTES,
            max_messages: -1,
            max_bytes: -1,
            max_consumers: -1,
            num_replicas: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    // The reference wrote a snapshot first.
    let written = context
        .publish(format!("$KV.{bucket}.{KEY}"), Bytes::from_static(b"python"))
        .await
        .unwrap()
        .await
        .unwrap();

    let store = jetstream_store(&client, &project, 3).await;
    // No direct gets on this bucket: change checks ask the leader.
    assert!(!store.checks_direct());
    assert_eq!(store.revision().await.unwrap(), written.sequence);
    let read = store.read().await.unwrap();
    assert_eq!(
        (read.bytes.as_ref(), read.revision),
        (&b"python"[..], written.sequence)
    );
    let next = store
        .compare_and_swap(Bytes::from_static(b"rust"), written.sequence)
        .await
        .unwrap();
    assert!(next > written.sequence);
    let stale = store
        .compare_and_swap(Bytes::from_static(b"late"), written.sequence)
        .await;
    assert!(matches!(stale, Err(CasError::Conflict)), "{stale:?}");
    // A write by another client (the reference) is seen by the next check.
    let python = context
        .publish(
            format!("$KV.{bucket}.{KEY}"),
            Bytes::from_static(b"python2"),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(store.revision().await.unwrap(), python.sequence);
    let read = store.read().await.unwrap();
    assert_eq!(
        (read.bytes.as_ref(), read.revision),
        (&b"python2"[..], python.sequence)
    );
    // Its existing (single) replica setting was kept, not ours.
    let mut stream = context.get_stream(format!("KV_{bucket}")).await.unwrap();
    assert_eq!(stream.info().await.unwrap().config.num_replicas, 1);
}

#[tokio::test]
async fn jetstream_reads_see_writes_from_another_connection() {
    let server = NatsServer::start().await;
    let project = unique_name("other");
    let a = jetstream_store(&connect(&[server.url()]).await, &project, 1).await;
    let b = jetstream_store(&connect(&[server.url()]).await, &project, 1).await;
    // Our one-replica bucket: change checks are direct gets.
    assert!(a.checks_direct() && b.checks_direct());
    let mut revision = 0;
    for i in 0..20u32 {
        let (writer, reader) = if i.is_multiple_of(2) {
            (&a, &b)
        } else {
            (&b, &a)
        };
        let value = Bytes::from(format!("v{i}"));
        revision = writer
            .compare_and_swap(value.clone(), revision)
            .await
            .unwrap();
        // The other connection sees it at once: the token and the value.
        assert_eq!(reader.revision().await.unwrap(), revision);
        let read = reader.read().await.unwrap();
        assert_eq!((read.bytes, read.revision), (value, revision));
    }
}

#[tokio::test]
async fn jetstream_concurrent_opens_share_one_bucket() {
    let server = NatsServer::start().await;
    let project = unique_name("race");
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(connect(&[server.url()]).await);
    }
    let stores = futures::future::join_all(
        clients
            .iter()
            .map(|client| jetstream_store(client, &project, 1)),
    )
    .await;
    let revision = stores[0]
        .compare_and_swap(Bytes::from_static(b"first"), 0)
        .await
        .unwrap();
    for store in &stores {
        assert_eq!(store.read().await.unwrap().revision, revision);
    }
}

#[tokio::test]
async fn jetstream_rejects_values_over_512_kib_without_writing() {
    let server = NatsServer::start().await;
    let client = connect(&[server.url()]).await;
    let store = jetstream_store(&client, &unique_name("big"), 1).await;
    let big = Bytes::from(vec![7u8; MAX_VALUE_BYTES as usize + 1]);
    let result = store.compare_and_swap(big, 0).await;
    assert!(matches!(result, Err(CasError::Store(_))), "{result:?}");
    assert_eq!(store.read().await.unwrap(), Snapshot::default());
}

#[tokio::test]
async fn jetstream_calls_fail_within_their_deadline_when_the_server_is_gone() {
    let mut server = NatsServer::start().await;
    let client = connect(&[server.url()]).await;
    let context = jetstream::new(client);
    let timeout = Duration::from_millis(500);
    let store = JetStreamStore::open(
        &context,
        &JetStreamStoreConfig {
            project: unique_name("gone"),
            replicas: 1,
            timeout,
        },
    )
    .await
    .unwrap();
    server.stop();
    let started = std::time::Instant::now();
    let read = store.read().await;
    assert!(read.is_err(), "{read:?}");
    let cas = store.compare_and_swap(Bytes::from_static(b"x"), 0).await;
    assert!(matches!(cas, Err(CasError::Store(_))), "{cas:?}");
    let revision = store.revision().await;
    assert!(
        matches!(
            revision,
            Err(StoreError::TimedOut { .. } | StoreError::Backend { .. })
        ),
        "{revision:?}"
    );
    // Three calls, each bounded by its deadline (plus slack for a busy box).
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn jetstream_store_follows_a_re_created_bucket() {
    let server = NatsServer::start().await;
    let project = unique_name("recreated");
    let client = connect(&[server.url()]).await;
    let old = jetstream_store(&client, &project, 1).await;
    let mut revision = 0;
    for value in ["a", "b", "c"] {
        revision = old
            .compare_and_swap(Bytes::from(value), revision)
            .await
            .unwrap();
    }
    assert_eq!(old.revision().await.unwrap(), 3);
    // Someone deletes the bucket and another owner creates it again: its
    // sequences start from 1, below what `old` has seen.
    jetstream::new(client.clone())
        .delete_key_value(bucket_name(&project))
        .await
        .unwrap();
    let new = jetstream_store(&connect(&[server.url()]).await, &project, 1).await;
    let first = new
        .compare_and_swap(Bytes::from_static(b"new"), 0)
        .await
        .unwrap();
    assert_eq!(first, 1);
    // Within the refresh period the old store notices and re-reads.
    let noticed = std::time::Instant::now();
    let epoch = old.epoch();
    abi_test_support::wait_until(MODE_REFRESH * 20, || async {
        old.revision().await.unwrap() == first
    })
    .await
    .expect("the old store never followed the new bucket");
    assert!(noticed.elapsed() < MODE_REFRESH * 20);
    assert_eq!(
        old.epoch(),
        epoch + 1,
        "revisions started over: a new epoch"
    );
    let read = old.read().await.unwrap();
    assert_eq!((read.bytes.as_ref(), read.revision), (&b"new"[..], first));
}
