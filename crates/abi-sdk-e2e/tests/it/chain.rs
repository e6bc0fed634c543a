//! A <- B <- C started in reverse order: each initializes only once its
//! dependency is READY; losing A degrades B and C, and A's return heals them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk_e2e::{ModuleProc, World};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_started_backwards_comes_up_in_dependency_order_and_recovers() {
    let world = World::start(3.0).await;
    let mut c = world.spawn("chain_c", &[("E2E_DEPS", "chain_b:1")]);
    let mut b = world.spawn("chain_b", &[("E2E_DEPS", "chain_a:1")]);
    world.wait_status("chain_c", "STARTING").await;
    world.wait_status("chain_b", "STARTING").await;
    assert!(!b.saw("on_initialized") && !c.saw("on_initialized"));

    let mut a = world.spawn("chain_a", &[]);
    // A module reports itself initialized only after its on_initialized, so a
    // dependent initializing earlier would have skipped the gate. (A's `run`
    // line is printed after its renewal is answered, which a dependent
    // reacting to the registry write can beat: it is not the reference point.)
    let a_init = ModuleProc::time_of(&a.expect("on_initialized").await);
    let a_run = ModuleProc::time_of(&a.expect("run").await);
    let b_line = b.expect("on_initialized").await;
    let b_init = ModuleProc::time_of(&b_line);
    let b_run = ModuleProc::time_of(&b.expect("run").await);
    let c_line = c.expect("on_initialized").await;
    let c_init = ModuleProc::time_of(&c_line);
    // Discovery already called the dependency READY when the hook ran.
    assert!(b_line.contains("deps_ready=true"), "{b_line}");
    assert!(c_line.contains("deps_ready=true"), "{c_line}");
    assert!(a_init < b_init, "B initialized before A did");
    assert!(b_init < c_init, "C initialized before B did");
    for id in ["chain_a", "chain_b", "chain_c"] {
        world.wait_status(id, "READY").await;
    }
    println!(
        "chain: A run -> B on_initialized {} us, B run -> C on_initialized {} us",
        b_init as i128 - a_run as i128,
        c_init as i128 - b_run as i128
    );

    // A dies without unregistering: once its lease passes, B and C degrade.
    a.kill().await;
    world.wait_status("chain_b", "DEGRADED").await;
    world.wait_status("chain_c", "DEGRADED").await;

    let mut a = world.spawn("chain_a", &[]);
    a.expect("run").await;
    world.wait_status("chain_b", "READY").await;
    world.wait_status("chain_c", "READY").await;

    for module in [&mut a, &mut b, &mut c] {
        module.signal("TERM");
        assert!(module.wait().await.success(), "{:#?}", module.lines);
    }
}
