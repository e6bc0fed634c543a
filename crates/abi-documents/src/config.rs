//! The `abi-documents` configuration: one clap parser, every flag with an env
//! var (flag > env > default), then [`Config::validate`] turns it into typed
//! values or a list of every problem.

use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use abi_process::{NatsArgs, NatsSettings, Secret, SettingError};
use clap::Parser;

/// Where documents live unless `ABI_DOCUMENTS_URL` says otherwise: one SQLite
/// file under the data directory.
pub const DEFAULT_DATA_DIR: &str = "data";
/// The SQLite file's name inside the data directory.
pub const SQLITE_FILE_NAME: &str = "documents.sqlite";
/// The identities allowed to list namespaces (the reference's).
pub const DEFAULT_ADMIN_IDENTITIES: &str = "api,engine";
/// Time to answer the requests received once asked to stop: below Docker's
/// 10 s grace period.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 8;
/// Requests handled at once, as the reference's `ConcurrentCalls` default.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 64;
/// The PostgreSQL schema holding the tables (the reference's).
pub const DEFAULT_PG_SCHEMA: &str = "abi_document";
/// `ABI_DOCUMENTS_RUNTIME_THREADS` unset: the thread count is picked by
/// storage ([`Config::runtime_threads`]).
pub const DEFAULT_RUNTIME_THREADS: usize = 0;

/// Command-line flags and environment of `abi-documents`.
#[derive(Clone, Parser)]
#[command(
    name = "abi-documents",
    version,
    about = "The abi.svc.document.v1 document service over NATS (SQLite embedded, or PostgreSQL)"
)]
pub struct Config {
    /// The NATS connection: URL list, credentials, TLS, connect deadline.
    #[command(flatten)]
    pub nats: NatsArgs,

    /// Storage: `postgres://...` (several servers may share it), `sqlite:<path>` or a file
    /// path; unset: <data-dir>/documents.sqlite.
    #[arg(long = "url", env = "ABI_DOCUMENTS_URL", hide_env_values = true)]
    pub url: Option<String>,

    /// Directory of the embedded SQLite file when no URL is given (created if missing).
    #[arg(long, env = "ABI_DOCUMENTS_DATA_DIR", default_value = DEFAULT_DATA_DIR)]
    pub data_dir: PathBuf,

    /// PostgreSQL schema of the tables.
    #[arg(long, env = "ABI_DOCUMENTS_PG_SCHEMA", default_value = DEFAULT_PG_SCHEMA)]
    pub pg_schema: String,

    /// The project secret: --jwt-secret-file or --jwt-secret.
    #[command(flatten)]
    pub secret: abi_process::SecretArgs,

    /// Identities allowed to list every namespace, comma-separated.
    #[arg(long, env = "ABI_ADMIN_IDENTITIES", default_value = DEFAULT_ADMIN_IDENTITIES)]
    pub admin_identities: String,

    /// A module identity may write only its own namespace (reads stay open).
    #[arg(long, env = "ABI_DOCUMENTS_STRICT_NAMESPACES", default_value_t = false)]
    pub strict_namespaces: bool,

    /// Time to finish the requests received once asked to stop, in seconds.
    #[arg(long, env = "ABI_SHUTDOWN_GRACE_SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS)]
    pub shutdown_grace_secs: u64,

    /// Requests handled at once.
    #[arg(long, env = "ABI_MAX_CONCURRENT_REQUESTS", default_value_t = DEFAULT_MAX_CONCURRENT_REQUESTS)]
    pub max_concurrent_requests: usize,

