//! The wire contract, pinned by bytes the Python reference wrote.
//!
//! `tests/golden/make_vectors.py` serializes one message per file with the
//! reference's generated classes (`naas_abi_proto` 0.2.0). Here each value is
//! built again in Rust; the file must decode to exactly that value, and both
//! the decoded and the hand-built value must encode to exactly the file's
//! bytes. A renamed, renumbered or retyped field in `proto/` fails one of them.
//!
//! Known difference, pinned by `job_descriptor_negative_zero`: Python writes a
//! double field holding -0.0 (its bits are not zero), prost leaves it out like
//! +0.0. prost decodes either form to a zero that compares equal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;

use abi_proto::Message;
use abi_proto::common::v1 as common;
use abi_proto::discovery::v1 as pb;

const I32_MIN: i32 = i32::MIN;
const I32_MAX: i32 = i32::MAX;
const U32_MAX: u32 = u32::MAX;
const U64_MAX: u64 = u64::MAX;
/// `"tok-" + "0123456789abcdef" * 4`, as in make_vectors.py.
const LEASE_TOKEN: &str = "tok-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// Hex SHA-256 of [`LEASE_TOKEN`].
const LEASE_HASH: &str = "3377841e172a594c34ebaa953a3c3542cf988ff3694fc9ea8619b87cff46595f";

/// Checks one file's bytes; the error says what differs.
pub(crate) type Check = Box<dyn Fn(&[u8]) -> Result<(), String>>;

/// One vector: its file name (without `.bin`) and how to check its bytes.
pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) check: Check,
}

