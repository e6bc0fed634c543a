//! A module written with the Python reference SDK and one written with ours
//! share one registry.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk_e2e::{ModuleProc, PYTHON_MODULE, World};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_module_waits_for_ours_and_follows_its_state() {
    let world = World::start(3.0).await;
    let mut env = world.module_env("py_consumer");
    env.push(("E2E_DEPS".into(), "rs_provider:1".into()));
    let mut consumer = ModuleProc::spawn_python("py_consumer", PYTHON_MODULE, &env);
    world.wait_status("py_consumer", "STARTING").await;
    assert!(!consumer.saw("on_initialized"));

    let mut provider = world.spawn("rs_provider", &[]);
    let ready = ModuleProc::time_of(&provider.expect("run").await);
    let initialized = ModuleProc::time_of(&consumer.expect("on_initialized").await);
    assert!(ready <= initialized);
    world.wait_status("py_consumer", "READY").await;

    // Ours drains and leaves: the reference module degrades.
    provider.signal("TERM");
    assert!(provider.wait().await.success());
    world.wait_status("py_consumer", "DEGRADED").await;
    consumer.kill().await;
}
