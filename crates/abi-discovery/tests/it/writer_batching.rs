//! The group-commit writer on the in-memory store: batching, isolation of a
//! failing mutation, conflicts, REGISTRY_BUSY, store failures and timeouts,
//! shutdown, and read-your-writes through the facade.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::core_common;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use abi_discovery::discovery::{BUSY_MESSAGE, CONFLICT_BUDGET, MIN_ATTEMPTS};
use abi_discovery::discovery::{Discovery, DiscoveryConfig};
use abi_discovery::error::UNAVAILABLE_MESSAGE;
use abi_discovery::store::SnapshotStore;
use abi_discovery::store::memory::MemoryStore;
use abi_registry::{ErrorCode, Mutation, Rules};
use core_common::*;
use tokio::sync::Semaphore;

/// A memory store behind a [`TestStore`] whose compare-and-swaps wait for
/// permits.
fn gated() -> (Arc<MemoryStore>, Arc<TestStore>, Arc<Semaphore>) {
    let memory = Arc::new(MemoryStore::new());
    let gate = Arc::new(Semaphore::new(0));
    let mut store = TestStore::new(memory.clone());
    store.gate = Some(gate.clone());
    (memory, Arc::new(store), gate)
}

fn config(max_batch: usize) -> DiscoveryConfig {
    DiscoveryConfig {
        max_batch: NonZeroUsize::new(max_batch).unwrap(),
        ..DiscoveryConfig::default()
    }
}

/// Sends each mutation from its own task, in order: each is queued before
/// the next is sent.
async fn send_all(
    discovery: &Discovery,
    mutations: Vec<Mutation>,
) -> Vec<tokio::task::JoinHandle<Result<abi_registry::Outcome, abi_discovery::error::DiscoveryError>>>
{
    let mut handles = Vec::new();
    for mutation in mutations {
        let d = discovery.clone();
        handles.push(tokio::spawn(async move { d.mutate(mutation, OWNER).await }));
        // Let the task run until it is queued (current-thread runtime).
        tokio::task::yield_now().await;
    }
    handles
}

#[tokio::test]
async fn waiting_mutations_commit_together() {
    let (memory, store, gate) = gated();
    let harness = Harness::start(store.clone(), config(64));
    let d = harness.discovery.clone();

    // The first mutation's commit waits at the gate...
    let first = send_all(&d, vec![register("i-0")]).await;
    store.at_gate.notified().await;
    // ...while 19 more queue up behind it.
    let ids: Vec<String> = (1..20).map(|i| format!("i-{i}")).collect();
    let rest = send_all(&d, ids.iter().map(|id| register(id)).collect()).await;
    gate.add_permits(100);

    for handle in first.into_iter().chain(rest) {
        registered(handle.await.unwrap());
    }
    // 20 mutations, 2 compare-and-swaps: the 19 waiting ones went together.
    assert_eq!(store.cas_calls(), 2);
    let stats = d.stats();
    assert_eq!((stats.batches, stats.commits, stats.mutations), (2, 2, 20));

    // What was stored is what applying them one by one gives.
    let all: Vec<(Mutation, &str)> = std::iter::once("i-0".to_owned())
        .chain(ids)
        .map(|id| (register(&id), OWNER))
        .collect();
    let expected = replay(&Rules::default(), &all, NOW);
    let stored = decode(&memory.read().await.unwrap());
    assert_eq!(by_id(&stored), by_id(&expected));
    assert_eq!(stored.records.len(), 20);
    harness.stop().await;
}

#[tokio::test]
async fn batches_are_at_most_max_batch() {
    let (_memory, store, gate) = gated();
    let harness = Harness::start(store.clone(), config(3));
    let d = harness.discovery.clone();
    let first = send_all(&d, vec![register("i-0")]).await;
    store.at_gate.notified().await;
    let rest = send_all(&d, (1..10).map(|i| register(&format!("i-{i}"))).collect()).await;
    gate.add_permits(100);
    for handle in first.into_iter().chain(rest) {
        registered(handle.await.unwrap());
    }
    // 1 + ceil(9 / 3) batches.
    assert_eq!(store.cas_calls(), 4);
    assert_eq!(d.stats().batches, 4);
    harness.stop().await;
}

