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
/// A second call (or another subscriber already installed) is ignored.
///
/// # Errors
///
/// [`LogFormatError`] when `ABI_LOG_FORMAT` is neither `text` nor `json`;
/// nothing is installed then.
pub fn init(default_filter: &str) -> Result<(), LogFormatError> {
    let format = LogFormat::parse(std::env::var(FORMAT_VAR).ok().as_deref())?;
    let filter = EnvFilter::try_from_env("ABI_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // `try_init` fails only when a subscriber is already set: keep that one.
    let _ = match format {
        LogFormat::Text => builder.with_ansi(colours_wanted()).try_init(),
        LogFormat::Json => builder.json().with_ansi(false).try_init(),
    };
    Ok(())
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
