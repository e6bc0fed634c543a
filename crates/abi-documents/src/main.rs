//! The `abi-documents` binary: parse the config, then serve (see
//! `abi_process::main_loop`).

use std::num::NonZeroUsize;
use std::process::ExitCode;

use abi_documents::config::Config;
use clap::Parser as _;

/// mimalloc rather than glibc's malloc: per-thread free lists instead of
/// arenas behind locks (see the workspace `Cargo.toml`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let config = Config::parse();
    let cores = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.runtime_threads(cores).get())
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("abi-documents: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let valid = config.validate();
    runtime.block_on(abi_process::main_loop::serve(
        "abi-documents",
        valid,
        abi_documents::run::run,
    ))
}
