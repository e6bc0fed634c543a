//! The NATS connection, set up the same way by every process.
//!
//! [`NatsArgs`] holds the raw settings: a `clap` argument group that binaries
//! flatten into their parser (each flag has its environment variable), or
//! [`NatsArgs::from_lookup`] for code that reads the environment itself (the
//! SDK). [`NatsArgs::validate`] checks them all at once and gives
//! [`NatsSettings`], whose [`connect`](NatsSettings::connect) applies the
//! credentials, TLS and deadline.
//!
//! | env | flag | meaning |
//! | --- | --- | --- |
//! | `NATS_URL` | `--nats-url` | one URL or a comma-separated seed list (default `nats://127.0.0.1:4222`) |
//! | `NATS_CREDS` | `--nats-creds-file` | a credentials file (JWT and nkey seed) |
//! | `NATS_USER`, `NATS_PASSWORD` | `--nats-user`, `--nats-password` | user and password |
//! | `NATS_TOKEN` | `--nats-token` | a token |
//! | `NATS_NKEY_FILE` | `--nats-nkey-file` | a file holding an nkey seed |
//! | `NATS_TLS_CA` | `--nats-tls-ca` | extra root certificates (PEM) |
//! | `NATS_TLS_CERT`, `NATS_TLS_KEY` | `--nats-tls-cert`, `--nats-tls-key` | a client certificate and its key (PEM) |
//! | `NATS_TLS_REQUIRED` | `--nats-tls-required` | refuse a plain connection |
//! | `ABI_CONNECT_TIMEOUT_SECS` | `--connect-timeout-secs` | deadline to reach the broker (default 10) |
//!
//! At most one way to authenticate may be given. Secrets (password, token,
//! seed) are taken from the environment or files, never printed: `Debug`
//! redacts them, and the URLs show without credentials.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use abi_wire::{DEFAULT_NATS_URL, ServerList};
use async_nats::{Client, ConnectOptions};

use crate::secret::{Secret, read_secret_file};

/// Time to reach the broker: long enough for a broker starting next to us in
/// a compose stack, short enough to fail clearly on a wrong URL.
pub const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 10;

/// The NATS settings as given (flags or environment), not yet checked.
#[derive(Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct NatsArgs {
    /// NATS server URL, or a cluster's comma-separated seed list.
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "NATS_URL", default_value = DEFAULT_NATS_URL))]
    pub nats_url: String,

    /// NATS credentials file (JWT + nkey seed).
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "NATS_CREDS"))]
    pub nats_creds_file: Option<PathBuf>,

    /// NATS user name (with NATS_PASSWORD).
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "NATS_USER"))]
    pub nats_user: Option<String>,

    /// NATS password (with NATS_USER).
    #[cfg_attr(
        feature = "clap",
        arg(long, global = true, env = "NATS_PASSWORD", hide_env_values = true)
    )]
    pub nats_password: Option<String>,

    /// NATS authentication token.
    #[cfg_attr(
        feature = "clap",
        arg(long, global = true, env = "NATS_TOKEN", hide_env_values = true)
    )]
    pub nats_token: Option<String>,

    /// File holding an nkey seed to authenticate with.
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "NATS_NKEY_FILE"))]
    pub nats_nkey_file: Option<PathBuf>,

    /// CA certificate(s) to trust for the NATS TLS connection (PEM).
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "NATS_TLS_CA"))]
    pub nats_tls_ca: Option<PathBuf>,

    /// Client certificate for NATS TLS (PEM, with --nats-tls-key).
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "NATS_TLS_CERT"))]
    pub nats_tls_cert: Option<PathBuf>,

    /// Client key for NATS TLS (PEM, with --nats-tls-cert).
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "NATS_TLS_KEY"))]
    pub nats_tls_key: Option<PathBuf>,

    /// Refuse to connect without TLS.
    #[cfg_attr(
        feature = "clap",
        arg(
            long,
            global = true,
            env = "NATS_TLS_REQUIRED",
            default_value_t = false
        )
    )]
    pub nats_tls_required: bool,

    /// Deadline to reach the broker, in seconds.
    #[cfg_attr(feature = "clap", arg(long, global = true, env = "ABI_CONNECT_TIMEOUT_SECS", default_value_t = DEFAULT_CONNECT_TIMEOUT_SECS))]
    pub connect_timeout_secs: u64,
}

