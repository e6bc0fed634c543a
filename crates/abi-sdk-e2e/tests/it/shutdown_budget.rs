//! A stopping module fits its shutdown budget (`ABI_SHUTDOWN_GRACE_SECS`)
//! whatever is down: it finishes its work in flight, exits 0 before an
//! orchestrator would kill it, and still unregisters when everything is up.
//! A module started before discovery waits for it instead of exiting.
//!
//! Real processes and real signals. The elapsed-time checks are bounds on
//! the feature under test (the budget), not performance measurements.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use abi_sdk_e2e::{ModuleProc, World};

/// The budget the modules here get; the work in flight takes half of it.
const GRACE_SECS: u64 = 5;
const WORK_MS: &str = "2500";
/// Room on top of the budget for the process to exit and the test to see
/// it on a loaded 2-core machine.
const MARGIN: Duration = Duration::from_secs(2);

fn spawn_worker(world: &World, id: &str) -> ModuleProc {
    let grace = GRACE_SECS.to_string();
    world.spawn(
        id,
        &[
            ("E2E_WORK_MS", WORK_MS),
            ("ABI_SHUTDOWN_GRACE_SECS", grace.as_str()),
        ],
    )
}

/// Sends SIGTERM and waits for the exit within the budget plus the margin;
/// returns how long the stop took.
async fn stop_within_budget(module: &mut ModuleProc, case: &str) -> Duration {
    let bound = Duration::from_secs(GRACE_SECS) + MARGIN;
    let sent = Instant::now();
    module.signal("TERM");
    let status = tokio::time::timeout(bound, module.wait())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{case}: still running {bound:?} after SIGTERM (budget {GRACE_SECS} s); lines: {:#?}",
                module.lines
            )
        });
    let took = sent.elapsed();
    eprintln!("{case}: stopped in {took:?} (budget {GRACE_SECS} s)");
    assert!(
        status.success(),
        "{case}: exit {status:?}; lines: {:#?}",
        module.lines
    );
    assert!(module.saw("exit ok"), "{case}: {:#?}", module.lines);
    assert!(
        module.saw("work_finished"),
        "{case}: work in flight did not finish: {:#?}",
        module.lines
    );
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nats_gone_a_module_finishes_its_work_and_exits_within_its_budget() {
    let mut world = World::start(20.0).await;
    let mut module = spawn_worker(&world, "cut-off");
    module.expect("work_started").await;
    world.wait_status("cut-off", "READY").await;

    // Like a crash of the broker: the client starts reconnecting.
    world.nats.stop();
    stop_within_budget(&mut module, "NATS gone").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_discovery_gone_a_module_finishes_its_work_and_exits_within_its_budget() {
    let mut world = World::start(20.0).await;
    let mut module = spawn_worker(&world, "orphan");
    module.expect("work_started").await;
    world.wait_status("orphan", "READY").await;

    // NATS stays up; nobody answers the discovery subjects.
    world.service.stop().await;
    stop_within_budget(&mut module, "discovery gone").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_everything_up_a_stop_within_the_budget_still_unregisters() {
    let world = World::start(20.0).await;
    let mut module = spawn_worker(&world, "tidy");
    module.expect("work_started").await;
    world.wait_status("tidy", "READY").await;

    stop_within_budget(&mut module, "everything up").await;
    // Gone at once, not after the 20 s lease.
    assert!(
        world.statuses("tidy").await.is_empty(),
        "still registered after the stop: {:?}",
        world.statuses("tidy").await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_started_before_discovery_waits_for_it_and_registers() {
    let mut world = World::start(20.0).await;
    world.service.stop().await;
    let mut module = world.spawn("early", &[("E2E_STARTUP_MS", "60000")]);
    module.expect("on_load").await;

    // A register call that finds no responders gives up after 5 s; past
    // that, the module must still be waiting rather than have exited.
    let exited = tokio::time::timeout(Duration::from_secs(7), module.expect("exit")).await;
    assert!(
        exited.is_err(),
        "the module did not wait for discovery: {:#?}",
        module.lines
    );
    assert!(!module.saw("on_initialized"));

    world.service.resume().await;
    module.expect("on_initialized").await;
    world.wait_status("early", "READY").await;
    module.signal("TERM");
    assert!(module.wait().await.success(), "{:#?}", module.lines);
    world.wait_gone("early").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_discovery_asks_for_gives_work_the_drain_timeout_not_the_budget() {
    // A 4 s lease: renewals every second, so the old generation hears of
    // the new one quickly.
    let world = World::start(4.0).await;
    // Work far longer than a 1 s budget.
    let mut old = world.spawn(
        "generation",
        &[
            ("ABI_ROLLOUT_ID", "v1"),
            ("E2E_WORK_MS", "6000"),
            ("ABI_SHUTDOWN_GRACE_SECS", "1"),
        ],
    );
    old.expect("work_started").await;
    world.wait_status("generation", "READY").await;

    // A newer generation serves: discovery tells the old one to drain. No
    // orchestrator is waiting to kill it, so its work may take its time.
    let mut new = world.spawn("generation", &[("ABI_ROLLOUT_ID", "v2")]);
    new.expect("run").await;
    old.expect("stopping").await;
    assert!(!old.saw("work_finished"), "{:#?}", old.lines);
    assert!(old.wait().await.success(), "{:#?}", old.lines);
    assert!(
        old.saw("work_finished"),
        "the drain cut the work short: {:#?}",
        old.lines
    );

    let took = stop_signal_only(&mut new).await;
    assert!(took < Duration::from_secs(GRACE_SECS) + MARGIN);
}

/// SIGTERM, then the exit (status 0) and how long it took.
async fn stop_signal_only(module: &mut ModuleProc) -> Duration {
    let sent = Instant::now();
    module.signal("TERM");
    assert!(module.wait().await.success(), "{:#?}", module.lines);
    sent.elapsed()
}
