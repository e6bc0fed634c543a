//! The `abi-discovery` binary: parse the config, start tracing, run.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use abi_discovery::config::Config;
use abi_discovery::{run, shutdown};
use clap::Parser as _;
use tracing_subscriber::EnvFilter;

/// Exit status of a bad configuration (as clap's own usage errors).
const EXIT_BAD_CONFIG: u8 = 2;

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::parse();
    let valid = match config.validate() {
        Ok(valid) => valid,
        Err(errors) => {
            for error in errors {
                eprintln!("abi-discovery: invalid configuration: {error}");
            }
            return ExitCode::from(EXIT_BAD_CONFIG);
        }
    };
    let filter = EnvFilter::try_from_env("ABI_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal (`NO_COLOR` turns them off there too):
    // `docker logs` and log files get plain text.
    let ansi = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
    let root = match shutdown::on_signals() {
        Ok(root) => root,
        Err(error) => {
            eprintln!("abi-discovery: could not install signal handlers: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run::run(valid, root).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line with the causes, no backtrace: this is for an operator.
            eprintln!("abi-discovery: {error:#}");
            ExitCode::FAILURE
        }
    }
}