impl fmt::Debug for NatsArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |s: &Option<String>| s.as_ref().map(|_| "<redacted>");
        let url = ServerList::parse(&self.nats_url)
            .map_or_else(|_| "<unparsable>".to_owned(), |list| list.to_string());
        f.debug_struct("NatsArgs")
            .field("nats_url", &url)
            .field("nats_creds_file", &self.nats_creds_file)
            .field("nats_user", &self.nats_user)
            .field("nats_password", &redact(&self.nats_password))
            .field("nats_token", &redact(&self.nats_token))
            .field("nats_nkey_file", &self.nats_nkey_file)
            .field("nats_tls_ca", &self.nats_tls_ca)
            .field("nats_tls_cert", &self.nats_tls_cert)
            .field("nats_tls_key", &self.nats_tls_key)
            .field("nats_tls_required", &self.nats_tls_required)
            .field("connect_timeout_secs", &self.connect_timeout_secs)
            .finish()
    }
}

/// One problem with the settings: the variable it concerns and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {problem}")]
pub struct SettingError {
    /// The environment variable at fault (its flag is named alike).
    pub setting: &'static str,
    /// What is wrong, for people.
    pub problem: String,
}

impl SettingError {
    /// A problem with `setting`.
    pub fn new(setting: &'static str, problem: impl Into<String>) -> Self {
        Self {
            setting,
            problem: problem.into(),
        }
    }
}

/// How to authenticate to NATS, at most one way.
#[derive(Clone, PartialEq, Eq)]
pub enum NatsAuth {
    /// No credentials (or only those inside the URLs).
    None,
    /// A credentials file.
    CredsFile(PathBuf),
    /// User and password.
    UserPassword(String, Secret),
    /// A token.
    Token(Secret),
    /// An nkey seed (read from its file).
    NKey(Secret),
}

impl fmt::Debug for NatsAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("None"),
            Self::CredsFile(p) => f.debug_tuple("CredsFile").field(p).finish(),
            Self::UserPassword(u, _) => f.debug_tuple("UserPassword").field(u).finish(),
            Self::Token(_) => f.write_str("Token(<redacted>)"),
            Self::NKey(_) => f.write_str("NKey(<redacted>)"),
        }
    }
}

/// TLS settings for the NATS connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NatsTls {
    /// Extra root certificates.
    pub ca: Option<PathBuf>,
    /// Client certificate and key.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Refuse a plain connection.
    pub required: bool,
}

/// Checked NATS settings, ready to connect with.
#[derive(Debug, Clone)]
pub struct NatsSettings {
    /// The servers to try.
    pub servers: ServerList,
    /// How to authenticate.
    pub auth: NatsAuth,
    /// TLS.
    pub tls: NatsTls,
    /// Deadline to reach the broker.
    pub connect_timeout: Duration,
}

/// The connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The credentials file could not be read.
    #[error("could not read the NATS credentials file {path}")]
    Credentials {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No server of the list accepted the connection.
    #[error("could not connect to NATS at {servers}")]
    Connect {
        /// The servers tried, without credentials.
        servers: String,
        /// The client's error.
        #[source]
        source: async_nats::ConnectError,
    },
    /// No server answered within the connect deadline.
    #[error("could not connect to NATS at {servers}: no answer within {timeout:?}")]
    TimedOut {
        /// The servers tried, without credentials.
        servers: String,
        /// The deadline that passed.
        timeout: Duration,
    },
}