    /// Address to serve Prometheus metrics on (`GET /metrics`); unset: none.
    #[arg(long, env = "ABI_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// Threads of the async runtime (NATS, decoding, answering, point reads); 0: one per core
    /// less one with SQLite (its writer thread takes that one), one per core with PostgreSQL.
    #[arg(long, env = "ABI_DOCUMENTS_RUNTIME_THREADS", default_value_t = DEFAULT_RUNTIME_THREADS)]
    pub runtime_threads: usize,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("nats", &self.nats)
            .field("url", &self.url.as_ref().map(|_| "<redacted>"))
            .field("data_dir", &self.data_dir)
            .field("pg_schema", &self.pg_schema)
            .field("secret", &self.secret)
            .field("admin_identities", &self.admin_identities)
            .field("strict_namespaces", &self.strict_namespaces)
            .field("shutdown_grace_secs", &self.shutdown_grace_secs)
            .field("max_concurrent_requests", &self.max_concurrent_requests)
            .field("metrics_addr", &self.metrics_addr)
            .field("runtime_threads", &self.runtime_threads)
            .finish()
    }
}

/// Which storage serves the documents.
#[derive(Clone, PartialEq, Eq)]
pub enum Storage {
    /// One SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (the URL holds credentials: never logged).
    Postgres {
        /// The connection URL.
        url: Secret,
        /// The schema of the tables.
        schema: String,
    },
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Storage::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Storage::Postgres { schema, .. } => f
                .debug_struct("Postgres")
                .field("url", &"<redacted>")
                .field("schema", schema)
                .finish(),
        }
    }
}

/// A configuration that passed [`Config::validate`].
#[derive(Debug, Clone)]
pub struct Valid {
    /// The NATS connection.
    pub nats: NatsSettings,
    /// The storage.
    pub storage: Storage,
    /// The project JWT secret.
    pub secret: Secret,
    /// Identities allowed to list namespaces.
    pub admin_identities: Vec<String>,
    /// Whether module identities write only their own namespace.
    pub strict_namespaces: bool,
    /// Time to finish the requests received once asked to stop.
    pub shutdown_grace: Duration,
    /// Requests handled at once.
    pub max_concurrent_requests: NonZeroUsize,
    /// Where Prometheus metrics are served, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
}

impl Config {
    /// Checks every setting and reads the secret file.
    ///
    /// # Errors
    ///
    /// Every problem found, not just the first.
    pub fn validate(&self) -> Result<Valid, Vec<SettingError>> {
        let mut errors = Vec::new();
        let secret = self.secret.validate().map_err(|e| errors.push(e)).ok();
        let storage = self.storage().map_err(|e| errors.push(e)).ok();
        let max_concurrent = NonZeroUsize::new(self.max_concurrent_requests);
        if max_concurrent.is_none() {
            errors.push(SettingError::new(
                "ABI_MAX_CONCURRENT_REQUESTS",
                "must be at least 1",
            ));
        }
        let nats = self.nats.validate().map_err(|e| errors.extend(e)).ok();
        let admin_identities = self
            .admin_identities
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        match (nats, storage, secret, max_concurrent) {
            (Some(nats), Some(storage), Some(secret), Some(max_concurrent_requests))
                if errors.is_empty() =>
            {
                Ok(Valid {
                    nats,
                    storage,
                    secret,
                    admin_identities,
                    strict_namespaces: self.strict_namespaces,
                    shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
                    max_concurrent_requests,
                    metrics_addr: self.metrics_addr,
                })
            }
            _ => Err(errors),
        }
    }

    /// The async runtime's thread count on a machine of `cores` cores:
    /// the setting when it is not 0; else with SQLite one per core less the
    /// one its writer thread keeps busy (at least one), with PostgreSQL
    /// (whose queries are awaited on the runtime) one per core.
    ///
    /// On two cores SQLite gets one: every write is the writer thread's, a
    /// point read takes microseconds, and a second runtime thread mostly
    /// adds wakeups between the two, each costing tens of microseconds on a
    /// VM whose other vCPU sleeps (docs/benchmarks.md: 3 µs less CPU per put
    /// and per get; throughput moved within its spread).
    pub fn runtime_threads(&self, cores: NonZeroUsize) -> NonZeroUsize {
        if let Some(set) = NonZeroUsize::new(self.runtime_threads) {
            return set;
        }
        match self.storage() {
            Ok(Storage::Postgres { .. }) => cores,
            _ => NonZeroUsize::new(cores.get() - 1).unwrap_or(NonZeroUsize::MIN),
        }
    }

