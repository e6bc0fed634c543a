//! A 3-node JetStream cluster with the bucket at 3 replicas: the stream
//! leader is killed under load; after re-election the service keeps working
//! and nothing acknowledged is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::core_common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use abi_discovery::discovery::DiscoveryConfig;
use abi_discovery::store::SnapshotStore;
use abi_discovery::store::jetstream::{JetStreamStore, JetStreamStoreConfig};
use abi_test_support::{NatsCluster, unique_name, wait_for_stream_leader, wait_until};
use core_common::load::{Load, check};
use core_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_leader_loss_under_load_loses_nothing_acknowledged() {
    let mut cluster = NatsCluster::start(3).await;
    let project = unique_name("cluster");
    let stream = abi_wire::discovery::registry_stream(&project);
    let client = connect(&cluster.urls()).await;
    let store = Arc::new(jetstream_store(&client, &project, 3).await);
    let cfg = DiscoveryConfig {
        store_timeout: Duration::from_secs(3),
        ..DiscoveryConfig::default()
    };
    let harness = Harness::start(store, cfg);

    let leader = wait_for_stream_leader(&client, &stream, None, DEADLINE).await;
    let leader_index = cluster.node_index(&leader).expect("one of our nodes");

    let load = Load::start(&harness.discovery, 4);
    wait_until(DEADLINE, || async { load.acked() >= 20 })
        .await
        .expect("load runs before the leader goes");
    cluster.stop_node(leader_index);
    let before = load.acked();
    wait_until(DEADLINE, || async { load.acked() >= before + 20 })
        .await
        .expect("the service writes again after re-election");
    let seen = load.finish().await;
    let new_leader = wait_for_stream_leader(&client, &stream, Some(&leader), DEADLINE).await;
    assert_ne!(new_leader, leader);

    let listed: BTreeSet<String> = listed(&harness.discovery).await.into_iter().collect();
    check(&listed, &seen);
    // A fresh connection to the survivors reads the same through the leader.
    let survivors: Vec<String> = (0..cluster.len())
        .filter(|&i| i != leader_index)
        .map(|i| cluster.url(i))
        .collect();
    let fresh = jetstream_store(&connect(&survivors).await, &project, 3).await;
    let stored: BTreeSet<String> = by_id(&decode(&fresh.read().await.unwrap()))
        .into_keys()
        .collect();
    assert_eq!(stored, listed);
    check(&stored, &seen);

    // The old leader comes back as a follower and the service still serves.
    cluster.start_node(leader_index).await;
    registered(
        harness
            .discovery
            .mutate(register("after-return"), OWNER)
            .await,
    );
    assert!(listed_contains(&harness, "after-return").await);
    eprintln!(
        "acked={} unknown={} busy={} stats={:?}",
        seen.acked.len(),
        seen.unknown.len(),
        seen.busy.len(),
        harness.discovery.stats()
    );
    harness.stop().await;
}

/// A service started before its cluster has formed waits for it: opening a
/// replicated bucket on a node that has lost its peers fails at once, and
/// the patient open succeeds once the peers are back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bucket_opens_once_a_forming_cluster_can_place_it() {
    let mut cluster = NatsCluster::start(3).await;
    cluster.stop_node(1);
    cluster.stop_node(2);
    let client = connect(&[cluster.url(0)]).await;
    let context = async_nats::jetstream::new(client.clone());
    let cfg = JetStreamStoreConfig {
        project: unique_name("forming"),
        replicas: 3,
        timeout: Duration::from_secs(2),
    };
    let alone = JetStreamStore::open(&context, &cfg).await;
    assert!(alone.is_err(), "one node of three placed three replicas?");

    let patient = tokio::spawn({
        let (context, cfg) = (context.clone(), cfg.clone());
        async move { JetStreamStore::open_within(&context, &cfg, 2 * DEADLINE).await }
    });
    cluster.start_node(1).await;
    cluster.start_node(2).await;
    let store = tokio::time::timeout(3 * DEADLINE, patient)
        .await
        .expect("the patient open returns")
        .expect("its task")
        .expect("the bucket opens once the peers are back");
    assert_eq!(
        store
            .compare_and_swap(bytes::Bytes::from_static(b"x"), 0)
            .await
            .ok(),
        Some(1)
    );
}

async fn listed_contains(harness: &Harness, id: &str) -> bool {
    listed(&harness.discovery).await.iter().any(|i| i == id)
}
