//! Configuration: from the environment as the reference reads it, each value
//! overridable in code.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use abi_process::{NatsArgs, NatsSettings};

use crate::error::{Error, kind_display};
use crate::token::TokenSource;

/// The discovery project when none is named (the reference's default).
pub const DEFAULT_PROJECT: &str = "default";
/// How long a module waits for its dependencies before giving up (the reference's 60 s).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often readiness is polled when no registry event arrives (the reference's 2 s).
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(2);
/// How long a draining module waits for work already started (the reference's 300 s).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(300);
pub use abi_wire::DEFAULT_NATS_URL;
/// Reconnect attempts before a lost NATS connection counts as gone for good
/// and stops the module (the reference's client gives up after 60 too), so
/// its supervisor can start a fresh process instead of one serving nothing.
pub const DEFAULT_MAX_RECONNECTS: usize = 60;
/// How long a stopping module may take from the stop request to its exit:
/// finishing work in flight, one draining renewal, unregistering and the last
/// NATS flush all share it. 8 s stays under the 10 s Docker (and compose)
/// waits before SIGKILL by default, with room for the process to exit, and
/// far under Kubernetes' 30 s; raise it (with the orchestrator's grace
/// period) for modules whose work takes longer.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(8);
/// Where the health probe listens when only `ABI_HEALTH_PORT` is set.
pub const DEFAULT_HEALTH_HOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Why a configuration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The project is not 1-64 of `[A-Za-z0-9_-]`.
    InvalidProject,
    /// A timeout is zero.
    InvalidTimeout,
    /// The rollout id is malformed.
    InvalidRolloutId,
    /// Rollout modules are malformed, repeated, or more than 64.
    InvalidRolloutModules,
    /// Rollout modules were given without a rollout id.
    RolloutModulesWithoutId,
    /// `ABI_HEALTH_PORT` or `ABI_HEALTH_HOST` is not valid.
    InvalidHealth,
    /// Discovery is on but neither a module key nor a service token is set.
    MissingToken,
    /// `NATS_URL` is not a URL or a comma-separated list of NATS URLs.
    InvalidNatsUrl,
    /// Another NATS setting (credentials, TLS, connect deadline) is malformed.
    InvalidNats,
    /// The module declares dependencies but runs without discovery.
    DependenciesWithoutDiscovery,
    /// A declaration the reference would refuse to read (a raw job
    /// descriptor with a 5-field cron, say).
    InvalidDeclaration,
}

kind_display!(ConfigErrorKind {
    InvalidProject => "invalid discovery project",
    InvalidTimeout => "invalid timeout",
    InvalidRolloutId => "invalid rollout id",
    InvalidRolloutModules => "invalid rollout modules",
    RolloutModulesWithoutId => "rollout modules require a rollout id",
    InvalidHealth => "invalid health probe address",
    MissingToken => "no service token",
    InvalidNatsUrl => "invalid NATS server list",
    InvalidNats => "invalid NATS settings",
    DependenciesWithoutDiscovery => "module dependencies require discovery",
    InvalidDeclaration => "invalid declaration",
});

/// A refused configuration.
pub type ConfigError = Error<ConfigErrorKind>;

/// Discovery settings of a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveryConfig {
    pub(crate) project: String,
    pub(crate) startup_timeout: Duration,
    pub(crate) refresh_interval: Duration,
    pub(crate) rollout_id: String,
    pub(crate) rollout_modules: Vec<String>,
    pub(crate) watch: bool,
    pub(crate) health_summary_interval: Duration,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        Self {
            project: DEFAULT_PROJECT.to_owned(),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            refresh_interval: DEFAULT_REFRESH_INTERVAL,
            rollout_id: String::new(),
            rollout_modules: Vec::new(),
            watch: true,
            health_summary_interval: crate::session::DEFAULT_HEALTH_SUMMARY_INTERVAL,
        }
    }
}

impl DiscoveryConfig {
    /// The discovery project (default `"default"`).
    #[must_use]
    pub fn project(mut self, project: impl Into<String>) -> Self {
        self.project = project.into();
        self
    }

    /// How long to wait for every dependency to be READY (default 60 s).
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// The polling fallback when no registry event arrives (default 2 s).
    #[must_use]
    pub fn refresh_interval(mut self, interval: Duration) -> Self {
        self.refresh_interval = interval;
        self
    }

