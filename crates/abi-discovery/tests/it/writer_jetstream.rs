//! The writer on a real JetStream bucket: group commit under concurrent
//! callers, and rough latency figures (printed with `--nocapture`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::core_common;

use std::sync::Arc;
use std::time::Instant;

use abi_discovery::discovery::DiscoveryConfig;
use abi_discovery::store::SnapshotStore;
use abi_registry::{Mutation, Rules};
use abi_test_support::{NatsServer, unique_name};
use core_common::*;

/// Concurrent callers in the group-commit test.
const CALLERS: usize = 64;

#[tokio::test]
async fn concurrent_mutations_share_compare_and_swaps() {
    let server = NatsServer::start().await;
    let client = connect(&[server.url()]).await;
    let store = Arc::new(jetstream_store(&client, &unique_name("group"), 1).await);
    let harness = Harness::start(store.clone(), DiscoveryConfig::default());

    let ids: Vec<String> = (0..CALLERS).map(|i| format!("g-{i:02}")).collect();
    let started = Instant::now();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (d, m) = (harness.discovery.clone(), register(id));
            tokio::spawn(async move { d.mutate(m, OWNER).await })
        })
        .collect();
    for task in tasks {
        registered(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    let stats = harness.discovery.stats();
    assert!(
        stats.commits < CALLERS as u64,
        "{CALLERS} mutations took {} compare-and-swaps",
        stats.commits
    );
    assert_eq!(stats.mutations, CALLERS as u64);

    // Stored = applying them one by one.
    let all: Vec<(Mutation, &str)> = ids.iter().map(|id| (register(id), OWNER)).collect();
    let expected = replay(&Rules::default(), &all, NOW);
    assert_eq!(
        by_id(&decode(&store.read().await.unwrap())),
        by_id(&expected)
    );

    // Rough figures: one caller at a time, and lookups with and without a
    // changed snapshot.
    let sequential = 50;
    let t = Instant::now();
    for i in 0..sequential {
        registered(
            harness
                .discovery
                .mutate(register(&format!("s-{i}")), OWNER)
                .await,
        );
    }
    let per_write = t.elapsed() / sequential;
    let t = Instant::now();
    for _ in 0..sequential {
        assert_eq!(listed(&harness.discovery).await.len(), CALLERS + 50);
    }
    let per_cached_lookup = t.elapsed() / sequential;
    let before = harness.discovery.stats();
    let t = Instant::now();
    let lookups: Vec<_> = (0..CALLERS)
        .map(|_| {
            let d = harness.discovery.clone();
            tokio::spawn(async move { listed(&d).await.len() })
        })
        .collect();
    for lookup in lookups {
        assert_eq!(lookup.await.unwrap(), CALLERS + 50);
    }
    let concurrent_lookups = t.elapsed();
    let after = harness.discovery.stats();
    let checks = (after.cache_hits + after.reloads) - (before.cache_hits + before.reloads);
    assert!(
        checks < CALLERS as u64,
        "{CALLERS} concurrent lookups made {checks} checks"
    );
    let reloads_before = harness.discovery.stats().reloads;
    let t = Instant::now();
    for _ in 0..10 {
        // A write from another connection makes each lookup re-download.
        let raw = store.read().await.unwrap();
        store
            .compare_and_swap(raw.bytes, raw.revision)
            .await
            .unwrap();
        listed(&harness.discovery).await;
    }
    let per_reload_round = t.elapsed() / 10;
    assert_eq!(harness.discovery.stats().reloads, reloads_before + 10);
    eprintln!(
        "group commit: {CALLERS} concurrent mutations in {elapsed:?} with {} CAS; \
         sequential write {per_write:?}; cached lookup {per_cached_lookup:?}; \
         write+reloading lookup {per_reload_round:?}; \
         {CALLERS} concurrent lookups in {concurrent_lookups:?} with {checks} checks",
        stats.commits
    );
    harness.stop().await;
}

#[tokio::test]
async fn after_the_bucket_is_re_created_the_cache_serves_and_writes_go_through() {
    let server = NatsServer::start().await;
    let project = unique_name("recreated");
    let client = connect(&[server.url()]).await;
    let store = Arc::new(jetstream_store(&client, &project, 1).await);
    let harness = Harness::start(store.clone(), DiscoveryConfig::default());
    let discovery = &harness.discovery;
    for id in ["old-1", "old-2", "old-3"] {
        registered(discovery.mutate(register(id), OWNER).await);
    }
    assert_eq!(listed(discovery).await.len(), 3);

    // The bucket is deleted and another owner creates it again, with one
    // registration at revision 1: below every revision this process saw.
    async_nats::jetstream::new(client.clone())
        .delete_key_value(abi_discovery::store::jetstream::bucket_name(&project))
        .await
        .unwrap();
    let other = jetstream_store(&connect(&[server.url()]).await, &project, 1).await;
    let fresh = replay(&Rules::default(), &[(register("fresh"), OWNER)], NOW);
    let bytes = prost::Message::encode_to_vec(&fresh);
    assert_eq!(other.compare_and_swap(bytes.into(), 0).await.unwrap(), 1);

    // Lookups follow once the store notices (within its refresh period).
    abi_test_support::wait_until(DEADLINE, || async { listed(discovery).await == ["fresh"] })
        .await
        .expect("lookups never showed the re-created bucket");

    // From then on an unchanged registry is served from the cache ...
    let before = discovery.stats();
    for _ in 0..5 {
        assert_eq!(listed(discovery).await, ["fresh"]);
    }
    let after = discovery.stats();
    assert_eq!(
        after.reloads, before.reloads,
        "unchanged lookups downloaded"
    );
    assert_eq!(after.cache_hits, before.cache_hits + 5);

    // ... and writes start from it without a conflict.
    registered(discovery.mutate(register("again"), OWNER).await);
    assert_eq!(discovery.stats().conflicts, after.conflicts);
    assert_eq!(listed(discovery).await, ["again", "fresh"]);
    harness.stop().await;
}
