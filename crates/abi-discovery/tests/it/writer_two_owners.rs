//! Two owner processes (two Discovery instances on two connections) sharing
//! one JetStream bucket on a real nats-server: read-your-writes across
//! owners, and concurrent load with no lost or duplicated mutation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::core_common;

use std::collections::BTreeSet;
use std::sync::Arc;

use abi_discovery::discovery::{Discovery, DiscoveryConfig};
use abi_discovery::store::SnapshotStore;
use abi_registry::ErrorCode;
use abi_test_support::{NatsServer, unique_name};
use core_common::*;

/// Each owner runs this many concurrent callers...
const CALLERS: usize = 4;
/// ...each registering this many instances one after the other, and
/// unregistering every third again.
const PER_CALLER: usize = 15;

#[derive(Debug, Default)]
struct Tally {
    /// Instances whose registration was acknowledged and which were not
    /// acknowledged as unregistered afterwards.
    expected: BTreeSet<String>,
    acknowledged: usize,
    busy: usize,
}

/// Registers through `discovery` and unregisters through `other` (the other
/// owner), so each owner's refusals are tested against the other's writes.
async fn caller(discovery: Discovery, other: Discovery, name: String) -> Tally {
    let mut tally = Tally::default();
    for n in 0..PER_CALLER {
        let id = format!("{name}-{n}");
        match discovery.mutate(register(&id), OWNER).await {
            Ok(_) => {
                tally.acknowledged += 1;
                tally.expected.insert(id.clone());
            }
            Err(e) if e.code() == ErrorCode::RegistryBusy => {
                tally.busy += 1;
                continue;
            }
            Err(e) => panic!("register {id}: {e}"),
        }
        if n.is_multiple_of(3) {
            match other.mutate(unregister(&id), OWNER).await {
                Ok(_) => {
                    tally.acknowledged += 1;
                    tally.expected.remove(&id);
                }
                Err(e) if e.code() == ErrorCode::RegistryBusy => tally.busy += 1,
                Err(e) => panic!("unregister {id}: {e}"),
            }
        }
    }
    tally
}

/// The change check of a one-replica bucket is a direct get; a write by
/// another owner (another store on another connection) is still seen by the
/// very next lookup, and lookups with nothing changed download nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_on_the_direct_check_see_the_other_owners_writes_at_once() {
    let server = NatsServer::start().await;
    let project = unique_name("direct");
    let store_a = Arc::new(jetstream_store(&connect(&[server.url()]).await, &project, 1).await);
    let store_b = Arc::new(jetstream_store(&connect(&[server.url()]).await, &project, 1).await);
    assert!(store_a.checks_direct() && store_b.checks_direct());
    let a = Harness::start(store_a, DiscoveryConfig::default());
    let b = Harness::start(store_b.clone(), DiscoveryConfig::default());
    for i in 0..20 {
        let id = format!("direct-{i}");
        // Alternate the writer, so each owner's cache is one write behind.
        let (writer, reader) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        registered(writer.discovery.mutate(register(&id), OWNER).await);
        let before = reader.discovery.stats();
        let module = reader.discovery.get_module(&get_m()).await.unwrap();
        assert!(
            module.instances.iter().any(|x| x.instance_id == id),
            "{id} not seen by the next lookup of the other owner"
        );
        assert_eq!(reader.discovery.stats().reloads, before.reloads + 1);
        // Nothing changed since: the same check serves the cached snapshot.
        let again = reader.discovery.stats();
        reader.discovery.get_module(&get_m()).await.unwrap();
        let after = reader.discovery.stats();
        assert_eq!(after.reloads, again.reloads);
        assert_eq!(after.cache_hits, again.cache_hits + 1);
    }
    assert!(store_b.checks_direct());
    assert_eq!(
        a.discovery.stats().store_errors + b.discovery.stats().store_errors,
        0
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_owners_share_one_bucket_without_losing_writes() {
    let server = NatsServer::start().await;
    let project = unique_name("owners");
    let store_a = Arc::new(jetstream_store(&connect(&[server.url()]).await, &project, 1).await);
    let store_b = Arc::new(jetstream_store(&connect(&[server.url()]).await, &project, 1).await);
    let a = Harness::start(store_a, DiscoveryConfig::default());
    let b = Harness::start(store_b.clone(), DiscoveryConfig::default());

    // Read-your-writes across owners: what one acknowledged, the other's
    // very next lookup shows.
    for i in 0..5 {
        let id = format!("ryw-{i}");
        registered(a.discovery.mutate(register(&id), OWNER).await);
        assert!(
            listed(&b.discovery).await.contains(&id),
            "{id} not seen by b"
        );
        b.discovery.mutate(unregister(&id), OWNER).await.unwrap();
        assert!(
            !listed(&a.discovery).await.contains(&id),
            "{id} still seen by a"
        );
    }
    assert!(b.discovery.stats().reloads > 0);

    // Concurrent load from both owners.
    let mut tasks = Vec::new();
    for (owner, harness, other) in [("a", &a, &b), ("b", &b, &a)] {
        for c in 0..CALLERS {
            let (d, o) = (harness.discovery.clone(), other.discovery.clone());
            tasks.push(tokio::spawn(caller(d, o, format!("{owner}{c}"))));
        }
    }
    let mut expected = BTreeSet::new();
    let (mut acknowledged, mut busy) = (0, 0);
    for task in tasks {
        let tally = task.await.unwrap();
        expected.extend(tally.expected);
        acknowledged += tally.acknowledged;
        busy += tally.busy;
    }
    assert!(
        acknowledged > CALLERS * PER_CALLER,
        "most mutations went through"
    );

    // The bucket holds exactly the acknowledged outcome, each instance once.
    let stored = by_id(&decode(&store_b.read().await.unwrap()));
    let stored: BTreeSet<String> = stored.into_keys().collect();
    assert_eq!(stored, expected);
    // Both owners' lookups agree with it.
    for harness in [&a, &b] {
        let seen: BTreeSet<String> = listed(&harness.discovery).await.into_iter().collect();
        assert_eq!(seen, expected);
    }
    let (sa, sb) = (a.discovery.stats(), b.discovery.stats());
    eprintln!(
        "acknowledged={acknowledged} busy={busy} commits={} conflicts={} batches={}",
        sa.commits + sb.commits,
        sa.conflicts + sb.conflicts,
        sa.batches + sb.batches
    );
    // Busy answers are whole batches.
    assert!(sa.busy + sb.busy <= busy as u64);
    assert_eq!(sa.busy + sb.busy == 0, busy == 0);
    assert_eq!(sa.store_errors + sb.store_errors, 0);
    a.stop().await;
    b.stop().await;
}
