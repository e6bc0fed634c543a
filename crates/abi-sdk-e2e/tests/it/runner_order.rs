//! The runner's order of hooks, hosts and registration, and how startup fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk_e2e::World;

fn position(events: &[String], name: &str) -> usize {
    events
        .iter()
        .position(|e| e == name)
        .unwrap_or_else(|| panic!("no {name} in {events:?}"))
}

fn before(events: &[String], first: &str, then: &str) {
    assert!(
        position(events, first) < position(events, then),
        "{first} should come before {then}: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_rollout_hooks_and_hosts_run_in_order_and_sigterm_drains() {
    let world = World::start(20.0).await;
    let mut module = world.spawn("solo", &[("E2E_JOB_HOST", "1")]);
    module.expect("run").await;
    world.wait_status("solo", "READY").await;

    module.signal("TERM");
    assert!(module.wait().await.success());
    let events = module.events();
    for (first, then) in [
        ("on_load", "on_initialized"),
        ("on_initialized", "job_host"),
        ("job_host", "run"),
        ("run", "on_unloaded"),
        ("on_unloaded", "exit"),
    ] {
        before(&events, first, then);
    }
    // Without a rollout the job host starts before readiness, and never prepares alone.
    assert!(module.saw("job_host start"));
    assert!(!module.saw("job_host prepare"));
    let drain = module
        .lines
        .iter()
        .position(|l| l.starts_with("EVENT job_host drain"));
    let close = module
        .lines
        .iter()
        .position(|l| l.starts_with("EVENT job_host close"));
    assert!(drain.unwrap() < close.unwrap(), "{:#?}", module.lines);
    assert!(module.saw("exit ok"));
    world.wait_gone("solo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_host_declares_binds_after_initialization_and_closes_after_the_job_hosts() {
    let world = World::start(20.0).await;
    let mut module = world.spawn("served", &[("E2E_JOB_HOST", "1"), ("E2E_SERVED_HOST", "1")]);
    module.expect("run").await;
    world.wait_status("served", "READY").await;
    // What the host declared is in the registered descriptor.
    let found = world
        .admin
        .module("served", 1)
        .agent("recorder")
        .await
        .unwrap();
    assert_eq!(found.descriptor.description, "declared by the served host");

    module.signal("TERM");
    assert!(module.wait().await.success());
    let events = module.events();
    for (first, then) in [
        ("on_initialized", "served_host"),
        ("served_host", "run"),
        ("run", "on_unloaded"),
    ] {
        before(&events, first, then);
    }
    let line = |prefix: &str| {
        module
            .lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {:#?}", module.lines))
    };
    // Bound (with the registered instance id) before it starts.
    let bind = &module.lines[line("EVENT served_host bind")];
    assert!(
        bind.contains(&format!("instance={} ", found.instance_id)),
        "{bind}"
    );
    assert!(line("EVENT served_host bind") < line("EVENT served_host start"));
    assert!(line("EVENT served_host start") < line("EVENT run"));
    assert!(line("EVENT served_host drain") < line("EVENT served_host close"));
    // Closed after the job hosts, as the reference closes agents and models.
    assert!(line("EVENT job_host close") < line("EVENT served_host close"));
    world.wait_gone("served").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_rollout_the_job_host_prepares_first_and_starts_once_serving() {
    let world = World::start(20.0).await;
    let mut module = world.spawn("rolled", &[("E2E_JOB_HOST", "1"), ("ABI_ROLLOUT_ID", "r1")]);
    let prepare = module.expect("job_host prepare").await;
    let start = module.expect("job_host start").await;
    let initialized = module.expect("on_initialized").await;
    assert!(
        abi_sdk_e2e::ModuleProc::time_of(&initialized)
            <= abi_sdk_e2e::ModuleProc::time_of(&prepare)
    );
    assert!(abi_sdk_e2e::ModuleProc::time_of(&prepare) <= abi_sdk_e2e::ModuleProc::time_of(&start));
    world.wait_status("rolled", "READY").await;
    let events = module.events();
    // Prepared before the instance reported itself initialized (run comes after that).
    before(&events, "job_host", "run");
    module.signal("TERM");
    assert!(module.wait().await.success());
    world.wait_gone("rolled").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hook_stops_the_module_with_its_kind_and_unregisters() {
    let world = World::start(20.0).await;
    let mut module = world.spawn("faulty", &[("E2E_FAIL", "on_initialized")]);
    let status = module.wait().await;
    assert!(!status.success());
    assert!(module.saw("exit error Initialized"), "{:#?}", module.lines);
    assert!(module.saw("on_unloaded"));
    world.wait_gone("faulty").await;

    let mut module = world.spawn("faulty2", &[("E2E_FAIL", "on_load")]);
    assert!(!module.wait().await.success());
    assert!(module.saw("exit error Load"), "{:#?}", module.lines);
    assert!(!module.saw("on_initialized"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_is_bounded_by_the_startup_timeout() {
    let world = World::start(20.0).await;
    let started = std::time::Instant::now();
    let mut module = world.spawn(
        "waiter",
        &[("E2E_DEPS", "never:1"), ("E2E_STARTUP_MS", "1500")],
    );
    assert!(!module.wait().await.success());
    assert!(
        module.saw("exit error DependencyTimeout"),
        "{:#?}",
        module.lines
    );
    assert!(!module.saw("on_initialized"));
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    world.wait_gone("waiter").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dependencies_without_a_registry_fail_clearly() {
    let world = World::start(20.0).await;
    // Dependencies declared, discovery not configured: refused before connecting.
    let mut env = world.module_env("lonely");
    env.retain(|(k, _)| k != "ABI_PROJECT");
    env.push(("E2E_DEPS".into(), "store:1".into()));
    let mut module = abi_sdk_e2e::ModuleProc::spawn("lonely", &env);
    assert!(!module.wait().await.success());
    assert!(module.saw("exit error Config"), "{:#?}", module.lines);
    assert!(!module.saw("on_load"));

    // Discovery configured but no service serves the project.
    let mut module = world.spawn(
        "lost",
        &[
            ("ABI_PROJECT", "nobody_serves_this"),
            // A module waits for discovery within its startup timeout.
            ("E2E_STARTUP_MS", "6000"),
        ],
    );
    assert!(!module.wait().await.success());
    assert!(module.saw("exit error Register"), "{:#?}", module.lines);
    assert!(
        module.lines.iter().any(|l| l.contains("no responders")),
        "{:#?}",
        module.lines
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_discovery_a_module_runs_as_before() {
    let world = World::start(20.0).await;
    let mut env = world.module_env("plain");
    env.retain(|(k, _)| k != "ABI_PROJECT" && k != "ABI_MODULE_KEY");
    env.push(("ABI_HEALTH_PORT".into(), "0".into()));
    env.push(("ABI_HEALTH_HOST".into(), "127.0.0.1".into()));
    let mut module = abi_sdk_e2e::ModuleProc::spawn("plain", &env);
    let run = module.expect("run").await;
    assert!(run.contains("status=DISABLED"), "{run}");
    module.expect("health").await;
    module.signal("INT");
    assert!(module.wait().await.success());
    assert!(module.saw("exit ok"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_host_failing_to_start_after_cutover_stops_the_module() {
    let world = World::start(20.0).await;
    let mut module = world.spawn(
        "badjobs",
        &[
            ("E2E_JOB_HOST", "1"),
            ("ABI_ROLLOUT_ID", "r1"),
            ("E2E_FAIL", "job_start"),
        ],
    );
    assert!(!module.wait().await.success());
    let events = module.events();
    before(&events, "run", "exit");
    assert!(module.saw("job_host prepare"));
    assert!(module.saw("exit error Host"), "{:#?}", module.lines);
    assert!(module.saw("on_unloaded"));
    world.wait_gone("badjobs").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_nats_for_good_stops_the_module_with_an_error() {
    let mut world = World::start(20.0).await;
    let mut module = world.spawn("stranded", &[("E2E_MAX_RECONNECTS", "2")]);
    module.expect("run").await;
    world.nats.stop();
    assert!(!module.wait().await.success());
    assert!(module.saw("exit error Connect"), "{:#?}", module.lines);
    assert!(module.saw("on_unloaded"));
}
