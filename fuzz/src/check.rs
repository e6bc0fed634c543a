//! The handler check shared by the fuzz target (`fuzz/fuzz_targets/handler.rs`)
//! and the regression test (`crates/abi-discovery/tests/fuzz_regression.rs`,
//! which includes this file with `#[path]`).
//!
//! An input is a sequence of steps run through one `Handler` over a fresh
//! in-memory store. Each step is `[op, token, mode, ...]`:
//!
//! - `op % 9` picks the operation (`Operation::ALL` order);
//! - `token % 8` picks the header: none, garbage, a module token for `fz-a` or
//!   `fz-b`, an admin service token, one signed with another secret, an
//!   expired one, or `fz-a`'s token with the overflow header;
//! - an even `mode` sends raw bytes (a little-endian `u16` length, then that
//!   many bytes) as the payload; an odd one builds a request of the operation
//!   from small pools of valid and invalid values, so sequences reach the
//!   registry's deeper rules.
//!
//! For every step: no panic, an answer within `STEP_TIMEOUT`, a reply that
//! decodes as the operation's response type and carries the error the handler
//! reported, and a refused request leaves the stored snapshot byte-identical.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use abi_discovery::clock::ManualClock;
use abi_discovery::config::Secret;
use abi_discovery::discovery::DiscoveryConfig;
use abi_discovery::service::{HandlerConfig, ServiceCore};
use abi_discovery::store::SnapshotStore as _;
use abi_discovery::store::memory::MemoryStore;
use abi_proto::common::v1::CallError;
use abi_proto::discovery::v1 as pb;
use abi_registry::Rules;
use abi_wire::discovery::Operation;
use abi_wire::overflow::REQUEST_HEADER as OVERFLOW_REQUEST_HEADER;
use async_nats::HeaderMap;
use prost::Message;
use tokio_util::sync::CancellationToken;

