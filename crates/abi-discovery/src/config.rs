//! The `abi-discovery` configuration: one clap parser, every flag with an env var
//! (flag > env > default), then [`Config::validate`] turns it into typed values or a
//! list of every problem.

use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use abi_process::NatsArgs;
use clap::Parser;

use abi_wire::discovery::Project;

pub use abi_wire::DEFAULT_NATS_URL;
/// The reference's default project, so an unconfigured owner and SDK meet.
pub const DEFAULT_PROJECT: &str = "default";
/// The reference's lease: long enough to ride out a GC pause or a broker hiccup,
/// short enough that a crashed module is gone within half a minute.
pub const DEFAULT_LEASE_SECONDS: f64 = 20.0;
/// The reference's admin identities: the engine's API and scheduler may evict.
pub const DEFAULT_ADMIN_IDENTITIES: &str = "api,engine";
/// One replica: a single-node broker cannot hold more; use 3 on a cluster.
pub const DEFAULT_KV_REPLICAS: usize = 1;
pub use abi_process::nats::DEFAULT_CONNECT_TIMEOUT_SECS;
/// Deadline of one snapshot read or write; callers' own deadlines are a few seconds,
/// so waiting longer would only answer callers that already gave up.
pub const DEFAULT_STORE_TIMEOUT_SECS: u64 = 5;
/// Time to answer the requests already received once asked to stop; below the
/// usual 30 s a container orchestrator waits before SIGKILL.
pub const DEFAULT_SHUTDOWN_GRACE_SECS: u64 = 10;
/// Mutations waiting for the writer before senders wait: a burst of every live
/// instance (256) renewing at once fits several times.
pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;
/// Mutations committed in one snapshot write: bounds the work redone on a CAS conflict.
pub const DEFAULT_MAX_BATCH: usize = 64;
/// Requests handled at once, as the reference's `ConcurrentCalls` default.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 64;

/// Command-line flags and environment of `abi-discovery`.
#[derive(Clone, Parser)]
#[command(
    name = "abi-discovery",
    version,
    about = "The abi.discovery.v1 service over NATS"
)]
pub struct Config {
    /// The NATS connection: URL list, credentials, TLS, connect deadline.
    #[command(flatten)]
    pub nats: NatsArgs,

    /// Project: namespaces subjects, queue group and bucket.
    #[arg(long, env = "ABI_PROJECT", default_value = DEFAULT_PROJECT)]
    pub project: String,

    /// The project secret: --jwt-secret-file or --jwt-secret.
    #[command(flatten)]
    pub secret: abi_process::SecretArgs,

    /// Lease granted by register and renew, in seconds (at least 1).
    #[arg(long, env = "ABI_LEASE_SECONDS", default_value_t = DEFAULT_LEASE_SECONDS)]
    pub lease_seconds: f64,

    /// Identities allowed to evict, comma-separated (may be empty).
    #[arg(long, env = "ABI_ADMIN_IDENTITIES", default_value = DEFAULT_ADMIN_IDENTITIES)]
    pub admin_identities: String,

    /// Replicas of the KV bucket when this process creates it.
    #[arg(long, env = "ABI_KV_REPLICAS", default_value_t = DEFAULT_KV_REPLICAS)]
    pub kv_replicas: usize,

    /// Deadline of one snapshot read or write, in seconds.
    #[arg(long, env = "ABI_STORE_TIMEOUT_SECS", default_value_t = DEFAULT_STORE_TIMEOUT_SECS)]
    pub store_timeout_secs: u64,

    /// Time to finish the requests received once asked to stop, in seconds.
    #[arg(long, env = "ABI_SHUTDOWN_GRACE_SECS", default_value_t = DEFAULT_SHUTDOWN_GRACE_SECS)]
    pub shutdown_grace_secs: u64,

    /// Mutations queued for the writer before requests wait.
    #[arg(long, env = "ABI_QUEUE_CAPACITY", default_value_t = DEFAULT_QUEUE_CAPACITY)]
    pub queue_capacity: usize,

    /// Mutations committed in one snapshot write.
    #[arg(long, env = "ABI_MAX_BATCH", default_value_t = DEFAULT_MAX_BATCH)]
    pub max_batch: usize,

    /// Requests handled at once.
    #[arg(long, env = "ABI_MAX_CONCURRENT_REQUESTS", default_value_t = DEFAULT_MAX_CONCURRENT_REQUESTS)]
    pub max_concurrent_requests: usize,

