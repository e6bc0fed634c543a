//! The `abi-discovery` binary: parse the config, then serve (see
//! `abi_process::main_loop`).

use std::process::ExitCode;

use abi_discovery::config::Config;
use clap::Parser as _;

/// mimalloc rather than glibc's malloc: per-thread free lists instead of
/// arenas behind locks (see the workspace `Cargo.toml`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let valid = Config::parse().validate();
    abi_process::main_loop::serve("abi-discovery", valid, abi_discovery::run::run).await
}
