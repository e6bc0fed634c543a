//! What every abi process (`abi-discovery`, `abictl`, modules through the
//! SDK, the examples) sets up the same way, from the same environment
//! variables:
//!
//! - [`nats`]: the NATS connection: `NATS_URL` (one URL or a seed list),
//!   credentials (`NATS_CREDS`, `NATS_USER`/`NATS_PASSWORD`, `NATS_TOKEN`,
//!   `NATS_NKEY_FILE`), TLS (`NATS_TLS_CA`, `NATS_TLS_CERT`/`NATS_TLS_KEY`,
//!   `NATS_TLS_REQUIRED`) and the connect deadline;
//! - [`logs`]: the log subscriber: `ABI_LOG` (else `RUST_LOG`) filter,
//!   `ABI_LOG_FORMAT=json` for log shippers, colours only on a terminal;
//! - `traces` (feature `traces`, with `logs`): OpenTelemetry spans over
//!   OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, W3C trace context in
//!   NATS headers, named as the reference names them; `redaction` keeps
//!   credentials out of them;
//! - `shutdown` (feature `shutdown`): SIGTERM/SIGINT as a cancellation token;
//! - [`secret`]: secrets that never show in `Debug`, read from files with an
//!   error that says how to fix a permission problem.

#[cfg(feature = "logs")]
pub mod logs;
#[cfg(all(feature = "logs", feature = "shutdown"))]
pub mod main_loop;
pub mod nats;
#[cfg(feature = "traces")]
pub mod redaction;
pub mod secret;
#[cfg(feature = "shutdown")]
pub mod shutdown;
#[cfg(feature = "traces")]
pub mod traces;

pub use nats::{ConnectError, NatsArgs, NatsAuth, NatsSettings, NatsTls, SettingError};
pub use secret::{Secret, SecretArgs, project_secret, read_secret_file};

/// `error` and its sources on one line (`outer: cause: root cause`), for a
/// log field or a message to people.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