#[tokio::test]
async fn a_refused_mutation_leaves_the_rest_of_its_batch_alone() {
    let (memory, store, gate) = gated();
    let harness = Harness::start(store.clone(), config(64));
    let d = harness.discovery.clone();
    let first = send_all(&d, vec![register("i-0")]).await;
    store.at_gate.notified().await;
    let batch = send_all(
        &d,
        vec![
            register("i-1"),
            invalid_register("i-2"),
            register("i-3"),
            // Someone else's registration: refused, changes nothing.
            Mutation::Unregister(abi_proto::discovery::v1::UnregisterRequest {
                instance_id: "i-1".to_owned(),
                lease_token: "x".repeat(40),
                ..Default::default()
            }),
        ],
    )
    .await;
    gate.add_permits(100);
    registered(first.into_iter().next().unwrap().await.unwrap());
    let mut answers = Vec::new();
    for handle in batch {
        answers.push(handle.await.unwrap());
    }
    registered(answers[0].clone());
    let refused = answers[1].clone().unwrap_err();
    assert_eq!(refused.code(), ErrorCode::InvalidArgument);
    registered(answers[2].clone());
    assert!(answers[3].is_err(), "{:?}", answers[3]);

    assert_eq!(store.cas_calls(), 2);
    let stored = decode(&memory.read().await.unwrap());
    let ids: Vec<String> = by_id(&stored).into_keys().collect();
    assert_eq!(ids, ["i-0", "i-1", "i-3"]);
    harness.stop().await;
}

#[tokio::test]
async fn a_batch_of_refusals_writes_nothing() {
    let store = Arc::new(TestStore::new(Arc::new(MemoryStore::new())));
    let harness = Harness::start(store.clone(), config(64));
    let refused = harness
        .discovery
        .mutate(invalid_register("i-1"), OWNER)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), ErrorCode::InvalidArgument);
    assert_eq!(store.cas_calls(), 0);
    assert_eq!(store.inner.revision().await.unwrap(), 0);
    harness.stop().await;
}

#[tokio::test]
async fn conflicts_retry_on_a_fresh_read_without_losing_the_other_write() {
    let memory = Arc::new(MemoryStore::new());
    let store = Arc::new(TestStore::new(memory.clone()));
    let harness = Harness::start(store.clone(), config(64));
    let d = harness.discovery.clone();
    registered(d.mutate(register("mine-1"), OWNER).await);

    // Another owner writes behind this writer's back: its cache is stale.
    let other = Harness::start(memory.clone(), config(64));
    registered(other.discovery.mutate(register("theirs"), OWNER).await);

    registered(d.mutate(register("mine-2"), OWNER).await);
    let stats = d.stats();
    assert_eq!(stats.conflicts, 1, "the stale cache cost one conflict");
    assert_eq!(stats.retries, 1);
    let stored = decode(&memory.read().await.unwrap());
    let ids: Vec<String> = by_id(&stored).into_keys().collect();
    assert_eq!(ids, ["mine-1", "mine-2", "theirs"]);
    other.stop().await;
    harness.stop().await;
}

#[tokio::test]
async fn refusals_are_never_based_on_a_stale_cache() {
    let memory = Arc::new(MemoryStore::new());
    let store = Arc::new(TestStore::new(memory.clone()));
    let harness = Harness::start(store.clone(), config(64));
    let d = harness.discovery.clone();
    registered(d.mutate(register("mine"), OWNER).await);
    let reads = store.reads.load(Ordering::SeqCst);

    // Another owner registers an instance this writer's cache does not know.
    let other = Harness::start(memory.clone(), config(64));
    registered(other.discovery.mutate(register("theirs"), OWNER).await);

    // Renewing it here must find it, not answer LEASE_EXPIRED from the cache.
    let renewal = Mutation::Renew(abi_proto::discovery::v1::RenewRequest {
        instance_id: "theirs".to_owned(),
        lease_token: registration("m", "theirs").lease_token,
        initialized: true,
        ..Default::default()
    });
    d.mutate(renewal, OWNER).await.unwrap();
    assert_eq!(store.reads.load(Ordering::SeqCst), reads + 1);

    // A refusal on a current cache costs no download.
    let refused = d.mutate(invalid_register("x"), OWNER).await.unwrap_err();
    assert_eq!(refused.code(), ErrorCode::InvalidArgument);
    assert_eq!(store.reads.load(Ordering::SeqCst), reads + 1);
    other.stop().await;
    harness.stop().await;
}

