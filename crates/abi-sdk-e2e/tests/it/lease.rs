//! Losing the lease (service down past it, or an admin eviction) ends in a
//! new registration under the same instance id.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk_e2e::{DEADLINE, World, health_addr, http_get, instance_of, now_epoch, stored_records};
use abi_test_support::wait_until;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_lost_while_the_service_is_down_is_taken_again_under_the_same_id() {
    let mut world = World::start(2.0).await;
    let mut module = world.spawn(
        "leased",
        &[("ABI_HEALTH_PORT", "0"), ("ABI_HEALTH_HOST", "127.0.0.1")],
    );
    let instance = instance_of(&module.expect("on_initialized").await);
    let probe = health_addr(&module.expect("health").await);
    world.wait_status("leased", "READY").await;
    let ready = |want: u16| {
        let probe = probe.clone();
        async move {
            wait_until(DEADLINE, || async {
                http_get(&probe, "/ready")
                    .await
                    .is_some_and(|(c, _)| c == want)
            })
            .await
            .is_ok()
        }
    };
    assert!(ready(200).await, "/ready never 200 while READY");

    world.service.stop().await;
    // Renewals fail: the probe says so, liveness stays green.
    assert!(
        ready(503).await,
        "/ready stayed 200 without a confirmed lease"
    );
    assert_eq!(http_get(&probe, "/health").await.map(|(c, _)| c), Some(200));
    // Wait, by the clock, until the stored lease has passed.
    let expires_at = stored_records(&world)
        .await
        .into_iter()
        .find_map(|r| r.instance.filter(|i| i.instance_id == instance))
        .expect("record stored")
        .expires_at;
    wait_until(DEADLINE, || async { now_epoch() > expires_at + 0.5 })
        .await
        .unwrap();
    world.service.resume().await;

    wait_until(DEADLINE, || async {
        world
            .statuses("leased")
            .await
            .iter()
            .any(|(id, s)| *id == instance && s == "READY")
    })
    .await
    .expect("READY again under the same instance id");
    assert_eq!(world.statuses("leased").await.len(), 1);
    assert!(ready(200).await, "/ready did not recover");
    assert!(
        !module.saw("exit"),
        "the module kept running: {:#?}",
        module.lines
    );
    module.signal("TERM");
    assert!(module.wait().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_instance_registers_again_with_a_new_lease() {
    let world = World::start(4.0).await;
    let mut module = world.spawn("evicted", &[]);
    let instance = instance_of(&module.expect("on_initialized").await);
    world.wait_status("evicted", "READY").await;
    let hash_of = |records: Vec<abi_sdk::pb::RegistryRecord>| {
        records
            .into_iter()
            .find(|r| {
                r.instance
                    .as_ref()
                    .is_some_and(|i| i.instance_id == instance)
            })
            .map(|r| r.lease_hash)
    };
    let before = hash_of(stored_records(&world).await).expect("stored");

    let evicted = world.admin.evict(&instance).await.unwrap();
    assert_eq!(evicted.instance_id, instance);
    wait_until(DEADLINE, || async {
        hash_of(stored_records(&world).await).is_some_and(|h| h != before)
    })
    .await
    .expect("registered again with a new lease token");
    world.wait_status("evicted", "READY").await;
    assert_eq!(world.statuses("evicted").await[0].0, instance);
    module.signal("TERM");
    assert!(module.wait().await.success());
    world.wait_gone("evicted").await;
}
