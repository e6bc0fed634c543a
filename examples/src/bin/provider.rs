//! `demo-provider`: a module that serves jobs (`tick`, `echo`, `sleepy`), an
//! agent (`echo`), a chat model (`echo-chat`) and a web app (`status`), and does a little periodic work (the module itself is `abi_examples::provider`). Copy both
//! to start your own module.
//!
//! Run it next to a NATS server and `abi-discovery`:
//!
//! ```sh
//! export NATS_URL=nats://127.0.0.1:4222 ABI_PROJECT=demo
//! export ABI_MODULE_KEY=$(abictl key demo-provider)   # needs ABI_JWT_SECRET
//! cargo run -p abi-examples --bin provider
//! ```
//!
//! Everything else comes from the environment the SDK reads (`NATS_URL`,
//! `ABI_PROJECT`, `ABI_MODULE_KEY` or `ABI_SERVICE_TOKEN`, `ABI_ROLLOUT_ID`,
//! `ABI_ROLLOUT_MODULES`, `ABI_HEALTH_PORT`); `DEMO_VERSION` sets the package
//! version it declares, `DEMO_WORK_MS` how often it works (default 2000) and
//! `DEMO_APPS_DIR` where its app folders are (default `examples/apps`).

use std::process::ExitCode;
use std::time::Duration;

use abi_examples::provider::{
    Provider, default_apps_dir, spec, with_agents_and_models, with_app, with_jobs,
};
use abi_sdk::run_module;

/// mimalloc rather than glibc's malloc: a busy module spends far less CPU
/// allocating (docs/benchmarks.md). Keep it when you copy this file.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    // Logs go to stderr: ABI_LOG (or RUST_LOG) filters them (default info),
    // ABI_LOG_FORMAT=json for log shippers, colours only on a terminal.
    if let Err(error) = abi_process::logs::init("info") {
        eprintln!("{error}");
        return ExitCode::from(2);
    }
    let work_ms = std::env::var("DEMO_WORK_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let module = Provider {
        work_interval: Duration::from_millis(work_ms),
    };
    // The runner registers, renews the lease, waits for dependencies, calls
    // the hooks, serves /health and /ready, and drains on SIGTERM.
    let version = std::env::var("DEMO_VERSION").unwrap_or_else(|_| "1.0.0".into());
    let apps_dir = std::env::var_os("DEMO_APPS_DIR").map_or_else(default_apps_dir, Into::into);
    let spec = match with_app(with_agents_and_models(with_jobs(spec(&version))), &apps_dir) {
        Ok(spec) => spec,
        Err(error) => {
            eprintln!("{error} (DEMO_APPS_DIR names the folder of the demo's apps)");
            return ExitCode::from(2);
        }
    };
    match run_module(spec, module).await {
        Ok(()) => ExitCode::SUCCESS,
        // The runner already logged the error; the exit code tells a supervisor.
        Err(_) => ExitCode::FAILURE,
    }
}
