//! The log subscriber every binary installs.
//!
//! - Filter: `ABI_LOG`, else `RUST_LOG`, else the binary's default (e.g.
//!   `info`), in `tracing_subscriber::EnvFilter` syntax.
//! - Format: `ABI_LOG_FORMAT=text` (default: one human-readable line per
//!   event) or `json` (one JSON object per line, for log shippers).
//! - Colours only when standard error is a terminal and `NO_COLOR` is unset
//!   or empty: a file, a pipe, journald or `docker logs` get plain text.
//!
//! Logs go to standard error; standard output stays for a program's output.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

use crate::traces;

/// The variable choosing the log format.
pub const FORMAT_VAR: &str = "ABI_LOG_FORMAT";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}

/// Why the log settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{FORMAT_VAR} must be `text` or `json`, not {0:?}")]
pub struct LogFormatError(pub String);

impl LogFormat {
    /// Reads a format name (`text`, `json`; case-insensitive, blanks ignored);
    /// unset or empty means text.
    ///
    /// # Errors
    ///
    /// [`LogFormatError`] for any other value.
    pub fn parse(value: Option<&str>) -> Result<Self, LogFormatError> {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("" | "text") => Ok(Self::Text),
            Some("json") => Ok(Self::Json),
            Some(_) => Err(LogFormatError(value.unwrap_or_default().to_owned())),
        }
    }
}

/// Whether colours suit standard error now: a terminal, and `NO_COLOR`
/// unset or empty (<https://no-color.org>).
pub fn colours_wanted() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the process's log subscriber from the environment, with
/// `default_filter` when neither `ABI_LOG` nor `RUST_LOG` is set (or valid).
/// When `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set, it
/// also exports spans ([`crate::traces`]), named for `OTEL_SERVICE_NAME` or
/// the executable; log lines inside a span then carry its `trace_id`. A
/// second call (or another subscriber already installed) is ignored.
///
/// # Errors
///
/// [`LogFormatError`] when `ABI_LOG_FORMAT` is neither `text` nor `json`;
/// nothing is installed then.
pub fn init(default_filter: &str) -> Result<(), LogFormatError> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let env = |key: &str| std::env::var(key).ok();
    let format = LogFormat::parse(env(FORMAT_VAR).as_deref())?;
    let filter = EnvFilter::try_from_env("ABI_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(default_filter));
    let exporting = traces::wanted(&env);
    // The request spans exist for traces only: switched off (free) unless
    // spans are exported, and kept whatever the log level when they are.
    let level = if exporting { "debug" } else { "off" };
    let filter = match format!("{}={level}", traces::TARGET).parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.with_ansi(colours_wanted()).boxed(),
        LogFormat::Json => fmt.json().with_ansi(false).boxed(),
    };
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    let mut refused = None;
    let otel = if exporting {
        let service = traces::service_name(&env, &executable_name());
        match traces::layer(&service) {
            Ok(layer) => Some(layer),
            Err(error) => {
                refused = Some(error);
                None
            }
        }
    } else {
        None
    };
    // `try_init` fails only when a subscriber is already set: keep that one.
    let _ = registry.with(otel).try_init();
    if let Some(error) = refused {
        tracing::warn!(error = %crate::error_chain(&error), "traces are not exported");
    }
    Ok(())
}

/// The running executable's name (`abi-documents`), for spans without
/// `OTEL_SERVICE_NAME`.
fn executable_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "abi".to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn formats_parse() {
        assert_eq!(LogFormat::parse(None), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some("")), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some(" JSON ")), Ok(LogFormat::Json));
        assert_eq!(LogFormat::parse(Some("text")), Ok(LogFormat::Text));
        let err = LogFormat::parse(Some("yaml")).unwrap_err();
        assert!(err.to_string().contains("\"yaml\""), "{err}");
    }
}