    /// Address to serve Prometheus metrics on (`GET /metrics`), e.g. 127.0.0.1:9464; unset: none.
    #[arg(long, env = "ABI_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("nats", &self.nats)
            .field("project", &self.project)
            .field("secret", &self.secret)
            .field("lease_seconds", &self.lease_seconds)
            .field("admin_identities", &self.admin_identities)
            .field("kv_replicas", &self.kv_replicas)
            .field("store_timeout_secs", &self.store_timeout_secs)
            .field("shutdown_grace_secs", &self.shutdown_grace_secs)
            .field("queue_capacity", &self.queue_capacity)
            .field("max_batch", &self.max_batch)
            .field("max_concurrent_requests", &self.max_concurrent_requests)
            .field("metrics_addr", &self.metrics_addr)
            .finish()
    }
}

pub use abi_process::{NatsAuth, NatsSettings, NatsTls, Secret};

/// A configuration that passed [`Config::validate`]: typed values only.
#[derive(Debug, Clone)]
pub struct Valid {
    /// The NATS connection.
    pub nats: NatsSettings,
    /// The project.
    pub project: Project,
    /// The project JWT secret.
    pub secret: Secret,
    /// Lease granted by register and renew, in seconds.
    pub lease_seconds: f64,
    /// Identities allowed to evict.
    pub admin_identities: Vec<String>,
    /// Replicas of the bucket when we create it.
    pub kv_replicas: NonZeroUsize,
    /// Deadline of one snapshot read or write.
    pub store_timeout: Duration,
    /// Time to finish the requests received once asked to stop.
    pub shutdown_grace: Duration,
    /// Writer queue capacity.
    pub queue_capacity: NonZeroUsize,
    /// Mutations per snapshot write.
    pub max_batch: NonZeroUsize,
    /// Requests handled at once.
    pub max_concurrent_requests: NonZeroUsize,
    /// Where Prometheus metrics are served, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
}

/// One problem in the configuration, naming the setting.
pub use abi_process::SettingError as ConfigError;

impl Config {
    /// Checks every setting and reads the secret files.
    ///
    /// # Errors
    ///
    /// Every problem found, not just the first.
    pub fn validate(&self) -> Result<Valid, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let project = Project::new(&self.project)
            .map_err(|e| errors.push(ConfigError::new("ABI_PROJECT", e.to_string())))
            .ok();
        let secret = self.secret(&mut errors);
        if !self.lease_seconds.is_finite() || self.lease_seconds < 1.0 {
            errors.push(ConfigError::new(
                "ABI_LEASE_SECONDS",
                format!(
                    "must be a number of seconds, at least 1 (got {})",
                    self.lease_seconds
                ),
            ));
        }
        let admin_identities: Vec<String> = self
            .admin_identities
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let kv_replicas = positive(&mut errors, "ABI_KV_REPLICAS", self.kv_replicas);
        if self.kv_replicas > 5 {
            errors.push(ConfigError::new(
                "ABI_KV_REPLICAS",
                "JetStream allows at most 5 replicas",
            ));
        }
        let queue_capacity = positive(&mut errors, "ABI_QUEUE_CAPACITY", self.queue_capacity);
        let max_batch = positive(&mut errors, "ABI_MAX_BATCH", self.max_batch);
        let max_concurrent = positive(
            &mut errors,
            "ABI_MAX_CONCURRENT_REQUESTS",
            self.max_concurrent_requests,
        );
        for (setting, secs) in [("ABI_STORE_TIMEOUT_SECS", self.store_timeout_secs)] {
            if secs == 0 {
                errors.push(ConfigError::new(setting, "must be at least 1 second"));
            }
        }
        let nats = self.nats.validate().map_err(|e| errors.extend(e)).ok();

        match (
            (nats, project, secret),
            kv_replicas,
            queue_capacity,
            max_batch,
            max_concurrent,
        ) {
            (
                (Some(nats), Some(project), Some(secret)),
                Some(kv),
                Some(queue),
                Some(batch),
                Some(conc),
            ) if errors.is_empty() => Ok(Valid {
                nats,
                project,
                secret,
                lease_seconds: self.lease_seconds,
                admin_identities,
                kv_replicas: kv,
                store_timeout: Duration::from_secs(self.store_timeout_secs),
                shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
                queue_capacity: queue,
                max_batch: batch,
                max_concurrent_requests: conc,
                metrics_addr: self.metrics_addr,
            }),
            _ => Err(errors),
        }
    }

    fn secret(&self, errors: &mut Vec<ConfigError>) -> Option<Secret> {
        self.secret.validate().map_err(|e| errors.push(e)).ok()
    }
}

