//! [`TestRegistry`]: a discovery service in this process, and what a test
//! needs around it (tokens, clients, runners, the stored snapshot).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use abi_proto::discovery::v1 as pb;
use abi_sdk::{
    Config, DiscoveryClient, DiscoveryConfig, Module, ModuleSpec, RegistryWatch, Runner, Status,
    TokenSource,
};
use prost::Message;
use rand::RngCore;
use tokio::sync::watch;

use crate::running::RunningModule;
use crate::service::InProcessService;

/// The lease granted unless configured otherwise (the service's default).
pub const DEFAULT_LEASE_SECONDS: f64 = 20.0;
/// How often runners started here poll when no registry event arrives: short,
/// since nothing here costs a network round trip.
pub const DEFAULT_REFRESH: Duration = Duration::from_millis(200);
/// How long runners started here wait for their dependencies.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// The deadline of each call to the in-process service.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`TestRegistry::wait_for_status`] waits by default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// The admin identity of [`TestRegistry::admin`].
const ADMIN: &str = "api";

/// A refused test-registry setting.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SetupError(#[from] abi_registry::RulesError);

/// Settings of a [`TestRegistry`].
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until `start`"]
pub struct TestRegistryBuilder {
    project: String,
    lease_seconds: f64,
    admin_identities: Vec<String>,
    secret: Option<String>,
}

impl Default for TestRegistryBuilder {
    fn default() -> Self {
        Self {
            project: abi_sdk::DEFAULT_PROJECT.to_owned(),
            lease_seconds: DEFAULT_LEASE_SECONDS,
            admin_identities: vec!["api".into(), "engine".into()],
            secret: None,
        }
    }
}

impl TestRegistryBuilder {
    /// The project served (default `"default"`).
    pub fn project(mut self, project: impl Into<String>) -> Self {
        self.project = project.into();
        self
    }

    /// The lease register and renew grant, in seconds (default 20).
    pub fn lease_seconds(mut self, seconds: f64) -> Self {
        self.lease_seconds = seconds;
        self
    }

    /// The identities allowed to evict and see everything (default `api`, `engine`).
    pub fn admin_identities<I, S>(mut self, identities: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.admin_identities = identities.into_iter().map(Into::into).collect();
        self
    }

    /// The project secret tokens are signed with (default: random).
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// Starts the service on the current Tokio runtime.
    ///
    /// # Errors
    ///
    /// A lease that is not a positive number of seconds.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime (the writer is a task).
    pub fn start(self) -> Result<TestRegistry, SetupError> {
        let rules = abi_registry::Rules::new(self.lease_seconds, self.admin_identities)?;
        let secret = self.secret.unwrap_or_else(random_secret);
        let service = InProcessService::start(self.project, rules, &secret);
        Ok(TestRegistry { service, secret })
    }
}

/// A discovery service in this process: the real rules, request handling and
/// group-commit writer of `abi-discovery`, over the in-memory store, with
/// no NATS anywhere. Modules run against it with [`TestRegistry::start_module`]
/// (or a [`TestRegistry::runner`]), exactly as they would against the real
/// service, only without a network.
///
/// Cheap to clone; the service stops when the last clone and every module
/// client using it are gone.
#[derive(Clone, Debug)]
pub struct TestRegistry {
    service: Arc<InProcessService>,
    secret: String,
}

impl TestRegistry {
    /// A registry with the defaults of [`TestRegistryBuilder`].
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub fn new() -> Self {
        match Self::builder().start() {
            Ok(registry) => registry,
            // The default lease is a valid constant.
            Err(err) => unreachable!("default test registry refused: {err}"),
        }
    }

    /// Settings other than the defaults.
    pub fn builder() -> TestRegistryBuilder {
        TestRegistryBuilder::default()
    }

    /// The project served.
    pub fn project(&self) -> &str {
        self.service.project()
    }

    /// The project secret (to mint tokens of your own).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The module key of `module_id`, as `ABI_MODULE_KEY` would hold it.
    pub fn module_key(&self, module_id: &str) -> String {
        abi_auth::module_key(&self.secret, module_id).unwrap_or_default()
    }

    /// Tokens asserting `identity`: signed with its module key, or with the
    /// project secret for a first-party identity (`api`, `engine`, ...).
    pub fn token_source(&self, identity: &str) -> TokenSource {
        if abi_auth::is_first_party(identity) {
            let token = abi_auth::issue_service_token(
                identity,
                &self.secret,
                abi_auth::DEFAULT_TTL,
                SystemTime::now(),
                None,
            )
            .unwrap_or_default();
            TokenSource::issued(token)
        } else {
            TokenSource::module_key(identity, self.module_key(identity))
        }
    }

    /// A client calling as `identity`.
    pub fn client(&self, identity: &str) -> DiscoveryClient {
        DiscoveryClient::local(
            self.service.clone(),
            self.project(),
            self.token_source(identity),
        )
        .request_timeout(DEFAULT_REQUEST_TIMEOUT)
    }

    /// A client calling as the admin identity `api` (it may evict).
    pub fn admin(&self) -> DiscoveryClient {
        self.client(ADMIN)
    }

    /// Registry events, as [`DiscoveryClient::watch`] reports them.
    pub fn watch(&self) -> RegistryWatch {
        self.admin().watch()
    }

