//! A 3-node JetStream cluster with the bucket at 3 replicas: the stream
//! leader is killed under load; after re-election the service keeps working
//! and nothing acknowledged is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod core_common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use abi_discovery::discovery::DiscoveryConfig;
use abi_discovery::store::SnapshotStore;
use abi_discovery::store::jetstream::bucket_name;
use abi_test_support::{NatsCluster, unique_name, wait_until};
use core_common::load::{Load, check};
use core_common::*;

/// The stream leader's server name, if one is elected (asked through `client`).
async fn stream_leader(client: &async_nats::Client, stream: &str) -> Option<String> {
    let context = async_nats::jetstream::new(client.clone());
    let info = tokio::time::timeout(Duration::from_secs(5), async {
        context.get_stream(stream).await.ok()?.get_info().await.ok()
    })
    .await
    .ok()??;
    info.cluster.and_then(|c| c.leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_leader_loss_under_load_loses_nothing_acknowledged() {
    let mut cluster = NatsCluster::start(3).await;
    let project = unique_name("cluster");
    let stream = format!("KV_{}", bucket_name(&project));
    let client = connect(&cluster.urls()).await;
    let store = Arc::new(jetstream_store(&client, &project, 3).await);
    let cfg = DiscoveryConfig {
        store_timeout: Duration::from_secs(3),
        ..DiscoveryConfig::default()
    };
    let harness = Harness::start(store, cfg);

    let leader = stream_leader(&client, &stream)
        .await
        .expect("a stream leader");
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
    let new_leader = elected(&client, &stream, Some(&leader)).await;
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

/// Waits for a stream leader other than `not` and returns its name.
async fn elected(client: &async_nats::Client, stream: &str, not: Option<&str>) -> String {
    let found = std::sync::Mutex::new(None);
    wait_until(DEADLINE, || async {
        let leader = stream_leader(client, stream)
            .await
            .filter(|leader| Some(leader.as_str()) != not);
        let elected = leader.is_some();
        *found.lock().unwrap() = leader;
        elected
    })
    .await
    .expect("a stream leader is elected");
    found.into_inner().unwrap().unwrap()
}

async fn listed_contains(harness: &Harness, id: &str) -> bool {
    listed(&harness.discovery).await.iter().any(|i| i == id)
}
