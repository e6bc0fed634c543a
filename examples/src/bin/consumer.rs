//! `demo-consumer`: a module that depends on `demo-provider` at contract
//! major 1 and looks it up once it is initialized (the module itself is
//! `abi_examples::consumer`). Copy both to start a module that uses another one.
//!
//! ```sh
//! export NATS_URL=nats://127.0.0.1:4222 ABI_PROJECT=demo
//! export ABI_MODULE_KEY=$(abictl key demo-consumer)
//! cargo run -p abi-examples --bin consumer
//! ```
//!
//! It stays STARTING until a `demo-provider` instance is READY (the runner
//! waits up to 60 s), then becomes READY itself. If the provider goes away
//! later, discovery reports this module DEGRADED until one is back.

use std::process::ExitCode;

use abi_examples::consumer::{Consumer, spec, with_jobs};
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
    match run_module(with_jobs(spec()), Consumer).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