    fn storage(&self) -> Result<Storage, SettingError> {
        let Some(url) = self.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
            return Ok(Storage::Sqlite(self.data_dir.join(SQLITE_FILE_NAME)));
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let schema_ok = {
                let mut chars = self.pg_schema.chars();
                chars
                    .next()
                    .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
                    && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    && self.pg_schema.len() <= 63
            };
            if !schema_ok {
                return Err(SettingError::new(
                    "ABI_DOCUMENTS_PG_SCHEMA",
                    "must be a lowercase PostgreSQL identifier: [a-z_][a-z0-9_]{0,62}",
                ));
            }
            return Ok(Storage::Postgres {
                url: Secret::new(url),
                schema: self.pg_schema.clone(),
            });
        }
        let path = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .unwrap_or(url);
        if path.is_empty() || path.contains("://") {
            return Err(SettingError::new(
                "ABI_DOCUMENTS_URL",
                "expected postgres://..., sqlite:<path> or a file path",
            ));
        }
        Ok(Storage::Sqlite(PathBuf::from(path)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(args: &[&str]) -> Config {
        let mut all = vec!["abi-documents"];
        all.extend_from_slice(args);
        Config::try_parse_from(all).unwrap()
    }

    fn problems(args: &[&str]) -> Vec<&'static str> {
        parse(args)
            .validate()
            .err()
            .unwrap_or_default()
            .iter()
            .map(|e| e.setting)
            .collect()
    }

    #[test]
    fn defaults_to_an_embedded_sqlite_file() {
        let valid = parse(&["--jwt-secret", "s"]).validate().unwrap();
        assert_eq!(
            valid.storage,
            Storage::Sqlite(PathBuf::from("data/documents.sqlite"))
        );
        assert_eq!(valid.admin_identities, ["api", "engine"]);
        assert!(!valid.strict_namespaces);
    }

    #[test]
    fn reads_storage_urls() {
        let valid = parse(&["--jwt-secret", "s", "--url", "sqlite:/tmp/x.db"])
            .validate()
            .unwrap();
        assert_eq!(valid.storage, Storage::Sqlite(PathBuf::from("/tmp/x.db")));
        let valid = parse(&["--jwt-secret", "s", "--url", "postgres://u:p@h/db"])
            .validate()
            .unwrap();
        assert!(
            matches!(valid.storage, Storage::Postgres { ref schema, .. } if schema == "abi_document")
        );
        assert!(!format!("{:?}", valid.storage).contains("u:p"));
    }

    #[test]
    fn the_runtime_leaves_the_sqlite_writer_a_core() {
        let n = |v: usize| NonZeroUsize::new(v).unwrap();
        let pg = ["--url", "postgres://u:p@h/db"];
        // (flags, cores) -> runtime threads
        let table: [(&[&str], usize, usize); 8] = [
            (&[], 1, 1),
            (&[], 2, 1),
            (&[], 16, 15),
            (&["--url", "sqlite:/tmp/x.db"], 4, 3),
            (&pg, 2, 2),
            (&pg, 16, 16),
            (&["--runtime-threads", "3"], 2, 3),
            (
                &["--runtime-threads", "3", "--url", "postgres://h/db"],
                16,
                3,
            ),
        ];
        for (flags, cores, expected) in table {
            let threads = parse(flags).runtime_threads(n(cores));
            assert_eq!(threads.get(), expected, "{flags:?} on {cores} cores");
        }
    }

    #[test]
    fn names_every_problem() {
        let found = problems(&["--url", "mysql://x", "--max-concurrent-requests", "0"]);
        assert_eq!(
            found,
            [
                "ABI_JWT_SECRET",
                "ABI_DOCUMENTS_URL",
                "ABI_MAX_CONCURRENT_REQUESTS"
            ]
        );
        let found = problems(&[
            "--jwt-secret",
            "s",
            "--url",
            "postgres://h",
            "--pg-schema",
            "Bad",
        ]);
        assert_eq!(found, ["ABI_DOCUMENTS_PG_SCHEMA"]);
    }
}
