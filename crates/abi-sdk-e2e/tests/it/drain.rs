//! SIGTERM while work is in flight: the instance shows DRAINING, the work
//! finishes, then the module unloads and unregisters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk_e2e::{ModuleProc, World};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_work_before_unregistering() {
    let world = World::start(20.0).await;
    let mut module = world.spawn("worker", &[("E2E_WORK_MS", "4000"), ("E2E_JOB_HOST", "1")]);
    module.expect("work_started").await;
    world.wait_status("worker", "READY").await;

    module.signal("TERM");
    world.wait_status("worker", "DRAINING").await;
    assert!(
        !module.saw("work_finished"),
        "DRAINING should be visible while work runs: {:#?}",
        module.lines
    );
    let finished = ModuleProc::time_of(&module.expect("work_finished").await);
    assert!(module.wait().await.success(), "{:#?}", module.lines);
    let unloaded = ModuleProc::time_of(&module.expect("on_unloaded").await);
    assert!(finished <= unloaded, "unloaded before the work finished");
    assert!(module.saw("job_host drain"));
    world.wait_gone("worker").await;
}
