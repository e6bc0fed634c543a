//! Measures how long a dependent module takes to run `on_initialized` after
//! its dependency turned READY: ours reacting to registry events, ours with
//! polling only (the reference's 2 s), and the Python reference SDK itself.
//!
//! The reference point is the dependency's `run` line, printed right after
//! its "initialized" renewal was answered; the registry write that makes it
//! READY happens just before that answer, so a dependent reacting to the
//! write can come out a little early (counted as 0). Every contender is
//! measured from the same point.
//!
//! Prints the figures; asserts nothing. Run with
//! `cargo run -p abi-sdk-e2e --bin readiness-bench` (builds `e2e-module` too
//! when run through `cargo build -p abi-sdk-e2e --bins` first).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use abi_sdk_e2e::{ModuleProc, PYTHON_MODULE, World};

const ROUNDS: usize = 5;

fn summary(name: &str, mut samples: Vec<u128>) {
    samples.sort_unstable();
    let ms = |us: u128| us as f64 / 1000.0;
    println!(
        "{name:<28} min {:>8.1} ms  median {:>8.1} ms  max {:>8.1} ms  (n={})",
        ms(samples[0]),
        ms(samples[samples.len() / 2]),
        ms(samples[samples.len() - 1]),
        samples.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut watched = Vec::new();
    let mut polled = Vec::new();
    let mut python = Vec::new();
    for round in 0..ROUNDS {
        let world = World::start(20.0).await;
        let deps = [("E2E_DEPS", "bench_a:1")];
        let mut b_watch = world.spawn("bench_watch", &deps);
        let mut b_poll = world.spawn("bench_poll", &[deps[0], ("E2E_NO_WATCH", "1")]);
        let mut env = world.module_env("bench_py");
        env.push(("E2E_DEPS".into(), "bench_a:1".into()));
        let mut b_py = ModuleProc::spawn_python("bench_py", PYTHON_MODULE, &env);
        for id in ["bench_watch", "bench_poll", "bench_py"] {
            world.wait_status(id, abi_wire::status::STARTING).await;
        }
        let mut a = world.spawn("bench_a", &[]);
        let ready = ModuleProc::time_of(&a.expect("run").await);
        let after = |line: String| ModuleProc::time_of(&line).saturating_sub(ready);
        watched.push(after(b_watch.expect("on_initialized").await));
        polled.push(after(b_poll.expect("on_initialized").await));
        python.push(after(b_py.expect("on_initialized").await));
        println!(
            "round {round}: events {:.1} ms, polling {:.1} ms, reference {:.1} ms",
            *watched.last().unwrap() as f64 / 1000.0,
            *polled.last().unwrap() as f64 / 1000.0,
            *python.last().unwrap() as f64 / 1000.0
        );
        for module in [&mut a, &mut b_watch, &mut b_poll, &mut b_py] {
            module.kill().await;
        }
    }
    println!("dependency READY -> dependent on_initialized:");
    summary("abi-sdk (registry events)", watched);
    summary("abi-sdk (2 s polling only)", polled);
    summary("naas_abi_sdk (reference)", python);
}
