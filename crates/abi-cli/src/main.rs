//! `abictl`: inspect and operate the abi discovery registry of one project.
//!
//! `main` only parses the command line, starts quiet logging and maps the
//! outcome to an exit code (see [`error`]): 0 ok, 1 the service refused,
//! 2 usage or configuration, 3 unreachable, 4 `wait` timed out.

mod auth;
mod checks;
mod cli;
mod commands;
mod connect;
mod error;
mod output;
mod signals;
mod snapshot;

use std::process::ExitCode;

use clap::Parser as _;

/// mimalloc rather than glibc's malloc, as our other binaries: the console
/// and the app gateway serve requests for as long as they run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // Quiet by default: abictl's output is its tables; ABI_LOG turns logs on.
    if let Err(error) = abi_process::logs::init("error") {
        eprintln!("abictl: {error}");
        return ExitCode::from(error::EXIT_USAGE);
    }
    let env = |key: &str| std::env::var(key).ok();
    let outcome = commands::run(&cli, &env).await;
    // The command's spans leave before the process does (nothing without
    // OTEL_EXPORTER_OTLP_ENDPOINT).
    abi_process::traces::flush_within(std::time::Duration::from_secs(2)).await;
    match outcome {
        Ok(()) => ExitCode::from(error::EXIT_OK),
        Err(err) => {
            let failure = error::classify(&err, &cli.global.project);
            eprintln!("abictl: {failure}");
            ExitCode::from(failure.exit)
        }
    }
}