    /// The configuration [`TestRegistry::runner`] uses for `module_id`:
    /// discovery on this project, its module key, [`DEFAULT_REFRESH`],
    /// [`DEFAULT_STARTUP_TIMEOUT`], no health probe. Adjust and pass it to
    /// [`Runner::config`].
    pub fn config(&self, module_id: &str) -> Config {
        Config::default()
            .token(self.token_source(module_id))
            .request_timeout(DEFAULT_REQUEST_TIMEOUT)
            .discovery(
                DiscoveryConfig::default()
                    .project(self.project())
                    .refresh_interval(DEFAULT_REFRESH)
                    .startup_timeout(DEFAULT_STARTUP_TIMEOUT),
            )
    }

    /// A runner for `spec` wired to this registry (see [`TestRegistry::config`]),
    /// not listening to signals.
    pub fn runner(&self, spec: ModuleSpec) -> Runner {
        let config = self.config(spec.module_id());
        Runner::new(spec)
            .config(config)
            .local(self.service.clone())
            .handle_signals(false)
    }

    /// Runs `module` in a task with [`TestRegistry::runner`]; stop it with
    /// [`RunningModule::stop`].
    pub fn start_module<M: Module>(&self, spec: ModuleSpec, module: M) -> RunningModule {
        RunningModule::from_runner(self.runner(spec), module)
    }

    /// The registry as stored (revision, records), without lease filtering.
    pub fn snapshot(&self) -> (u64, pb::RegistryState) {
        let stored = self.service.stored();
        let state = pb::RegistryState::decode(stored.bytes.as_ref()).unwrap_or_default();
        (stored.revision, state)
    }

    /// The live instances of `module_id` as a lookup reports them (any
    /// contract major), by instance id.
    pub fn instances(&self, module_id: &str) -> Vec<pb::Instance> {
        let now = now_epoch();
        let mut found: Vec<pb::Instance> = self
            .snapshot()
            .1
            .records
            .into_iter()
            .filter_map(|r| r.instance)
            .filter(|i| i.expires_at > now)
            .filter(|i| {
                i.descriptor
                    .as_ref()
                    .is_some_and(|d| d.module_id == module_id)
            })
            .collect();
        found.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
        found
    }

    /// Waits until some instance of `module_id` is stored with `status`, for
    /// at most [`DEFAULT_WAIT`]; returns it. Reacts to each write (no polling).
    ///
    /// # Errors
    ///
    /// [`WaitTimedOut`] with what was stored last.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn wait_for_status(
        &self,
        module_id: &str,
        status: Status,
    ) -> Result<pb::Instance, WaitTimedOut> {
        self.wait_until(DEFAULT_WAIT, |registry| {
            registry
                .instances(module_id)
                .into_iter()
                .find(|i| Status::parse(&i.status) == status)
        })
        .await
        .ok_or_else(|| self.timed_out(module_id, format!("{module_id} {status}")))
    }

    /// Waits until no live instance of `module_id` is stored, for at most
    /// [`DEFAULT_WAIT`].
    ///
    /// # Errors
    ///
    /// [`WaitTimedOut`] with the instances still stored.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn wait_gone(&self, module_id: &str) -> Result<(), WaitTimedOut> {
        self.wait_until(DEFAULT_WAIT, |registry| {
            registry.instances(module_id).is_empty().then_some(())
        })
        .await
        .ok_or_else(|| self.timed_out(module_id, format!("{module_id} gone")))
    }

    /// A failed wait for `what`, with the instances of `module_id` stored now.
    fn timed_out(&self, module_id: &str, what: String) -> WaitTimedOut {
        let seen = self
            .instances(module_id)
            .iter()
            .map(|i| format!("{}={}", i.instance_id, i.status))
            .collect();
        WaitTimedOut { what, seen }
    }

    /// Evaluates `check` after each write (and every 250 ms, since leases
    /// pass without writes) until it returns something, for at most `limit`.
    /// `None` when `limit` passed first.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads (as long as `check` does).
    pub async fn wait_until<T>(
        &self,
        limit: Duration,
        mut check: impl FnMut(&TestRegistry) -> Option<T>,
    ) -> Option<T> {
        let mut writes: watch::Receiver<_> = self.service.subscribe();
        let waited = tokio::time::timeout(limit, async {
            loop {
                writes.borrow_and_update();
                if let Some(found) = check(self) {
                    return Some(found);
                }
                // Leases also pass without a write: look again now and then.
                let _ = tokio::time::timeout(Duration::from_millis(250), writes.changed()).await;
            }
        })
        .await;
        waited.ok().flatten()
    }

    /// Makes every request fail as if the service were down (the SDK sees a
    /// transport error and retries), until [`TestRegistry::resume`].
    pub fn pause(&self) {
        self.service.set_paused(true);
    }

    /// Serves requests again after [`TestRegistry::pause`].
    pub fn resume(&self) {
        self.service.set_paused(false);
    }
}

impl Default for TestRegistry {
    fn default() -> Self {
        Self::new()
    }
}

/// A wait of [`TestRegistry`] ran out of time.
#[derive(Debug, thiserror::Error)]
#[error("timed out waiting for {what}; stored: {seen:?}")]
pub struct WaitTimedOut {
    what: String,
    seen: Vec<String>,
}

fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn now_epoch() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