    /// The rollout this process belongs to (default none; `ABI_ROLLOUT_ID`
    /// fills it when empty).
    #[must_use]
    pub fn rollout_id(mut self, id: impl Into<String>) -> Self {
        self.rollout_id = id.into();
        self
    }

    /// The module ids the rollout needs before it cuts over (default: this
    /// module alone; `ABI_ROLLOUT_MODULES` fills it when empty).
    #[must_use]
    pub fn rollout_modules<I, S>(mut self, modules: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rollout_modules = modules.into_iter().map(Into::into).collect();
        self
    }

    /// Whether readiness waits react to registry events (default true).
    /// Off, they only poll every refresh interval, like the reference.
    #[must_use]
    pub fn watch(mut self, enabled: bool) -> Self {
        self.watch = enabled;
        self
    }

    /// How often the lease health summary is logged (default 300 s; zero:
    /// never). Status changes are logged whatever this is.
    #[must_use]
    pub fn health_summary_interval(mut self, interval: Duration) -> Self {
        self.health_summary_interval = interval;
        self
    }

    /// The project.
    pub fn project_name(&self) -> &str {
        &self.project
    }

    /// Fills an empty rollout id and module list from the environment.
    pub(crate) fn fill_rollout(&mut self, env: &dyn Fn(&str) -> Option<String>) {
        if self.rollout_id.is_empty() {
            // Not trimmed: the reference's `run_module` refuses an id with
            // blanks ("Invalid rollout id") rather than joining another
            // rollout than the one written.
            self.rollout_id = env("ABI_ROLLOUT_ID").unwrap_or_default();
        }
        if self.rollout_modules.is_empty() {
            self.rollout_modules = env("ABI_ROLLOUT_MODULES")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
    }

    /// Checks every value as the reference does.
    ///
    /// # Errors
    ///
    /// The first problem found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let project_ok = (1..=64).contains(&self.project.len())
            && self
                .project
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !project_ok {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidProject,
                format!("{:?}", self.project),
            ));
        }
        if self.startup_timeout.is_zero() || self.refresh_interval.is_zero() {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidTimeout,
                "discovery timeouts must be positive",
            ));
        }
        if !self.rollout_id.is_empty() && !is_name(&self.rollout_id, 128) {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidRolloutId,
                format!(
                    "{:?} (ABI_ROLLOUT_ID must match {})",
                    self.rollout_id,
                    abi_wire::names::ROLLOUT_ID_PATTERN
                ),
            ));
        }
        if !self.rollout_modules.is_empty() && self.rollout_id.is_empty() {
            return Err(ConfigError::new(
                ConfigErrorKind::RolloutModulesWithoutId,
                "set a rollout id",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        if self.rollout_modules.len() > 64
            || !self
                .rollout_modules
                .iter()
                .all(|m| is_name(m, 256) && seen.insert(m.as_str()))
        {
            return Err(ConfigError::new(
                ConfigErrorKind::InvalidRolloutModules,
                "at most 64 distinct module ids",
            ));
        }
        Ok(())
    }
}

/// `[A-Za-z0-9_][A-Za-z0-9_.:-]*`, at most `max` bytes.
fn is_name(value: &str, max: usize) -> bool {
    let mut chars = value.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    first_ok
        && value.len() <= max
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// Everything a module runner needs besides the module itself.
pub struct Config {
    pub(crate) nats: NatsArgs,
    pub(crate) token: Option<TokenSource>,
    pub(crate) request_timeout: Duration,
    pub(crate) drain_timeout: Duration,
    pub(crate) shutdown_grace: Duration,
    pub(crate) discovery: Option<DiscoveryConfig>,
    pub(crate) health: Option<SocketAddr>,
    pub(crate) max_reconnects: Option<usize>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            nats: NatsArgs::from_lookup(&|_| None),
            token: None,
            request_timeout: crate::client::DEFAULT_REQUEST_TIMEOUT,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            discovery: None,
            health: None,
            max_reconnects: Some(DEFAULT_MAX_RECONNECTS),
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("nats", &self.nats)
            .field("token", &self.token)
            .field("request_timeout", &self.request_timeout)
            .field("drain_timeout", &self.drain_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("discovery", &self.discovery)
            .field("health", &self.health)
            .field("max_reconnects", &self.max_reconnects)
            .finish()
    }
}

/// A setting in whole seconds, at least 1 (`None` when unset).
fn whole_seconds(
    get: &dyn Fn(&str) -> Option<String>,
    key: &str,
) -> Result<Option<Duration>, ConfigError> {
    let Some(value) = get(key) else {
        return Ok(None);
    };
    value
        .parse::<u64>()
        .ok()
        .filter(|secs| *secs > 0)
        .map(|secs| Some(Duration::from_secs(secs)))
        .ok_or_else(|| {
            ConfigError::new(
                ConfigErrorKind::InvalidTimeout,
                format!("{key} must be a whole number of seconds, at least 1, not {value:?}"),
            )
        })
}

impl Config {
    /// Reads the process environment for module `module_id`:
    ///
    /// - `NATS_URL` (default `nats://127.0.0.1:4222`);
    /// - `ABI_PROJECT`: turns discovery on for that project;
    /// - `ABI_MODULE_KEY` (signs tokens for `module_id`), else `ABI_SERVICE_TOKEN`;
    /// - `ABI_ROLLOUT_ID`, `ABI_ROLLOUT_MODULES` (comma-separated);
    /// - `ABI_HEALTH_PORT`, `ABI_HEALTH_HOST` (default `127.0.0.1`; a
    ///   container probed from outside sets `0.0.0.0`);
    /// - `ABI_DRAIN_TIMEOUT_SECS`: the longest drain, in whole seconds
    ///   (default 300, at least 1);
    /// - `ABI_SHUTDOWN_GRACE_SECS`: the shutdown budget in whole seconds
    ///   (default 8, at least 1).
    ///
    /// # Errors
    ///
    /// A malformed value.
    pub fn from_env(module_id: &str) -> Result<Self, ConfigError> {
        Self::from_lookup(module_id, &|key| std::env::var(key).ok())
    }

    /// [`Config::from_env`] over any lookup function (tests pass a map).
    ///
    /// # Errors
    ///
    /// A malformed value.
    pub fn from_lookup(
        module_id: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let get = |key: &str| {
            env(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut config = Config {
            nats: NatsArgs::from_lookup(env),
            ..Config::default()
        };
        config.nats_settings()?;
        config.token = match (get("ABI_MODULE_KEY"), get("ABI_SERVICE_TOKEN")) {
            (Some(key), _) => Some(TokenSource::module_key(module_id, key)),
            (None, Some(token)) => Some(TokenSource::issued(token)),
            (None, None) => None,
        };
        if let Some(project) = get("ABI_PROJECT") {
            let mut discovery = DiscoveryConfig::default().project(project);
            discovery.fill_rollout(env);
            discovery.validate()?;
            config.discovery = Some(discovery);
        }
        if let Some(grace) = whole_seconds(&get, "ABI_SHUTDOWN_GRACE_SECS")? {
            config.shutdown_grace = grace;
        }
        if let Some(timeout) = whole_seconds(&get, "ABI_DRAIN_TIMEOUT_SECS")? {
            config.drain_timeout = timeout;
        }
        if let Some(port) = get("ABI_HEALTH_PORT") {
            let port: u16 = port.parse().map_err(|_| {
                ConfigError::new(
                    ConfigErrorKind::InvalidHealth,
                    "ABI_HEALTH_PORT must be an integer from 0 to 65535",
                )
            })?;
            let host = match get("ABI_HEALTH_HOST") {
                Some(host) => host.parse().map_err(|_| {
                    ConfigError::new(
                        ConfigErrorKind::InvalidHealth,
                        "ABI_HEALTH_HOST must be an IP address",
                    )
                })?,
                None => DEFAULT_HEALTH_HOST,
            };
            config.health = Some(SocketAddr::new(host, port));
        }
        Ok(config)
    }

    /// The NATS server, or a cluster's comma-separated seed list (default
    /// `nats://127.0.0.1:4222`, env `NATS_URL`). A malformed list fails the
    /// run with [`RunErrorKind::Connect`](crate::RunErrorKind::Connect).
    #[must_use]
    pub fn nats_url(mut self, url: impl Into<String>) -> Self {
        self.nats.nats_url = url.into();
        self
    }

    /// The NATS settings, checked: the URL list, credentials and TLS read
    /// from the environment (`NATS_URL`, `NATS_CREDS`, `NATS_USER` /
    /// `NATS_PASSWORD`, `NATS_TOKEN`, `NATS_NKEY_FILE`, `NATS_TLS_*`,
    /// `ABI_CONNECT_TIMEOUT_SECS`), as every abi process reads them.
    ///
    /// # Errors
    ///
    /// [`ConfigErrorKind::InvalidNatsUrl`] for a malformed URL list,
    /// [`ConfigErrorKind::InvalidNats`] for any other bad NATS setting; the
    /// message lists every problem.
    pub fn nats_settings(&self) -> Result<NatsSettings, ConfigError> {
        self.nats.validate().map_err(|errors| {
            let kind = if errors.iter().all(|e| e.setting == "NATS_URL") {
                ConfigErrorKind::InvalidNatsUrl
            } else {
                ConfigErrorKind::InvalidNats
            };
            let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
            ConfigError::new(kind, lines.join("; "))
        })
    }

    /// The token source (default from `ABI_MODULE_KEY`/`ABI_SERVICE_TOKEN`, else none).
    #[must_use]
    pub fn token(mut self, token: TokenSource) -> Self {
        self.token = Some(token);
        self
    }

    /// The deadline of each discovery call (default 10 s).
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long draining waits for work already started (default 300 s).
    /// The shutdown budget bounds the wait too (see
    /// [`Config::shutdown_grace`]): raise both for long work.
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The shutdown budget (default 8 s, [`DEFAULT_SHUTDOWN_GRACE`]; env
    /// `ABI_SHUTDOWN_GRACE_SECS`): from a stop request to the runner's
    /// return. Work in flight gets it first (also bounded by the drain
    /// timeout), then one draining renewal, the unregistration and the
    /// last NATS flush share what is left, each capped at 2 s; a step
    /// without time left, or without a NATS connection, is skipped and the
    /// lease expires on its own. Keep it under the orchestrator's grace
    /// period (Docker's `stop_grace_period`, Kubernetes'
    /// `terminationGracePeriodSeconds`). A zero budget is raised to 1 ms.
    /// A drain discovery asks for (a newer generation serves) is not bound
    /// by it: its work gets the drain timeout, until a stop request comes.
    #[must_use]
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace.max(Duration::from_millis(1));
        self
    }

    /// Turns discovery on with these settings (default off; env `ABI_PROJECT`).
    /// An empty rollout id or module list is filled from `ABI_ROLLOUT_ID` and
    /// `ABI_ROLLOUT_MODULES` when the module runs.
    #[must_use]
    pub fn discovery(mut self, discovery: DiscoveryConfig) -> Self {
        self.discovery = Some(discovery);
        self
    }

    /// Turns discovery off, whatever the environment says.
    #[must_use]
    pub fn without_discovery(mut self) -> Self {
        self.discovery = None;
        self
    }

    /// Reconnect attempts before the connection counts as lost for good and
    /// the module stops with an error (default 60; `None`: retry forever).
    #[must_use]
    pub fn max_reconnects(mut self, attempts: Option<usize>) -> Self {
        self.max_reconnects = attempts;
        self
    }

    /// Serves `/health` and `/ready` on `addr` (default off; env
    /// `ABI_HEALTH_PORT`/`ABI_HEALTH_HOST`). Port 0 picks a free port.
    #[must_use]
    pub fn health(mut self, addr: SocketAddr) -> Self {
        self.health = Some(addr);
        self
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn environment_fills_config_like_the_reference() {
        let env = lookup(&[
            ("NATS_URL", "nats://n:4222"),
            ("ABI_PROJECT", "p1"),
            ("ABI_SERVICE_TOKEN", "t"),
            ("ABI_ROLLOUT_ID", "r-2"),
            ("ABI_ROLLOUT_MODULES", " a, b ,,"),
            ("ABI_HEALTH_PORT", "0"),
        ]);
        let config = Config::from_lookup("m", &env).unwrap();
        assert_eq!(config.nats.nats_url, "nats://n:4222");
        let discovery = config.discovery.unwrap();
        assert_eq!(discovery.project, "p1");
        assert_eq!(discovery.rollout_id, "r-2");
        assert_eq!(discovery.rollout_modules, vec!["a", "b"]);
        assert_eq!(discovery.startup_timeout, Duration::from_secs(60));
        assert_eq!(discovery.refresh_interval, Duration::from_secs(2));
        assert_eq!(discovery.health_summary_interval, Duration::from_secs(300));
        assert_eq!(config.health, Some("127.0.0.1:0".parse().unwrap()));
        assert!(config.token.is_some());
        assert_eq!(config.shutdown_grace, DEFAULT_SHUTDOWN_GRACE);
    }

    #[test]
    fn the_shutdown_budget_comes_from_the_environment_in_whole_seconds() {
        let grace = |value: &str| {
            Config::from_lookup("m", &lookup(&[("ABI_SHUTDOWN_GRACE_SECS", value)]))
                .map(|c| c.shutdown_grace)
                .map_err(|e| e.kind())
        };
        assert_eq!(grace("25"), Ok(Duration::from_secs(25)));
        for bad in ["0", "-1", "2.5", "soon"] {
            assert_eq!(grace(bad), Err(ConfigErrorKind::InvalidTimeout), "{bad}");
        }
    }

    #[test]
    fn the_drain_timeout_comes_from_the_environment_in_whole_seconds() {
        let drain = |value: &str| {
            Config::from_lookup("m", &lookup(&[("ABI_DRAIN_TIMEOUT_SECS", value)]))
                .map(|c| c.drain_timeout)
                .map_err(|e| e.to_string())
        };
        assert_eq!(drain("90"), Ok(Duration::from_secs(90)));
        assert_eq!(
            Config::from_lookup("m", &lookup(&[]))
                .unwrap()
                .drain_timeout,
            DEFAULT_DRAIN_TIMEOUT
        );
        let refused = drain("0").unwrap_err();
        assert!(
            refused.contains("ABI_DRAIN_TIMEOUT_SECS must be a whole number of seconds"),
            "{refused}"
        );
    }

    #[test]
    fn no_project_means_no_discovery() {
        let config = Config::from_lookup("m", &lookup(&[])).unwrap();
        assert!(config.discovery.is_none() && config.health.is_none() && config.token.is_none());
    }

    #[test]
    fn malformed_values_are_refused_with_a_kind() {
        let err =
            |pairs: &[(&str, &str)]| Config::from_lookup("m", &lookup(pairs)).unwrap_err().kind();
        assert_eq!(
            err(&[("ABI_PROJECT", "a.b")]),
            ConfigErrorKind::InvalidProject
        );
        assert_eq!(
            err(&[("ABI_PROJECT", "p"), ("ABI_ROLLOUT_ID", ".x")]),
            ConfigErrorKind::InvalidRolloutId
        );
        assert_eq!(
            err(&[("ABI_PROJECT", "p"), ("ABI_ROLLOUT_MODULES", "a")]),
            ConfigErrorKind::RolloutModulesWithoutId
        );
        assert_eq!(
            err(&[
                ("ABI_PROJECT", "p"),
                ("ABI_ROLLOUT_ID", "r"),
                ("ABI_ROLLOUT_MODULES", "a,a")
            ]),
            ConfigErrorKind::InvalidRolloutModules
        );
        assert_eq!(
            err(&[("ABI_HEALTH_PORT", "70000")]),
            ConfigErrorKind::InvalidHealth
        );
    }

    #[test]
    fn a_rollout_id_with_blanks_is_refused_like_the_reference() {
        for id in [" v2 ", "v2 ", " "] {
            let from_env = Config::from_lookup(
                "m",
                &lookup(&[("ABI_PROJECT", "p"), ("ABI_ROLLOUT_ID", id)]),
            );
            assert_eq!(
                from_env.unwrap_err().kind(),
                ConfigErrorKind::InvalidRolloutId,
                "{id:?}"
            );
            // A discovery configured in code takes the id from the
            // environment when the module runs, and is refused the same way.
            let mut in_code = DiscoveryConfig::default();
            in_code.fill_rollout(&lookup(&[("ABI_ROLLOUT_ID", id)]));
            assert_eq!(
                in_code.validate().unwrap_err().kind(),
                ConfigErrorKind::InvalidRolloutId,
                "{id:?}"
            );
        }
        // Empty is no rollout, as in the reference.
        let config = Config::from_lookup(
            "m",
            &lookup(&[("ABI_PROJECT", "p"), ("ABI_ROLLOUT_ID", "")]),
        )
        .unwrap();
        assert_eq!(config.discovery.unwrap().rollout_id, "");
    }
}