/// The project secret of the harness.
pub const SECRET: &str = "fuzz-secret-0123456789abcdef0123456789";
/// The longest a single request may take before it counts as a hang.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Steps run per input, at most.
pub const MAX_STEPS: usize = 64;
/// The broker limit the handler is told about (its own cap is 512 KiB).
const BROKER_MAX_PAYLOAD: usize = 1024 * 1024;
/// Token lifetime: longer than any fuzzing session.
const TOKEN_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// Runs one input (see the module docs); panics on any violation.
pub async fn run(input: &[u8]) {
    let store = Arc::new(MemoryStore::new());
    let shutdown = CancellationToken::new();
    let rules = match Rules::new(20.0, ["api", "engine"]) {
        Ok(rules) => rules,
        Err(e) => panic!("rules: {e}"),
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let core = ServiceCore::start(
        store.clone(),
        rules,
        Arc::new(ManualClock::new(now)),
        DiscoveryConfig::default(),
        HandlerConfig {
            secret: Secret::new(SECRET),
            broker_max_payload: BROKER_MAX_PAYLOAD,
        },
        shutdown.clone(),
    );
    let handler = core.handler();
    let tokens = tokens();
    let mut cursor = Cursor { data: input };
    for _ in 0..MAX_STEPS {
        let Some(step) = Step::parse(&mut cursor, tokens) else {
            break;
        };
        let before = read(&store).await;
        let reply = match tokio::time::timeout(
            STEP_TIMEOUT,
            handler.handle(step.op, step.headers.as_ref(), &step.payload),
        )
        .await
        {
            Ok(reply) => reply,
            Err(_) => panic!(
                "{} did not answer within {STEP_TIMEOUT:?}",
                step.op.as_str()
            ),
        };
        let after = read(&store).await;
        let carried = match decode_error(step.op, &reply.payload) {
            Ok(error) => error,
            Err(e) => panic!(
                "{} reply does not decode as its response: {e}",
                step.op.as_str()
            ),
        };
        assert_eq!(
            carried,
            reply.error,
            "{} reply carries another error than reported",
            step.op.as_str()
        );
        if let Some(error) = &reply.error {
            assert!(!error.code.is_empty(), "an error without a code");
            assert_eq!(
                before,
                after,
                "refused {} ({}: {}) changed the snapshot",
                step.op.as_str(),
                error.code,
                error.message
            );
        } else if let Err(e) = pb::RegistryState::decode(after.as_slice()) {
            panic!(
                "{} stored a snapshot that does not decode: {e}",
                step.op.as_str()
            );
        }
    }
    shutdown.cancel();
    core.stopped().await;
}

async fn read(store: &MemoryStore) -> Vec<u8> {
    match store.read().await {
        Ok(snapshot) => snapshot.bytes.to_vec(),
        Err(e) => panic!("memory store read failed: {e}"),
    }
}

/// Decodes `bytes` as `op`'s response type and returns the error it carries.
///
/// # Errors
///
/// When it does not decode.
pub fn decode_error(op: Operation, bytes: &[u8]) -> Result<Option<CallError>, prost::DecodeError> {
    Ok(match op {
        Operation::Register => pb::RegisterResponse::decode(bytes)?.error,
        Operation::Renew => pb::RenewResponse::decode(bytes)?.error,
        Operation::Unregister => pb::UnregisterResponse::decode(bytes)?.error,
        Operation::Evict => pb::EvictResponse::decode(bytes)?.error,
        Operation::GetModule => pb::GetModuleResponse::decode(bytes)?.error,
        Operation::ListModules => pb::ListModulesResponse::decode(bytes)?.error,
        Operation::AuthorizeAgent => pb::AuthorizeAgentResponse::decode(bytes)?.error,
        Operation::AuthorizeModel => pb::AuthorizeModelResponse::decode(bytes)?.error,
        Operation::AuthorizeApp => pb::AuthorizeAppResponse::decode(bytes)?.error,
    })
}

/// Tokens the steps pick from, minted once per process.
#[derive(Debug)]
struct Tokens {
    module_a: String,
    module_b: String,
    admin: String,
    wrong_secret: String,
    expired: String,
    /// Caller tokens bound to instances `i1` and `i2`, for the authorize calls.
    bound_i1: String,
    bound_i2: String,
}

fn tokens() -> &'static Tokens {
    static TOKENS: OnceLock<Tokens> = OnceLock::new();
    TOKENS.get_or_init(|| {
        let now = SystemTime::now();
        let mint = |result: Result<String, abi_auth::AuthError>| match result {
            Ok(token) => token,
            Err(e) => panic!("mint a token: {e}"),
        };
        let module = |id: &str| {
            let key = mint(abi_auth::module_key(SECRET, id));
            mint(abi_auth::issue_module_token(id, &key, TOKEN_TTL, now, None))
        };
        let service = |id: &str, secret: &str, ttl: Duration, at: SystemTime, aud: Option<&str>| {
            mint(abi_auth::issue_service_token(id, secret, ttl, at, aud))
        };
        let long_ago = now - Duration::from_secs(2 * 60 * 60);
        Tokens {
            module_a: module("fz-a"),
            module_b: module("fz-b"),
            admin: service("api", SECRET, TOKEN_TTL, now, None),
            wrong_secret: service(
                "api",
                "another-secret-0123456789abcdef",
                TOKEN_TTL,
                now,
                None,
            ),
            expired: service("api", SECRET, Duration::from_secs(60), long_ago, None),
            bound_i1: service("engine", SECRET, TOKEN_TTL, now, Some("i1")),
            bound_i2: service("fz-b", SECRET, TOKEN_TTL, now, Some("i2")),
        }
    })
}

/// One request to send.
#[derive(Debug)]
struct Step {
    op: Operation,
    headers: Option<HeaderMap>,
    payload: Vec<u8>,
}

