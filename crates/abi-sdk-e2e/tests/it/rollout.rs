//! A two-module rollout: the new generation waits STAGED until both of its
//! modules are initialized, then serves while the old one drains and leaves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk_e2e::{World, instance_of};

async fn status_of(world: &World, module_id: &str, instance: &str) -> String {
    world
        .statuses(module_id)
        .await
        .into_iter()
        .find(|(id, _)| id == instance)
        .map(|(_, s)| s)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_module_rollout_cuts_over_only_when_complete() {
    let world = World::start(20.0).await;
    let cohort = "ro_x,ro_y";
    let v1 = [
        ("ABI_ROLLOUT_ID", "v1"),
        ("ABI_ROLLOUT_MODULES", cohort),
        ("E2E_JOB_HOST", "1"),
    ];
    let mut x1 = world.spawn("ro_x", &v1);
    let mut y1 = world.spawn("ro_y", &[&v1[..], &[("E2E_DEPS", "ro_x:1")]].concat());
    let x1_id = instance_of(&x1.expect("on_initialized").await);
    let y1_id = instance_of(&y1.expect("on_initialized").await);
    x1.expect("job_host start").await;
    world.wait_status("ro_x", "READY").await;
    world.wait_status("ro_y", "READY").await;

    // Half of v2: staged, and v1 keeps everything.
    let v2 = [
        ("ABI_ROLLOUT_ID", "v2"),
        ("ABI_ROLLOUT_MODULES", cohort),
        ("E2E_JOB_HOST", "1"),
    ];
    let mut x2 = world.spawn("ro_x", &v2);
    let x2_id = instance_of(&x2.expect("on_initialized").await);
    x2.expect("job_host prepare").await;
    x2.expect("run").await;
    assert_eq!(status_of(&world, "ro_x", &x2_id).await, "STAGED");
    assert_eq!(status_of(&world, "ro_x", &x1_id).await, "READY");
    assert_eq!(status_of(&world, "ro_y", &y1_id).await, "READY");
    assert!(
        !x2.saw("job_host start"),
        "a staged generation started its jobs"
    );
    assert!(!x1.saw("stopping"));

    // The rest of v2: it serves, v1 drains and leaves on its own.
    let mut y2 = world.spawn("ro_y", &[&v2[..], &[("E2E_DEPS", "ro_x:1")]].concat());
    let y2_id = instance_of(&y2.expect("on_initialized").await);
    x2.expect("job_host start").await;
    assert!(x1.wait().await.success(), "{:#?}", x1.lines);
    assert!(y1.wait().await.success(), "{:#?}", y1.lines);
    assert!(x1.saw("job_host drain"));
    abi_test_support::wait_until(abi_sdk_e2e::DEADLINE, || async {
        status_of(&world, "ro_x", &x2_id).await == "READY"
            && status_of(&world, "ro_y", &y2_id).await == "READY"
            && status_of(&world, "ro_x", &x1_id).await.is_empty()
    })
    .await
    .expect("v2 serves alone");

    for module in [&mut x2, &mut y2] {
        module.signal("TERM");
        assert!(module.wait().await.success());
    }
}
