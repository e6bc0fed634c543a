//! nats-server killed and restarted (same port, same store) under load: the
//! service reconnects and serves again, and nothing acknowledged is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::core_common;

use std::collections::BTreeSet;
use std::time::Duration;

use abi_discovery::discovery::DiscoveryConfig;
use abi_discovery::store::SnapshotStore;
use abi_test_support::{NatsServer, unique_name, wait_until};
use core_common::load::{Load, check};
use core_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_under_load_loses_nothing_acknowledged() {
    let mut server = NatsServer::start().await;
    let project = unique_name("restart");
    let client = connect(&[server.url()]).await;
    let store = std::sync::Arc::new(jetstream_store(&client, &project, 1).await);
    let cfg = DiscoveryConfig {
        store_timeout: Duration::from_secs(2),
        ..DiscoveryConfig::default()
    };
    let harness = Harness::start(store, cfg);
    let load = Load::start(&harness.discovery, 4);

    wait_until(DEADLINE, || async { load.acked() >= 20 })
        .await
        .expect("load runs before the crash");
    server.restart().await;
    let before = load.acked();
    wait_until(DEADLINE, || async { load.acked() >= before + 20 })
        .await
        .expect("the service writes again after the restart");
    let seen = load.finish().await;

    // The service's own lookups and a fresh connection agree on what is stored.
    let listed: BTreeSet<String> = listed(&harness.discovery).await.into_iter().collect();
    check(&listed, &seen);
    let fresh = jetstream_store(&connect(&[server.url()]).await, &project, 1).await;
    let stored: BTreeSet<String> = by_id(&decode(&fresh.read().await.unwrap()))
        .into_keys()
        .collect();
    assert_eq!(stored, listed);
    check(&stored, &seen);
    eprintln!(
        "acked={} unknown={} busy={} stats={:?}",
        seen.acked.len(),
        seen.unknown.len(),
        seen.busy.len(),
        harness.discovery.stats()
    );
    harness.stop().await;
}
