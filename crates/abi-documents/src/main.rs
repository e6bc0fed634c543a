//! The `abi-documents` binary: parse the config, start logs, run.

use std::process::ExitCode;

use abi_documents::config::Config;
use abi_documents::run;
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
                eprintln!("abi-documents: invalid configuration: {error}");
            }
            return ExitCode::from(EXIT_BAD_CONFIG);
        }
    };
    if let Err(error) = abi_process::logs::init("info") {
        eprintln!("abi-documents: invalid configuration: {error}");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    let root = match abi_process::shutdown::on_signals() {
        Ok(root) => root,
        Err(error) => {
            eprintln!("abi-documents: could not install signal handlers: {error}");
            return ExitCode::FAILURE;
        }
    };
    match run::run(valid, root).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("abi-documents: {}", abi_process::error_chain(&error));
            ExitCode::FAILURE
        }
    }
}