/// Conflicts are retried past the reference's five attempts while the
/// budget lasts (another owner's write landed each time), then answered
/// `REGISTRY_BUSY`.
#[tokio::test]
async fn conflicts_past_the_budget_answer_registry_busy() {
    let store = TestStore::new(Arc::new(MemoryStore::new()));
    store.conflicts_left.store(usize::MAX, Ordering::SeqCst);
    let store = Arc::new(store);
    let harness = Harness::start(store.clone(), config(64));
    let started = std::time::Instant::now();
    let busy = harness
        .discovery
        .mutate(register("i-1"), OWNER)
        .await
        .unwrap_err();
    assert_eq!(busy.code(), ErrorCode::RegistryBusy);
    assert_eq!(busy.message(), BUSY_MESSAGE);
    let took = started.elapsed();
    assert!(
        took >= CONFLICT_BUDGET.mul_f64(0.8),
        "gave up after {took:?}"
    );
    let calls = store.cas_calls();
    assert!(calls > MIN_ATTEMPTS, "{calls} attempts");
    let stats = harness.discovery.stats();
    assert_eq!(
        (stats.busy, stats.conflicts, stats.commits),
        (1, calls as u64, 0)
    );
    // Twelve conflicts then a success is not busy (the reference's five
    // attempts would have answered REGISTRY_BUSY).
    store.conflicts_left.store(12, Ordering::SeqCst);
    registered(harness.discovery.mutate(register("i-1"), OWNER).await);
    harness.stop().await;
}