impl NatsArgs {
    /// The settings read through `env` (the SDK passes `std::env::var`,
    /// tests a map): the same variables the flags take, with the same
    /// defaults.
    pub fn from_lookup(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let get = |key: &str| {
            env(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let path = |key: &str| get(key).map(PathBuf::from);
        Self {
            nats_url: get("NATS_URL").unwrap_or_else(|| DEFAULT_NATS_URL.to_owned()),
            nats_creds_file: path("NATS_CREDS"),
            nats_user: get("NATS_USER"),
            // A password or token may start or end with blanks on purpose.
            nats_password: env("NATS_PASSWORD").filter(|v| !v.is_empty()),
            nats_token: env("NATS_TOKEN").filter(|v| !v.is_empty()),
            nats_nkey_file: path("NATS_NKEY_FILE"),
            nats_tls_ca: path("NATS_TLS_CA"),
            nats_tls_cert: path("NATS_TLS_CERT"),
            nats_tls_key: path("NATS_TLS_KEY"),
            nats_tls_required: get("NATS_TLS_REQUIRED")
                .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes")),
            connect_timeout_secs: get("ABI_CONNECT_TIMEOUT_SECS")
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_CONNECT_TIMEOUT_SECS),
        }
    }

    /// Checks every setting and reports every problem.
    ///
    /// # Errors
    ///
    /// One [`SettingError`] per problem: a malformed URL list, more than one
    /// way to authenticate, half of a pair, a file that is not there, a zero
    /// deadline.
    pub fn validate(&self) -> Result<NatsSettings, Vec<SettingError>> {
        let mut errors = Vec::new();
        let servers = ServerList::parse(&self.nats_url)
            .map_err(|e| errors.push(SettingError::new("NATS_URL", e.to_string())))
            .ok();
        let auth = self.auth(&mut errors);
        let tls = self.tls(&mut errors);
        if self.connect_timeout_secs == 0 {
            errors.push(SettingError::new(
                "ABI_CONNECT_TIMEOUT_SECS",
                "must be at least 1 second",
            ));
        }
        match servers {
            Some(servers) if errors.is_empty() => Ok(NatsSettings {
                servers,
                auth,
                tls,
                connect_timeout: Duration::from_secs(self.connect_timeout_secs),
            }),
            _ => Err(errors),
        }
    }

    fn auth(&self, errors: &mut Vec<SettingError>) -> NatsAuth {
        let chosen = [
            self.nats_creds_file.is_some(),
            self.nats_user.is_some() || self.nats_password.is_some(),
            self.nats_token.is_some(),
            self.nats_nkey_file.is_some(),
        ]
        .into_iter()
        .filter(|set| *set)
        .count();
        if chosen > 1 {
            errors.push(SettingError::new(
                "NATS_CREDS",
                "choose one NATS authentication: NATS_CREDS, NATS_USER/NATS_PASSWORD, NATS_TOKEN or NATS_NKEY_FILE",
            ));
            return NatsAuth::None;
        }
        if let Some(path) = &self.nats_creds_file {
            if !path.is_file() {
                errors.push(SettingError::new(
                    "NATS_CREDS",
                    format!("{} is not a readable file", path.display()),
                ));
            }
            return NatsAuth::CredsFile(path.clone());
        }
        match (&self.nats_user, &self.nats_password) {
            (Some(user), Some(password)) => {
                return NatsAuth::UserPassword(user.clone(), Secret::new(password.clone()));
            }
            (Some(_), None) | (None, Some(_)) => {
                errors.push(SettingError::new(
                    "NATS_USER",
                    "NATS_USER and NATS_PASSWORD go together",
                ));
                return NatsAuth::None;
            }
            (None, None) => {}
        }
        if let Some(token) = &self.nats_token {
            return NatsAuth::Token(Secret::new(token.clone()));
        }
        if let Some(path) = &self.nats_nkey_file {
            return match read_secret_file(path) {
                Ok(seed) => NatsAuth::NKey(Secret::new(seed)),
                Err(problem) => {
                    errors.push(SettingError::new("NATS_NKEY_FILE", problem));
                    NatsAuth::None
                }
            };
        }
        NatsAuth::None
    }

    fn tls(&self, errors: &mut Vec<SettingError>) -> NatsTls {
        for (setting, path) in [
            ("NATS_TLS_CA", &self.nats_tls_ca),
            ("NATS_TLS_CERT", &self.nats_tls_cert),
            ("NATS_TLS_KEY", &self.nats_tls_key),
        ] {
            if let Some(path) = path
                && !path.is_file()
            {
                errors.push(SettingError::new(
                    setting,
                    format!("{} is not a readable file", path.display()),
                ));
            }
        }
        let client_cert = match (&self.nats_tls_cert, &self.nats_tls_key) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            (None, None) => None,
            _ => {
                errors.push(SettingError::new(
                    "NATS_TLS_CERT",
                    "NATS_TLS_CERT and NATS_TLS_KEY go together",
                ));
                None
            }
        };
        NatsTls {
            ca: self.nats_tls_ca.clone(),
            client_cert,
            required: self.nats_tls_required,
        }
    }
}

