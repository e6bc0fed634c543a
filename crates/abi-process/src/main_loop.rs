//! The `main` of a service binary, once: report a bad configuration (exit
//! 2, one line per problem), install the logs and the signal watcher, run
//! until a signal, and report a failure in one line (exit 1).

use std::future::Future;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::SettingError;

/// How long the last spans may take to leave at exit.
const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Exit status of a bad configuration (as clap's own usage errors).
pub const EXIT_BAD_CONFIG: u8 = 2;

/// Runs service `name` with the checked configuration `valid`: `run` gets it
/// and the root token SIGTERM/SIGINT cancels.
///
/// # Cancel safety
///
/// Not cancel safe: it is a process's main loop; dropping it skips the service's drain.
pub async fn serve<V, E, F, Fut>(
    name: &str,
    valid: Result<V, Vec<SettingError>>,
    run: F,
) -> ExitCode
where
    F: FnOnce(V, CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error,
{
    let valid = match valid {
        Ok(valid) => valid,
        Err(errors) => {
            for error in errors {
                eprintln!("{name}: invalid configuration: {error}");
            }
            return ExitCode::from(EXIT_BAD_CONFIG);
        }
    };
    if let Err(error) = crate::logs::init("info") {
        eprintln!("{name}: invalid configuration: {error}");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    let root = match crate::shutdown::on_signals() {
        Ok(root) => root,
        Err(error) => {
            eprintln!("{name}: could not install signal handlers: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = run(valid, root).await;
    // Spans of the last requests leave before the process does.
    crate::traces::flush_within(FLUSH_LIMIT).await;
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line with the causes, no backtrace: this is for an operator.
            eprintln!("{name}: {}", crate::error_chain(&error));
            ExitCode::FAILURE
        }
    }
}