#[tokio::test]
async fn a_store_failure_answers_unavailable_and_the_next_batch_recovers() {
    let memory = Arc::new(MemoryStore::new());
    let store = TestStore::new(memory.clone());
    store.failures_left.store(1, Ordering::SeqCst);
    let store = Arc::new(store);
    let harness = Harness::start(store.clone(), config(64));
    let d = harness.discovery.clone();
    let failed = d.mutate(register("i-1"), OWNER).await.unwrap_err();
    assert_eq!(failed.code(), ErrorCode::Unavailable);
    assert_eq!(failed.message(), UNAVAILABLE_MESSAGE);
    assert_eq!(d.stats().store_errors, 1);
    let reads = store.reads.load(Ordering::SeqCst);
    registered(d.mutate(register("i-2"), OWNER).await);
    // The cache was dropped: the next batch read the store again.
    assert_eq!(store.reads.load(Ordering::SeqCst), reads + 1);
    assert_eq!(listed(&d).await, ["i-2"]);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_hanging_store_times_out_as_unavailable() {
    let mut store = TestStore::new(Arc::new(MemoryStore::new()));
    store.hang = true;
    store.timeout = Duration::from_secs(5);
    let cfg = DiscoveryConfig {
        store_timeout: Duration::from_secs(5),
        ..DiscoveryConfig::default()
    };
    let harness = Harness::start(Arc::new(store), cfg);
    let started = tokio::time::Instant::now();
    let failed = harness
        .discovery
        .mutate(register("i-1"), OWNER)
        .await
        .unwrap_err();
    assert_eq!(failed.code(), ErrorCode::Unavailable);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_hanging_lookup_times_out_as_unavailable() {
    let mut store = TestStore::new(Arc::new(MemoryStore::new()));
    store.hang_reads = true;
    let cfg = DiscoveryConfig {
        store_timeout: Duration::from_secs(3),
        ..DiscoveryConfig::default()
    };
    let harness = Harness::start(Arc::new(store), cfg);
    let started = tokio::time::Instant::now();
    let failed = harness.discovery.get_module(&get_m()).await.unwrap_err();
    assert_eq!(failed.code(), ErrorCode::Unavailable);
    assert_eq!(failed.message(), UNAVAILABLE_MESSAGE);
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert_eq!(harness.discovery.stats().store_errors, 1);
    harness.stop().await;
}

#[tokio::test(start_paused = true)]
async fn max_delay_lingers_for_a_fuller_batch() {
    let store = Arc::new(TestStore::new(Arc::new(MemoryStore::new())));
    let cfg = DiscoveryConfig {
        max_delay: Duration::from_millis(50),
        ..DiscoveryConfig::default()
    };
    let harness = Harness::start(store.clone(), cfg);
    let d = harness.discovery.clone();
    let first = send_all(&d, vec![register("i-0")]).await;
    // Arrives within the linger window (virtual time).
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = send_all(&d, vec![register("i-1")]).await;
    for handle in first.into_iter().chain(second) {
        registered(handle.await.unwrap());
    }
    assert_eq!(store.cas_calls(), 1);
    harness.stop().await;
}

#[tokio::test]
async fn shutdown_commits_what_was_queued_then_refuses() {
    let (memory, store, gate) = gated();
    let harness = Harness::start(store.clone(), config(64));
    let d = harness.discovery.clone();
    let first = send_all(&d, vec![register("i-0")]).await;
    store.at_gate.notified().await;
    let queued = send_all(&d, (1..5).map(|i| register(&format!("i-{i}"))).collect()).await;
    harness.shutdown.cancel();
    gate.add_permits(100);
    for handle in first.into_iter().chain(queued) {
        registered(handle.await.unwrap());
    }
    let Harness {
        discovery, core, ..
    } = harness;
    tokio::time::timeout(DEADLINE, core.stopped())
        .await
        .unwrap();
    let late = discovery.mutate(register("late"), OWNER).await.unwrap_err();
    assert_eq!(late.code(), ErrorCode::Unavailable);
    assert_eq!(decode(&memory.read().await.unwrap()).records.len(), 5);
}

#[tokio::test]
async fn lookups_see_acknowledged_writes_and_skip_unchanged_downloads() {
    let memory = Arc::new(MemoryStore::new());
    let store = Arc::new(TestStore::new(memory.clone()));
    let harness = Harness::start(store.clone(), config(64));
    let d = harness.discovery.clone();
    assert_eq!(listed(&d).await, Vec::<String>::new());
    registered(d.mutate(register("i-1"), OWNER).await);
    let reads = store.reads.load(Ordering::SeqCst);
    // Our own write: served from the writer's cache, no download.
    assert_eq!(listed(&d).await, ["i-1"]);
    assert_eq!(listed(&d).await, ["i-1"]);
    assert_eq!(store.reads.load(Ordering::SeqCst), reads);
    assert!(d.stats().cache_hits >= 2);

    // Another owner's write: the changed revision forces one download.
    let other = Harness::start(memory.clone(), config(64));
    registered(other.discovery.mutate(register("i-2"), OWNER).await);
    assert_eq!(listed(&d).await, ["i-1", "i-2"]);
    assert_eq!(store.reads.load(Ordering::SeqCst), reads + 1);
    other
        .discovery
        .mutate(unregister("i-1"), OWNER)
        .await
        .unwrap();
    assert_eq!(listed(&d).await, ["i-2"]);
    other.stop().await;
    harness.stop().await;
}

#[tokio::test]
async fn concurrent_lookups_share_checks_that_start_after_they_arrive() {
    let memory = Arc::new(MemoryStore::new());
    let gate = Arc::new(Semaphore::new(0));
    let mut store = TestStore::new(memory.clone());
    store.revision_gate = Some(gate.clone());
    let store = Arc::new(store);
    let harness = Harness::start(store.clone(), config(64));
    let d = harness.discovery.clone();

    // A first lookup's check is under way (held at the gate)...
    let early = {
        let d = d.clone();
        tokio::spawn(async move { listed(&d).await })
    };
    store.at_revision_gate.notified().await;
    // ...when another owner's write is acknowledged...
    let other = Harness::start(memory.clone(), config(64));
    registered(other.discovery.mutate(register("new"), OWNER).await);
    // ...and ten more lookups arrive: they share one later check.
    let late: Vec<_> = (0..10)
        .map(|_| {
            let d = d.clone();
            tokio::spawn(async move { listed(&d).await })
        })
        .collect();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    gate.add_permits(100);
    early.await.unwrap();
    for lookup in late {
        assert_eq!(lookup.await.unwrap(), ["new"]);
    }
    assert_eq!(store.revisions.load(Ordering::SeqCst), 2);
    assert_eq!(d.stats().lookups, 11);
    other.stop().await;
    harness.stop().await;
}

#[tokio::test]
async fn expired_records_are_pruned_on_write_and_hidden_from_lookups() {
    let memory = Arc::new(MemoryStore::new());
    let harness = Harness::start(memory.clone(), config(64));
    let d = harness.discovery.clone();
    registered(d.mutate(register("old"), OWNER).await);
    harness
        .clock
        .advance(Rules::default().lease_seconds() + 1.0);
    assert_eq!(listed(&d).await, Vec::<String>::new());
    // Still stored until the next write prunes it.
    assert_eq!(decode(&memory.read().await.unwrap()).records.len(), 1);
    registered(d.mutate(register("new"), OWNER).await);
    let stored = decode(&memory.read().await.unwrap());
    assert_eq!(by_id(&stored).into_keys().collect::<Vec<_>>(), ["new"]);
    harness.stop().await;
}