impl NatsSettings {
    /// Settings for `servers` with no credentials, no TLS and the default
    /// deadline (tests, tools).
    pub fn plain(servers: ServerList) -> Self {
        Self {
            servers,
            auth: NatsAuth::None,
            tls: NatsTls::default(),
            connect_timeout: Duration::from_secs(DEFAULT_CONNECT_TIMEOUT_SECS),
        }
    }

    /// Client options with these credentials, TLS and deadline, and the
    /// connection `name` servers show (`nats server report connections`).
    ///
    /// # Errors
    ///
    /// [`ConnectError::Credentials`] when the credentials file cannot be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads the credentials file.
    pub async fn options(&self, name: &str) -> Result<ConnectOptions, ConnectError> {
        let mut options = match &self.auth {
            NatsAuth::CredsFile(path) => ConnectOptions::with_credentials_file(path)
                .await
                .map_err(|source| ConnectError::Credentials {
                    path: path.clone(),
                    source,
                })?,
            _ => ConnectOptions::new(),
        };
        options = match &self.auth {
            NatsAuth::None | NatsAuth::CredsFile(_) => options,
            NatsAuth::UserPassword(user, password) => {
                options.user_and_password(user.clone(), password.expose().to_owned())
            }
            NatsAuth::Token(token) => options.token(token.expose().to_owned()),
            NatsAuth::NKey(seed) => options.nkey(seed.expose().to_owned()),
        };
        if let Some(ca) = &self.tls.ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.tls.client_cert {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        Ok(options
            .require_tls(self.tls.required)
            .name(name)
            .connection_timeout(self.connect_timeout))
    }

    /// Connects with `options` (from [`options`](Self::options), adjusted by
    /// the caller) to any server of the list, within the connect deadline.
    ///
    /// # Errors
    ///
    /// [`ConnectError::Connect`] when no server accepts the connection,
    /// [`ConnectError::TimedOut`] when none answers in time.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the connection being made.
    pub async fn connect_with(&self, options: ConnectOptions) -> Result<Client, ConnectError> {
        let servers = self.servers.to_string();
        match tokio::time::timeout(self.connect_timeout, options.connect(self.servers.urls())).await
        {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(source)) => Err(ConnectError::Connect { servers, source }),
            Err(_) => Err(ConnectError::TimedOut {
                servers,
                timeout: self.connect_timeout,
            }),
        }
    }

    /// [`options`](Self::options) then [`connect_with`](Self::connect_with).
    ///
    /// # Errors
    ///
    /// As both.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn connect(&self, name: &str) -> Result<Client, ConnectError> {
        let options = self.options(name).await?;
        self.connect_with(options).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;

    use super::*;

    fn args(vars: &[(&str, &str)]) -> NatsArgs {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        NatsArgs::from_lookup(&|key| map.get(key).cloned())
    }

    #[test]
    fn defaults_are_one_local_server_without_credentials() {
        let settings = args(&[]).validate().unwrap();
        assert_eq!(settings.servers.urls(), [DEFAULT_NATS_URL]);
        assert_eq!(settings.auth, NatsAuth::None);
        assert_eq!(settings.tls, NatsTls::default());
        assert_eq!(settings.connect_timeout, Duration::from_secs(10));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let errors = args(&[
            ("NATS_URL", "nats://a:1,,b"),
            ("NATS_TOKEN", "t"),
            ("NATS_USER", "u"),
            ("NATS_TLS_CERT", "/nonexistent/cert.pem"),
            ("ABI_CONNECT_TIMEOUT_SECS", "0"),
        ])
        .validate()
        .unwrap_err();
        let settings: Vec<&str> = errors.iter().map(|e| e.setting).collect();
        assert_eq!(
            settings,
            [
                "NATS_URL",
                "NATS_CREDS",
                "NATS_TLS_CERT",
                "NATS_TLS_CERT",
                "ABI_CONNECT_TIMEOUT_SECS"
            ]
        );
    }

    #[test]
    fn secrets_never_show() {
        let given = args(&[
            ("NATS_URL", "nats://u:pw@h:1"),
            ("NATS_USER", "alice"),
            ("NATS_PASSWORD", "hunter2"),
        ]);
        let shown = format!("{given:?} {:?}", given.validate().unwrap());
        assert!(
            !shown.contains("hunter2") && !shown.contains("pw@"),
            "{shown}"
        );
        assert!(shown.contains("alice"), "{shown}");
    }
}
