//! The `abi-discovery` binary: parse the config, start tracing, run.

use std::process::ExitCode;

use abi_discovery::config::Config;
use abi_discovery::{run, shutdown};
use clap::Parser as _;

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
    if let Err(error) = abi_process::logs::init("info") {
        eprintln!("abi-discovery: invalid configuration: {error}");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
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
            eprintln!("abi-discovery: {}", abi_process::error_chain(&error));
            ExitCode::FAILURE
        }
    }
}