impl Step {
    fn parse(cursor: &mut Cursor<'_>, tokens: &Tokens) -> Option<Step> {
        let op = Operation::ALL[usize::from(cursor.byte()?) % Operation::ALL.len()];
        let token_kind = cursor.byte()? % 8;
        let mode = cursor.byte()?;
        let header = |token: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(abi_auth::AUTH_HEADER, token);
            Some(headers)
        };
        let headers = match token_kind {
            0 => None,
            1 => header("not.a.jwt"),
            2 => header(&tokens.module_a),
            3 => header(&tokens.module_b),
            4 => header(&tokens.admin),
            5 => header(&tokens.wrong_secret),
            6 => header(&tokens.expired),
            _ => {
                let mut headers = HeaderMap::new();
                headers.insert(abi_auth::AUTH_HEADER, tokens.module_a.as_str());
                headers.insert(OVERFLOW_REQUEST_HEADER, "1");
                Some(headers)
            }
        };
        let payload = if mode % 2 == 0 {
            let len = usize::from(u16::from_le_bytes([cursor.byte()?, cursor.byte()?]));
            cursor.take(len).to_vec()
        } else {
            structured(op, cursor, tokens)
        };
        Some(Step {
            op,
            headers,
            payload,
        })
    }
}

/// The input, consumed from the front; reads past the end give zeros.
#[derive(Debug)]
struct Cursor<'a> {
    data: &'a [u8],
}

impl Cursor<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.data.split_first()?;
        self.data = rest;
        Some(first)
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    fn pick<T: Clone>(&mut self, pool: &[T]) -> T {
        pool[usize::from(self.byte().unwrap_or(0)) % pool.len()].clone()
    }

    fn flag(&mut self) -> bool {
        self.byte().unwrap_or(0) % 2 == 1
    }

    fn count(&mut self, max: u8) -> usize {
        usize::from(self.byte().unwrap_or(0) % (max + 1))
    }

    /// A string from `pool`, or (for the two indexes past it) a very long one
    /// or a few raw bytes taken as text.
    fn text(&mut self, pool: &[&str]) -> String {
        let i = usize::from(self.byte().unwrap_or(0)) % (pool.len() + 2);
        match i.checked_sub(pool.len()) {
            None => pool[i].to_owned(),
            Some(0) => "m".repeat(300),
            Some(_) => {
                let len = self.count(12);
                String::from_utf8_lossy(self.take(len)).into_owned()
            }
        }
    }

    fn module(&mut self) -> String {
        self.text(&["fz-a", "fz-b", "api", "", "fz a", "fz-c", "x.y:z"])
    }

    fn instance(&mut self) -> String {
        self.text(&["i1", "i2", "i3", "", "a.b", "*"])
    }

    fn lease(&mut self) -> String {
        self.text(&[LEASE_A, LEASE_B, "short", ""])
    }

    fn major(&mut self) -> u32 {
        self.pick(&[1, 0, 2, u32::MAX])
    }

    fn seconds(&mut self) -> f64 {
        self.pick(&[0.0, 1.0, 30.0, -1.0, f64::NAN, f64::INFINITY, 1e300])
    }
}

const LEASE_A: &str = "lease-a-0123456789abcdef0123456789";
const LEASE_B: &str = "lease-b-0123456789abcdef0123456789";