fn positive(
    errors: &mut Vec<ConfigError>,
    setting: &'static str,
    value: usize,
) -> Option<NonZeroUsize> {
    let nz = NonZeroUsize::new(value);
    if nz.is_none() {
        errors.push(ConfigError::new(setting, "must be at least 1"));
    }
    nz
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::Write as _;

    fn parse(args: &[&str]) -> Config {
        let mut all = vec!["abi-discovery"];
        all.extend_from_slice(args);
        Config::try_parse_from(all).unwrap()
    }

    fn settings(errors: &[ConfigError]) -> Vec<&'static str> {
        errors.iter().map(|e| e.setting).collect()
    }

    #[test]
    fn defaults_with_a_secret() {
        let valid = parse(&["--jwt-secret", "s3cret"]).validate().unwrap();
        assert_eq!(valid.project.as_str(), "default");
        assert_eq!(valid.lease_seconds, 20.0);
        assert_eq!(valid.admin_identities, ["api", "engine"]);
        assert_eq!(valid.kv_replicas.get(), 1);
        assert_eq!(valid.secret.expose(), "s3cret");
        assert_eq!(valid.nats.auth, NatsAuth::None);
        assert_eq!(valid.shutdown_grace, Duration::from_secs(10));
    }

    #[test]
    fn a_secret_is_required() {
        let errors = parse(&[]).validate().unwrap_err();
        assert_eq!(settings(&errors), ["ABI_JWT_SECRET"]);
        assert!(
            errors[0]
                .to_string()
                .starts_with("ABI_JWT_SECRET: required")
        );
    }

    #[test]
    fn secret_file_is_read_without_its_newline() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "from-a-file").unwrap();
        let path = file.path().to_str().unwrap();
        let valid = parse(&["--jwt-secret-file", path]).validate().unwrap();
        assert_eq!(valid.secret.expose(), "from-a-file");
        let errors = parse(&["--jwt-secret-file", path, "--jwt-secret", "x"])
            .validate()
            .unwrap_err();
        assert_eq!(settings(&errors), ["ABI_JWT_SECRET"]);
        let errors = parse(&["--jwt-secret-file", "/nonexistent/secret"])
            .validate()
            .unwrap_err();
        assert_eq!(settings(&errors), ["ABI_JWT_SECRET_FILE"]);
    }

    #[test]
    fn every_problem_is_reported() {
        let errors = parse(&[
            "--project",
            "bad.project",
            "--lease-seconds",
            "0.5",
            "--kv-replicas",
            "0",
            "--max-batch",
            "0",
            "--nats-user",
            "u",
            "--nats-tls-cert",
            "/nonexistent/cert.pem",
        ])
        .validate()
        .unwrap_err();
        assert_eq!(
            settings(&errors),
            [
                "ABI_PROJECT",
                "ABI_JWT_SECRET",
                "ABI_LEASE_SECONDS",
                "ABI_KV_REPLICAS",
                "ABI_MAX_BATCH",
                "NATS_USER",
                "NATS_TLS_CERT",
                "NATS_TLS_CERT",
            ]
        );
    }

    #[test]
    fn debug_redacts_secrets() {
        let config = parse(&[
            "--jwt-secret",
            "top-secret-value",
            "--nats-user",
            "u",
            "--nats-password",
            "hunter2-pw",
        ]);
        let shown = format!("{config:?} {:?}", config.validate().unwrap());
        assert!(!shown.contains("top-secret-value"), "{shown}");
        assert!(!shown.contains("hunter2-pw"), "{shown}");
    }

    #[test]
    fn admin_identities_parse_and_may_be_empty() {
        let valid = parse(&["--jwt-secret", "s", "--admin-identities", " api , ops ,"])
            .validate()
            .unwrap();
        assert_eq!(valid.admin_identities, ["api", "ops"]);
        let valid = parse(&["--jwt-secret", "s", "--admin-identities", ""])
            .validate()
            .unwrap();
        assert!(valid.admin_identities.is_empty());
    }

    #[test]
    fn one_nats_authentication_at_most() {
        let errors = parse(&["--jwt-secret", "s", "--nats-token", "t", "--nats-user", "u"])
            .validate()
            .unwrap_err();
        assert_eq!(settings(&errors), ["NATS_CREDS"]);
    }
}