/// The usual check: decodes to `expected`, and both re-encode to the bytes.
pub(crate) fn exact<M>(name: &'static str, expected: M) -> Case
where
    M: Message + Default + PartialEq + Debug + 'static,
{
    Case {
        name,
        check: Box::new(move |bytes| {
            let decoded = M::decode(bytes).map_err(|e| format!("does not decode: {e}"))?;
            if decoded != expected {
                return Err(format!(
                    "decoded value differs\n  decoded:  {decoded:?}\n  expected: {expected:?}"
                ));
            }
            let again = decoded.encode_to_vec();
            if again != bytes {
                return Err(format!(
                    "re-encoding differs\n  file: {}\n  ours: {}",
                    hex::encode(bytes),
                    hex::encode(&again)
                ));
            }
            let built = expected.encode_to_vec();
            if built != bytes {
                return Err(format!(
                    "the Rust value encodes differently\n  file: {}\n  ours: {}",
                    hex::encode(bytes),
                    hex::encode(&built)
                ));
            }
            Ok(())
        }),
    }
}

/// A `JobDescriptor { name: "j", timeout_seconds }` whose double cannot use
/// `==` (NaN) or encodes differently in prost (-0.0): compares bits instead.
fn job_double(name: &'static str, timeout_seconds: f64, reencodes_identically: bool) -> Case {
    Case {
        name,
        check: Box::new(move |bytes| {
            let decoded =
                pb::JobDescriptor::decode(bytes).map_err(|e| format!("does not decode: {e}"))?;
            if decoded.name != "j" || decoded.timeout_seconds.to_bits() != timeout_seconds.to_bits()
            {
                return Err(format!(
                    "decoded {decoded:?}, want timeout_seconds {timeout_seconds:?}"
                ));
            }
            let again = decoded.encode_to_vec();
            if reencodes_identically {
                if again != bytes {
                    return Err(format!("re-encoding differs: {}", hex::encode(&again)));
                }
            } else {
                // prost drops the field (its value equals the 0.0 default);
                // what remains must be exactly the name field.
                let without = pb::JobDescriptor {
                    name: "j".into(),
                    ..Default::default()
                }
                .encode_to_vec();
                if again != without || again == bytes {
                    return Err(format!(
                        "the -0.0 difference changed: file {}, ours {}",
                        hex::encode(bytes),
                        hex::encode(&again)
                    ));
                }
            }
            Ok(())
        }),
    }
}

pub(crate) fn s(value: &str) -> String {
    value.to_owned()
}

pub(crate) fn context() -> common::CallContext {
    common::CallContext {
        trace_id: s("trace-0123456789abcdef"),
        timeout_ms: 1500,
        principal_id: s("user:alice"),
        workspace_id: s("ws-42"),
        tenant_id: s("tenant-é"),
    }
}

fn call_error() -> common::CallError {
    common::CallError {
        code: s("DEPENDENCY_CYCLE"),
        message: s("Required modules form a cycle"),
        retryable: true,
        status: Some(503),
    }
}

fn agent(name: &str) -> pb::AgentDescriptor {
    pb::AgentDescriptor {
        name: s(name),
        description: s("Sums up 📄 文档"),
        contract_major: 3,
        capabilities: vec![s("agent.invoke.v1"), s("agent.stream.v1"), s("x:y-z")],
    }
}

fn triggers() -> Vec<pb::JobTrigger> {
    vec![
        pb::JobTrigger {
            kind: s("cron"),
            spec: s("0 30 9 * * 1-5"),
            time_zone: s("Europe/Paris"),
            filter: s(""),
            input: s(r#"{"report": "daily"}"#),
        },
        pb::JobTrigger {
            kind: s("every"),
            spec: s("1h"),
            input: s("{}"),
            ..Default::default()
        },
        pb::JobTrigger {
            kind: s("event"),
            spec: s("abi.events.orders.created"),
            filter: s(r#"{"region": "eu"}"#),
            ..Default::default()
        },
    ]
}

fn trigger_full() -> pb::JobTrigger {
    pb::JobTrigger {
        kind: s("cron"),
        spec: s("*/5 * * * * *"),
        time_zone: s("America/New_York"),
        filter: s(r#"{"a": 1}"#),
        input: s(r#"{"b": [1, 2, 3]}"#),
    }
}

fn job(name: &str) -> pb::JobDescriptor {
    pb::JobDescriptor {
        name: s(name),
        description: s("Builds the nightly report"),
        contract_major: 2,
        triggers: triggers(),
        max_concurrency: 4,
        max_attempts: 3,
        timeout_seconds: 12.5,
        kind: s("workflow"),
        input_schema: s(r#"{"type": "object"}"#),
        output_schema: s(r#"{"type": "object", "properties": {"ok": {"type": "boolean"}}}"#),
    }
}

fn dependency(module_id: &str, contract_major: u32) -> pb::Dependency {
    pb::Dependency {
        module_id: s(module_id),
        contract_major,
    }
}

fn model(name: &str) -> pb::ModelDescriptor {
    pb::ModelDescriptor {
        name: s(name),
        description: s("A local chat model"),
        kind: s("chat"),
    }
}

fn app(name: &str) -> pb::AppDescriptor {
    pb::AppDescriptor {
        name: s(name),
        title: s("Dashboard"),
        description: s("Shows the numbers"),
        category: s("analytics"),
        icon_emoji: s("📊"),
        entry: s("pages/index.html"),
        contract_major: 1,
        max_upload_bytes: 10 * 1024 * 1024,
    }
}

fn descriptor() -> pb::ModuleDescriptor {
    pb::ModuleDescriptor {
        module_id: s("orders"),
        package_version: s("1.4.0-rc.1+build.7"),
        contract_major: 5,
        dependencies: vec![
            dependency("billing", 2),
            dependency("users", 1),
            dependency("ns:mail", 7),
        ],
        agents: vec![agent("summarizer"), agent("planner")],
        jobs: vec![job("nightly-report"), job("cleanup")],
        models: vec![model("gpt-local"), model("small")],
        apps: vec![app("dashboard"), app("admin")],
    }
}

fn instance() -> pb::Instance {
    pb::Instance {
        descriptor: Some(descriptor()),
        instance_id: s("orders-7f3a"),
        status: s("READY"),
        expires_at: 1764400000.123456,
        rollout_id: s("deploy-2026-11-29"),
    }
}

fn small_instance(instance_id: &str, status: &str, expires_at: f64) -> pb::Instance {
    pb::Instance {
        descriptor: Some(pb::ModuleDescriptor {
            module_id: s("users"),
            contract_major: 1,
            ..Default::default()
        }),
        instance_id: s(instance_id),
        status: s(status),
        expires_at,
        ..Default::default()
    }
}

fn record() -> pb::RegistryRecord {
    pb::RegistryRecord {
        instance: Some(instance()),
        owner: s("orders"),
        lease_hash: s(LEASE_HASH),
        initialized: true,
        draining: true,
        rollout_id: s("deploy-2026-11-29"),
        registered_at: 1764399980.5,
        rollout_modules: vec![s("billing"), s("orders"), s("users")],
    }
}

const CALLER_TOKEN: &str = "eyJhbGciOiJIUzI1NiJ9.e30.c2ln";

/// Every vector make_vectors.py writes, in its order.
fn cases() -> Vec<Case> {
    let t = |timeout_ms| common::CallContext {
        trace_id: s("t"),
        timeout_ms,
        ..Default::default()
    };
    let x = |status| common::CallError {
        code: s("X"),
        status: Some(status),
        ..Default::default()
    };
    let j = |timeout_seconds| pb::JobDescriptor {
        name: s("j"),
        timeout_seconds,
        ..Default::default()
    };
    vec![
        // abi.common.v1
        exact("call_context_empty", common::CallContext::default()),
        exact("call_context_full", context()),
        exact("call_context_i32_min", t(I32_MIN)),
        exact("call_context_i32_max", t(I32_MAX)),
        exact(
            "call_context_unicode",
            common::CallContext {
                trace_id: s("🚀追踪-ID"),
                principal_id: s("用户👩‍💻"),
                workspace_id: s("Ωμέγα"),
                tenant_id: s("テナント"),
                ..Default::default()
            },
        ),
        exact("call_error_empty", common::CallError::default()),
        exact("call_error_full", call_error()),
        exact(
            "call_error_status_zero",
            common::CallError {
                code: s("UNAVAILABLE"),
                status: Some(0),
                ..Default::default()
            },
        ),
        exact(
            "call_error_status_absent",
            common::CallError {
                code: s("INVALID_ARGUMENT"),
                message: s("Invalid rollout id"),
                ..Default::default()
            },
        ),
        exact("call_error_status_i32_min", x(I32_MIN)),
        exact("call_error_status_i32_max", x(I32_MAX)),
        // abi.discovery.v1: descriptors
        exact("agent_descriptor_empty", pb::AgentDescriptor::default()),
        exact("agent_descriptor_full", agent("summarizer")),
        exact(
            "agent_descriptor_u32_max",
            pb::AgentDescriptor {
                name: s("a"),
                contract_major: U32_MAX,
                ..Default::default()
            },
        ),
        exact("job_trigger_empty", pb::JobTrigger::default()),
        exact("job_trigger_full", trigger_full()),
        exact("job_descriptor_empty", pb::JobDescriptor::default()),
        exact("job_descriptor_full", job("nightly-report")),
        exact(
            "job_descriptor_u32_max",
            pb::JobDescriptor {
                name: s("j"),
                contract_major: U32_MAX,
                max_concurrency: U32_MAX,
                max_attempts: U32_MAX,
                ..Default::default()
            },
        ),
        exact("job_descriptor_negative_double", j(-1.5)),
        exact("job_descriptor_fraction_double", j(0.1)),
        exact("job_descriptor_tiny_double", j(5e-324)),
        exact("job_descriptor_max_double", j(f64::MAX)),
        exact("job_descriptor_infinity", j(f64::INFINITY)),
        exact("job_descriptor_neg_infinity", j(f64::NEG_INFINITY)),
        job_double("job_descriptor_nan", f64::NAN, true),
        job_double("job_descriptor_negative_zero", -0.0, false),
        exact("dependency_empty", pb::Dependency::default()),
        exact("dependency_full", dependency("billing", 2)),
        exact("dependency_u32_max", dependency("m", U32_MAX)),
        exact("model_descriptor_empty", pb::ModelDescriptor::default()),
        exact("model_descriptor_full", model("gpt-local")),
        exact("app_descriptor_empty", pb::AppDescriptor::default()),
        exact("app_descriptor_full", app("dashboard")),
        exact(
            "app_descriptor_max",
            pb::AppDescriptor {
                name: s("big"),
                contract_major: U32_MAX,
                max_upload_bytes: U64_MAX,
                ..Default::default()
            },
        ),
        exact("module_descriptor_empty", pb::ModuleDescriptor::default()),
        exact("module_descriptor_full", descriptor()),
        exact(
            "module_descriptor_unicode",
            pb::ModuleDescriptor {
                module_id: s("模块"),
                package_version: s("版本-🦀"),
                contract_major: 1,
                agents: vec![pb::AgentDescriptor {
                    name: s("エージェント"),
                    description: s("😀😃😄"),
                    contract_major: 1,
                    ..Default::default()
                }],
                ..Default::default()
            },
        ),
        exact("instance_empty", pb::Instance::default()),
        exact("instance_full", instance()),
        // abi.discovery.v1: requests and responses
        exact("register_request_empty", pb::RegisterRequest::default()),
        exact(
            "register_request_full",
            pb::RegisterRequest {
                context: Some(context()),
                descriptor: Some(descriptor()),
                instance_id: s("orders-7f3a"),
                lease_token: s(LEASE_TOKEN),
                rollout_id: s("deploy-2026-11-29"),
                rollout_modules: vec![s("orders"), s("billing"), s("users")],
            },
        ),
        exact("register_response_empty", pb::RegisterResponse::default()),
        exact(
            "register_response_full",
            pb::RegisterResponse {
                error: Some(call_error()),
                instance: Some(instance()),
                lease_seconds: 19.999998092651367,
            },
        ),
        exact(
            "register_response_ok",
            pb::RegisterResponse {
                error: None,
                instance: Some(instance()),
                lease_seconds: 20.0,
            },
        ),
        exact("renew_request_empty", pb::RenewRequest::default()),
        exact(
            "renew_request_full",
            pb::RenewRequest {
                context: Some(context()),
                instance_id: s("orders-7f3a"),
                lease_token: s(LEASE_TOKEN),
                initialized: true,
                draining: true,
            },
        ),
        exact("renew_response_empty", pb::RenewResponse::default()),
        exact(
            "renew_response_full",
            pb::RenewResponse {
                error: Some(call_error()),
                instance: Some(instance()),
                lease_seconds: 20.0,
            },
        ),
        exact("unregister_request_empty", pb::UnregisterRequest::default()),
        exact(
            "unregister_request_full",
            pb::UnregisterRequest {
                context: Some(context()),
                instance_id: s("orders-7f3a"),
                lease_token: s(LEASE_TOKEN),
            },
        ),
        exact(
            "unregister_response_empty",
            pb::UnregisterResponse::default(),
        ),
        exact(
            "unregister_response_full",
            pb::UnregisterResponse {
                error: Some(call_error()),
            },
        ),
        exact("get_module_request_empty", pb::GetModuleRequest::default()),
        exact(
            "get_module_request_full",
            pb::GetModuleRequest {
                context: Some(context()),
                module_id: s("orders"),
                contract_major: 5,
            },
        ),
        exact(
            "get_module_response_empty",
            pb::GetModuleResponse::default(),
        ),
        exact(
            "get_module_response_full",
            pb::GetModuleResponse {
                error: Some(call_error()),
                instances: vec![
                    instance(),
                    small_instance("users-1", "STARTING", 100.25),
                    small_instance("users-2", "DRAINING", -3.75),
                ],
            },
        ),
        exact(
            "list_modules_request_empty",
            pb::ListModulesRequest::default(),
        ),
        exact(
            "list_modules_request_full",
            pb::ListModulesRequest {
                context: Some(context()),
                limit: 100,
                after_instance_id: s("orders-7f3a"),
            },
        ),
        exact(
            "list_modules_request_u32_max",
            pb::ListModulesRequest {
                limit: U32_MAX,
                ..Default::default()
            },
        ),
        exact(
            "list_modules_response_empty",
            pb::ListModulesResponse::default(),
        ),
        exact(
            "list_modules_response_full",
            pb::ListModulesResponse {
                error: Some(call_error()),
                instances: vec![
                    small_instance("users-1", "STAGED", 1.5),
                    small_instance("users-2", "DEGRADED", 2.5),
                ],
                next_after_instance_id: s("users-2"),
            },
        ),
        exact("evict_request_empty", pb::EvictRequest::default()),
        exact(
            "evict_request_full",
            pb::EvictRequest {
                context: Some(context()),
                instance_id: s("orders-7f3a"),
            },
        ),
        exact("evict_response_empty", pb::EvictResponse::default()),
        exact(
            "evict_response_full",
            pb::EvictResponse {
                error: Some(call_error()),
                instance: Some(instance()),
            },
        ),
        // abi.discovery.v1: the stored snapshot
        exact("registry_record_empty", pb::RegistryRecord::default()),
        exact("registry_record_full", record()),
        exact("registry_state_empty", pb::RegistryState::default()),
        exact(
            "registry_state_full",
            pb::RegistryState {
                records: vec![
                    record(),
                    pb::RegistryRecord {
                        instance: Some(small_instance("users-1", "STARTING", 1764400020.0)),
                        owner: s("users"),
                        lease_hash: s(LEASE_HASH),
                        registered_at: 1764400000.0,
                        ..Default::default()
                    },
                    pb::RegistryRecord::default(),
                ],
            },
        ),
        // abi.discovery.v1: authorizations
        exact(
            "authorize_agent_request_empty",
            pb::AuthorizeAgentRequest::default(),
        ),
        exact(
            "authorize_agent_request_full",
            pb::AuthorizeAgentRequest {
                context: Some(context()),
                instance_id: s("orders-7f3a"),
                lease_token: s(LEASE_TOKEN),
                agent_name: s("summarizer"),
                caller_token: s(CALLER_TOKEN),
                new_invocation: true,
            },
        ),
        exact(
            "authorize_agent_response_empty",
            pb::AuthorizeAgentResponse::default(),
        ),
        exact(
            "authorize_agent_response_full",
            pb::AuthorizeAgentResponse {
                error: Some(call_error()),
                caller_identity: s("engine"),
                caller_admin: true,
            },
        ),
        exact(
            "authorize_model_request_empty",
            pb::AuthorizeModelRequest::default(),
        ),
        exact(
            "authorize_model_request_full",
            pb::AuthorizeModelRequest {
                context: Some(context()),
                instance_id: s("orders-7f3a"),
                lease_token: s(LEASE_TOKEN),
                model_name: s("gpt-local"),
                caller_token: s(CALLER_TOKEN),
            },
        ),
        exact(
            "authorize_model_response_empty",
            pb::AuthorizeModelResponse::default(),
        ),
        exact(
            "authorize_model_response_full",
            pb::AuthorizeModelResponse {
                error: Some(call_error()),
                caller_identity: s("api"),
                caller_admin: true,
            },
        ),
        exact(
            "authorize_app_request_empty",
            pb::AuthorizeAppRequest::default(),
        ),
        exact(
            "authorize_app_request_full",
            pb::AuthorizeAppRequest {
                context: Some(context()),
                instance_id: s("orders-7f3a"),
                lease_token: s(LEASE_TOKEN),
                app_name: s("dashboard"),
                caller_token: s(CALLER_TOKEN),
            },
        ),
        exact(
            "authorize_app_response_empty",
            pb::AuthorizeAppResponse::default(),
        ),
        exact(
            "authorize_app_response_full",
            pb::AuthorizeAppResponse {
                error: Some(call_error()),
                caller_identity: s("orders"),
                caller_admin: false,
            },
        ),
    ]
}

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn vectors_dir() -> PathBuf {
    workspace_root().join("tests/golden/vectors")
}

/// The `.bin` files of a directory, by name without the extension.
pub(crate) fn read_vectors(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read the vectors in {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "bin") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            files.insert(name, std::fs::read(&path).unwrap());
        }
    }
    files
}

/// The venv Python that imports the reference (see scripts/setup.sh).
pub(crate) fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("ABI_PYTHON") {
        return PathBuf::from(path);
    }
    let fallback = workspace_root().join(".venv/bin/python");
    assert!(
        fallback.exists(),
        "no Python with the reference packages: set ABI_PYTHON or run ./scripts/setup.sh \
         (it creates {})",
        fallback.display()
    );
    fallback
}

#[test]
fn every_vector_decodes_to_the_rust_value_and_re_encodes_to_the_same_bytes() {
    let files = read_vectors(&vectors_dir());
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases() {
        let Some(bytes) = files.get(case.name) else {
            failures.push(format!("{}: no such vector file", case.name));
            continue;
        };
        if let Err(why) = (case.check)(bytes) {
            failures.push(format!("{}: {why}", case.name));
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 80, "only {checked} vectors checked");
}

#[test]
fn every_vector_file_has_a_rust_counterpart_and_back() {
    let on_disk: BTreeSet<String> = read_vectors(&vectors_dir()).into_keys().collect();
    let names: Vec<&str> = cases().iter().map(|c| c.name).collect();
    let in_rust: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    assert_eq!(names.len(), in_rust.len(), "a case name is listed twice");
    let unchecked: Vec<_> = on_disk.difference(&in_rust).collect();
    let missing: Vec<_> = in_rust.difference(&on_disk).collect();
    assert!(
        unchecked.is_empty(),
        "vectors with no Rust counterpart: {unchecked:?}"
    );
    assert!(
        missing.is_empty(),
        "Rust cases with no vector file: {missing:?}"
    );
}

#[test]
fn the_check_catches_one_wrong_nested_field() {
    // Proves the comparison is deep: one changed character five levels down
    // (request > descriptor > jobs[1] > triggers[2] > filter) must fail it.
    let files = read_vectors(&vectors_dir());
    let bytes = &files["register_request_full"];
    let decoded = pb::RegisterRequest::decode(bytes.as_slice()).unwrap();
    let mut wrong = decoded.clone();
    let trigger = &mut wrong.descriptor.as_mut().unwrap().jobs[1].triggers[2];
    assert_eq!(trigger.filter, r#"{"region": "eu"}"#);
    trigger.filter = s(r#"{"region": "us"}"#);
    assert_ne!(decoded, wrong);
    assert_ne!(wrong.encode_to_vec(), *bytes);
    let case = exact("register_request_full", wrong);
    assert!((case.check)(bytes).is_err());
    // And an absent optional status is not a status of zero.
    let zero = common::CallError::decode(files["call_error_status_zero"].as_slice()).unwrap();
    assert_eq!(zero.status, Some(0));
    let absent = common::CallError::decode(files["call_error_status_absent"].as_slice()).unwrap();
    assert_eq!(absent.status, None);
}

#[test]
fn make_vectors_reproduces_the_committed_vectors() {
    let out = std::env::temp_dir().join(format!("abi-golden-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let script = workspace_root().join("tests/golden/make_vectors.py");
    let result = Command::new(python())
        .arg(&script)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("cannot run the venv Python (run ./scripts/setup.sh)");
    let made = read_vectors(&out);
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        result.status.success(),
        "make_vectors.py failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    let committed = read_vectors(&vectors_dir());
    assert_eq!(
        made.keys().collect::<Vec<_>>(),
        committed.keys().collect::<Vec<_>>(),
        "make_vectors.py and tests/golden/vectors list different vectors"
    );
    for (name, bytes) in &made {
        assert_eq!(
            hex::encode(bytes),
            hex::encode(&committed[name]),
            "{name}: make_vectors.py writes other bytes than the committed file \
             (re-run it and commit the vectors)"
        );
    }
}