/// A request of `op` built from pools of valid and invalid values.
fn structured(op: Operation, c: &mut Cursor<'_>, tokens: &Tokens) -> Vec<u8> {
    let caller = |c: &mut Cursor<'_>| {
        let i = c.byte().unwrap_or(0) % 5;
        match i {
            0 => tokens.bound_i1.clone(),
            1 => tokens.bound_i2.clone(),
            2 => tokens.admin.clone(),
            3 => "garbage".to_owned(),
            _ => String::new(),
        }
    };
    match op {
        Operation::Register => {
            let descriptor = pb::ModuleDescriptor {
                module_id: c.module(),
                package_version: c.text(&["1.0.0", "", "2.0.0-rc.1"]),
                contract_major: c.major(),
                dependencies: (0..c.count(3))
                    .map(|_| pb::Dependency {
                        module_id: c.module(),
                        contract_major: c.major(),
                    })
                    .collect(),
                agents: (0..c.count(2))
                    .map(|_| pb::AgentDescriptor {
                        name: c.text(&["agent", "", "bad name!"]),
                        description: c.text(&["", "does things"]),
                        contract_major: c.major(),
                        capabilities: (0..c.count(2))
                            .map(|_| c.text(&["read", "", "write"]))
                            .collect(),
                    })
                    .collect(),
                jobs: (0..c.count(2))
                    .map(|_| pb::JobDescriptor {
                        name: c.text(&["job", "", "bad job!"]),
                        contract_major: c.major(),
                        triggers: (0..c.count(2))
                            .map(|_| pb::JobTrigger {
                                kind: c.text(&["cron", "event", "", "manual"]),
                                spec: c.text(&["*/5 * * * *", "", "abi.events.x", "not cron"]),
                                time_zone: c.text(&["", "UTC", "Nowhere/Else"]),
                                filter: c.text(&["", "{}", "{\"a\":1}", "["]),
                                input: c.text(&["", "{}", "[1]", "{"]),
                            })
                            .collect(),
                        max_concurrency: c.pick(&[0, 1, 1000]),
                        max_attempts: c.pick(&[0, 1, 1000]),
                        timeout_seconds: c.seconds(),
                        kind: c.text(&["", "python", "shell"]),
                        input_schema: c.text(&["", "{}", "{\"type\":\"object\"}", "nope"]),
                        output_schema: c.text(&["", "{}", "["]),
                        ..Default::default()
                    })
                    .collect(),
                models: (0..c.count(2))
                    .map(|_| pb::ModelDescriptor {
                        name: c.text(&["model", "", "bad model!"]),
                        description: c.text(&["", "a model"]),
                        kind: c.text(&["", "chat", "embedding"]),
                    })
                    .collect(),
                apps: (0..c.count(2))
                    .map(|_| pb::AppDescriptor {
                        name: c.text(&["app", "", "Bad App"]),
                        title: c.text(&["App", ""]),
                        entry: c.text(&["/", "", "index.html", "http://x/y"]),
                        contract_major: c.major(),
                        max_upload_bytes: c.pick(&[0, 1024, u64::MAX]),
                        ..Default::default()
                    })
                    .collect(),
            };
            pb::RegisterRequest {
                descriptor: c.flag().then_some(descriptor),
                instance_id: c.instance(),
                lease_token: c.lease(),
                rollout_id: c.text(&["", "r1", "r2", "bad rollout!"]),
                rollout_modules: (0..c.count(3)).map(|_| c.module()).collect(),
                ..Default::default()
            }
            .encode_to_vec()
        }
        Operation::Renew => pb::RenewRequest {
            instance_id: c.instance(),
            lease_token: c.lease(),
            initialized: c.flag(),
            draining: c.flag(),
            ..Default::default()
        }
        .encode_to_vec(),
        Operation::Unregister => pb::UnregisterRequest {
            instance_id: c.instance(),
            lease_token: c.lease(),
            ..Default::default()
        }
        .encode_to_vec(),
        Operation::Evict => pb::EvictRequest {
            instance_id: c.instance(),
            ..Default::default()
        }
        .encode_to_vec(),
        Operation::GetModule => pb::GetModuleRequest {
            module_id: c.module(),
            contract_major: c.major(),
            ..Default::default()
        }
        .encode_to_vec(),
        Operation::ListModules => pb::ListModulesRequest {
            limit: c.pick(&[0, 1, 2, 500, u32::MAX]),
            after_instance_id: c.instance(),
            ..Default::default()
        }
        .encode_to_vec(),
        Operation::AuthorizeAgent => pb::AuthorizeAgentRequest {
            instance_id: c.instance(),
            lease_token: c.lease(),
            agent_name: c.text(&["agent", "", "other"]),
            caller_token: caller(c),
            new_invocation: c.flag(),
            ..Default::default()
        }
        .encode_to_vec(),
        Operation::AuthorizeModel => pb::AuthorizeModelRequest {
            instance_id: c.instance(),
            lease_token: c.lease(),
            model_name: c.text(&["model", "", "other"]),
            caller_token: caller(c),
            ..Default::default()
        }
        .encode_to_vec(),
        Operation::AuthorizeApp => pb::AuthorizeAppRequest {
            instance_id: c.instance(),
            lease_token: c.lease(),
            app_name: c.text(&["app", "", "other"]),
            caller_token: caller(c),
            ..Default::default()
        }
        .encode_to_vec(),
    }
}
