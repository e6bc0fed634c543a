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

use abi_examples::consumer::{Consumer, spec};
use abi_sdk::run_module;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ABI_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: `docker logs` and files get plain text.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        .init();
    match run_module(spec(), Consumer).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
