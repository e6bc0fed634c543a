//! Register validation: every rule, its exact message, and which rule wins.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;

const IDENTITY: &str = "INVALID_ARGUMENT: Invalid module or instance identity";
const ROLLOUT_ID: &str = "INVALID_ARGUMENT: Invalid rollout id";
const ROLLOUT_MODULES: &str = "INVALID_ARGUMENT: Invalid rollout modules";
const TOKEN: &str = "INVALID_ARGUMENT: Lease token must contain 32 to 256 characters";
const CONTRACT: &str = "INVALID_ARGUMENT: Invalid contract or package version";
const TOO_MANY_DEPS_OR_AGENTS: &str = "INVALID_ARGUMENT: Too many dependencies or agents";
const DUPLICATE_DEPS: &str = "INVALID_ARGUMENT: Duplicate dependencies";
const DEPENDENCY: &str = "INVALID_ARGUMENT: Invalid dependency";
const DUPLICATE_AGENTS: &str = "INVALID_ARGUMENT: Duplicate agents";
const AGENT: &str = "INVALID_ARGUMENT: Invalid agent descriptor";
const JOBS: &str = "INVALID_ARGUMENT: Too many or duplicate jobs";
const JOB: &str = "INVALID_ARGUMENT: Invalid job descriptor";
const MODELS: &str = "INVALID_ARGUMENT: Too many or duplicate models";
const MODEL: &str = "INVALID_ARGUMENT: Invalid model descriptor";
const APPS: &str = "INVALID_ARGUMENT: Too many or duplicate apps";
const APP: &str = "INVALID_ARGUMENT: Invalid app descriptor";
const OK: &str = "";

type Edit = Box<dyn Fn(&mut pb::RegisterRequest)>;

/// Registers `registration("m", "i")` after `edit` on an empty registry and
/// checks the answer: `OK`, or the exact "CODE: message".
#[track_caller]
fn check(cases: Vec<(&str, Edit, &str)>) {
    for (label, edit, expected) in cases {
        let mut req = registration("m", "i", &[]);
        edit(&mut req);
        let mut reg = Registry::new();
        let result = reg.register(&req);
        match (result, expected) {
            (Ok(_), OK) => assert_eq!(reg.listed(), ["i"], "{label}"),
            (Ok(_), _) => panic!("{label}: expected {expected:?}, registered"),
            (Err(err), _) => {
                assert_eq!(err.to_string(), expected, "{label}");
                assert!(reg.state.records.is_empty(), "{label}");
            }
        }
    }
}

fn edit(f: impl Fn(&mut pb::RegisterRequest) + 'static) -> Edit {
    Box::new(f)
}

fn d(req: &mut pb::RegisterRequest) -> &mut pb::ModuleDescriptor {
    descriptor(req)
}

/// A JSON object of exactly `bytes` bytes.
fn json_of(bytes: usize) -> String {
    format!("{{\"d\":\"{}\"}}", "x".repeat(bytes - 8))
}

fn dep(module_id: &str, contract_major: u32) -> pb::Dependency {
    pb::Dependency {
        module_id: module_id.to_owned(),
        contract_major,
    }
}

#[test]
fn identities_are_names_and_instance_ids_are_one_subject_token() {
    check(vec![
        ("plain", edit(|_| {}), OK),
        ("bad.*", edit(|r| d(r).module_id = "bad.*".into()), IDENTITY),
        ("empty module", edit(|r| d(r).module_id.clear()), IDENTITY),
        (
            "leading dot",
            edit(|r| d(r).module_id = ".m".into()),
            IDENTITY,
        ),
        ("no descriptor", edit(|r| r.descriptor = None), IDENTITY),
        (
            "256-character module",
            edit(|r| d(r).module_id = "m".repeat(256)),
            OK,
        ),
        (
            "257-character module",
            edit(|r| d(r).module_id = "m".repeat(257)),
            IDENTITY,
        ),
        (
            "dotted module",
            edit(|r| d(r).module_id = "acme.c:x-y_z".into()),
            OK,
        ),
        (
            "129-character id",
            edit(|r| r.instance_id = "i".repeat(129)),
            IDENTITY,
        ),
    ]);
    // The longest id registers under another id than "i": checked apart.
    let mut reg = Registry::new();
    reg.register(&registration("m", &"i".repeat(128), &[]))
        .unwrap();

    for id in ["victim.x", "a.b.c", "*", ">", "x y", "", "a/b", "é"] {
        let mut reg = Registry::new();
        assert_refused(reg.register(&registration("acme.c", id, &[])), IDENTITY);
    }
}

#[test]
fn rollout_ids_and_rollout_modules() {
    check(vec![
        (
            "not valid",
            edit(|r| r.rollout_id = "not valid".into()),
            ROLLOUT_ID,
        ),
        (
            "129 characters",
            edit(|r| r.rollout_id = "r".repeat(129)),
            ROLLOUT_ID,
        ),
        (
            "128 characters",
            edit(|r| r.rollout_id = "r".repeat(128)),
            OK,
        ),
        (
            "modules without a rollout",
            edit(|r| r.rollout_modules = vec!["m".into()]),
            ROLLOUT_MODULES,
        ),
        (
            "repeated module",
            edit(|r| {
                r.rollout_id = "r1".into();
                r.rollout_modules = vec!["m".into(), "m".into()];
            }),
            ROLLOUT_MODULES,
        ),
        (
            "own module missing",
            edit(|r| {
                r.rollout_id = "r1".into();
                r.rollout_modules = vec!["x".into()];
            }),
            ROLLOUT_MODULES,
        ),
        (
            "bad module name",
            edit(|r| {
                r.rollout_id = "r1".into();
                r.rollout_modules = vec!["m".into(), "bad name".into()];
            }),
            ROLLOUT_MODULES,
        ),
        (
            "64 modules",
            edit(|r| {
                r.rollout_id = "r1".into();
                r.rollout_modules = (0..63).map(|i| format!("x{i}")).collect();
                r.rollout_modules.push("m".into());
            }),
            OK,
        ),
        (
            "65 modules",
            edit(|r| {
                r.rollout_id = "r1".into();
                r.rollout_modules = (0..64).map(|i| format!("x{i}")).collect();
                r.rollout_modules.push("m".into());
            }),
            ROLLOUT_MODULES,
        ),
        ("rollout alone", edit(|r| r.rollout_id = "r1".into()), OK),
    ]);
}

#[test]
fn lease_tokens_count_characters_not_bytes() {
    check(vec![
        ("31", edit(|r| r.lease_token = "t".repeat(31)), TOKEN),
        ("32", edit(|r| r.lease_token = "t".repeat(32)), OK),
        ("256", edit(|r| r.lease_token = "t".repeat(256)), OK),
        ("257", edit(|r| r.lease_token = "t".repeat(257)), TOKEN),
        ("32 two-byte", edit(|r| r.lease_token = "é".repeat(32)), OK),
        (
            "31 two-byte",
            edit(|r| r.lease_token = "é".repeat(31)),
            TOKEN,
        ),
        (
            "200 two-byte",
            edit(|r| r.lease_token = "é".repeat(200)),
            OK,
        ),
    ]);
}

#[test]
fn contracts_dependencies_and_agents() {
    check(vec![
        ("contract 0", edit(|r| d(r).contract_major = 0), CONTRACT),
        (
            "128-character version",
            edit(|r| d(r).package_version = "é".repeat(128)),
            OK,
        ),
        (
            "129-character version",
            edit(|r| d(r).package_version = "v".repeat(129)),
            CONTRACT,
        ),
        (
            "64 dependencies",
            edit(|r| d(r).dependencies = (0..64).map(|i| dep(&format!("d{i}"), 1)).collect()),
            OK,
        ),
        (
            "65 dependencies",
            edit(|r| d(r).dependencies = (0..65).map(|i| dep(&format!("d{i}"), 1)).collect()),
            TOO_MANY_DEPS_OR_AGENTS,
        ),
        (
            "129 agents",
            edit(|r| {
                for i in 0..129 {
                    *r = with_agent(r.clone(), &format!("agent{i}"));
                }
            }),
            TOO_MANY_DEPS_OR_AGENTS,
        ),
        (
            "duplicate dependency",
            edit(|r| d(r).dependencies = vec![dep("x", 1), dep("x", 1)]),
            DUPLICATE_DEPS,
        ),
        (
            "one module at two majors",
            edit(|r| d(r).dependencies = vec![dep("x", 1), dep("x", 2)]),
            OK,
        ),
        (
            "dependency at contract 0",
            edit(|r| d(r).dependencies = vec![dep("x", 0)]),
            DEPENDENCY,
        ),
        (
            "badly named dependency",
            edit(|r| d(r).dependencies = vec![dep("x y", 1)]),
            DEPENDENCY,
        ),
        (
            "duplicate agents",
            edit(|r| *r = with_agent(with_agent(r.clone(), "A"), "A")),
            DUPLICATE_AGENTS,
        ),
        (
            "agent name",
            edit(|r| *r = with_agent(r.clone(), "bad name")),
            AGENT,
        ),
        (
            "agent contract",
            edit(|r| {
                *r = with_agent(r.clone(), "A");
                d(r).agents[0].contract_major = 0;
            }),
            AGENT,
        ),
        (
            "agent description 4096",
            edit(|r| {
                *r = with_agent(r.clone(), "A");
                d(r).agents[0].description = "é".repeat(4096);
            }),
            OK,
        ),
        (
            "agent description 4097",
            edit(|r| {
                *r = with_agent(r.clone(), "A");
                d(r).agents[0].description = "d".repeat(4097);
            }),
            AGENT,
        ),
        (
            "33 capabilities",
            edit(|r| {
                *r = with_agent(r.clone(), "A");
                d(r).agents[0].capabilities = (0..33).map(|i| format!("c{i}")).collect();
            }),
            AGENT,
        ),
        (
            "bad capability",
            edit(|r| {
                *r = with_agent(r.clone(), "A");
                d(r).agents[0].capabilities.push("not a name".into());
            }),
            AGENT,
        ),
    ]);
}

#[test]
fn job_descriptors_are_validated() {
    fn with(f: impl Fn(&mut pb::JobDescriptor) + 'static) -> Edit {
        edit(move |r| {
            let mut job = ingest();
            f(&mut job);
            d(r).jobs.push(job);
        })
    }
    check(vec![
        (
            "two jobs",
            edit(|r| d(r).jobs = vec![ingest(), job("summary", "every", "1h")]),
            OK,
        ),
        (
            "duplicate",
            edit(|r| d(r).jobs = vec![ingest(), ingest()]),
            JOBS,
        ),
        (
            "129 jobs",
            edit(|r| {
                d(r).jobs = (0..129)
                    .map(|i| job(&format!("j{i}"), "every", "1h"))
                    .collect()
            }),
            JOBS,
        ),
        ("bad name", with(|j| j.name = "bad name".into()), JOB),
        ("contract 0", with(|j| j.contract_major = 0), JOB),
        (
            "weekly",
            with(|j| j.triggers[0].kind = "weekly".into()),
            JOB,
        ),
        ("event", with(|j| j.triggers[0].kind = "event".into()), OK),
        ("empty spec", with(|j| j.triggers[0].spec.clear()), JOB),
        (
            "spec 256",
            with(|j| j.triggers[0].spec = "s".repeat(256)),
            OK,
        ),
        (
            "spec 257",
            with(|j| j.triggers[0].spec = "s".repeat(257)),
            JOB,
        ),
        (
            "zone 64",
            with(|j| j.triggers[0].time_zone = "z".repeat(64)),
            OK,
        ),
        (
            "zone 65",
            with(|j| j.triggers[0].time_zone = "z".repeat(65)),
            JOB,
        ),
        ("no triggers", with(|j| j.triggers.clear()), OK),
        (
            "17 triggers",
            with(|j| j.triggers = vec![j.triggers[0].clone(); 17]),
            JOB,
        ),
        ("concurrency 0", with(|j| j.max_concurrency = 0), JOB),
        ("concurrency 64", with(|j| j.max_concurrency = 64), OK),
        ("concurrency 65", with(|j| j.max_concurrency = 65), JOB),
        ("attempts 0", with(|j| j.max_attempts = 0), JOB),
        ("attempts 100", with(|j| j.max_attempts = 100), OK),
        ("attempts 101", with(|j| j.max_attempts = 101), JOB),
        ("timeout 0", with(|j| j.timeout_seconds = 0.0), OK),
        ("timeout 30.5", with(|j| j.timeout_seconds = 30.5), OK),
        ("negative timeout", with(|j| j.timeout_seconds = -1.0), JOB),
        ("NaN timeout", with(|j| j.timeout_seconds = f64::NAN), JOB),
        (
            "infinite timeout",
            with(|j| j.timeout_seconds = f64::INFINITY),
            JOB,
        ),
        (
            "description 4096",
            with(|j| j.description = "é".repeat(4096)),
            OK,
        ),
        (
            "description 4097",
            with(|j| j.description = "d".repeat(4097)),
            JOB,
        ),
    ]);
}

#[test]
fn workflow_descriptors_are_validated() {
    let schema = r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#;
    let flow = move |j: &mut pb::JobDescriptor| {
        j.name = "report".into();
        j.kind = "workflow".into();
        j.input_schema = schema.into();
        j.output_schema = schema.into();
        j.triggers[0].input = r#"{"filter": "db"}"#.into();
    };
    fn with(
        base: impl Fn(&mut pb::JobDescriptor) + 'static,
        f: impl Fn(&mut pb::JobDescriptor) + 'static,
    ) -> Edit {
        edit(move |r| {
            let mut job = ingest();
            base(&mut job);
            f(&mut job);
            d(r).jobs.push(job);
            d(r).jobs.push(job_plain());
        })
    }
    fn job_plain() -> pb::JobDescriptor {
        job("plain", "cron", "0 0 6 * * *")
    }
    check(vec![
        ("workflow", with(flow, |_| {}), OK),
        ("kind job", with(flow, |j| j.kind = "job".into()), OK),
        (
            "written before workflows",
            with(flow, |j| j.kind.clear()),
            OK,
        ),
        ("saga", with(flow, |j| j.kind = "saga".into()), JOB),
        (
            "not json",
            with(flow, |j| j.input_schema = "not json".into()),
            JOB,
        ),
        (
            "array",
            with(flow, |j| j.input_schema = "[1, 2]".into()),
            JOB,
        ),
        (
            "string",
            with(flow, |j| j.output_schema = "\"s\"".into()),
            JOB,
        ),
        (
            "schema of 16 KiB",
            with(flow, |j| j.output_schema = json_of(16 * 1024)),
            OK,
        ),
        (
            "oversized output",
            with(flow, |j| j.output_schema = json_of(16 * 1024 + 1)),
            JOB,
        ),
        (
            "oversized input",
            with(flow, |j| j.input_schema = json_of(16 * 1024 + 1)),
            JOB,
        ),
        (
            "input of 4 KiB",
            with(flow, |j| j.triggers[0].input = json_of(4096)),
            OK,
        ),
        (
            "input too big",
            with(flow, |j| {
                j.triggers[0].input = format!("{{\"x\": \"{}\"}}", "y".repeat(5000));
            }),
            JOB,
        ),
        (
            "input an array",
            with(flow, |j| j.triggers[0].input = "[1]".into()),
            JOB,
        ),
        // Python's json module reads these literals; the reference accepts them.
        (
            "NaN literal",
            with(flow, |j| {
                j.input_schema = r#"{"min": NaN, "max": Infinity}"#.into()
            }),
            OK,
        ),
        (
            "trailing comma",
            with(flow, |j| j.input_schema = r#"{"a": 1,}"#.into()),
            JOB,
        ),
        // The event filter is not checked by the registry.
        (
            "filter",
            with(flow, |j| j.triggers[0].filter = "not json".into()),
            OK,
        ),
    ]);
}

#[test]
fn a_job_descriptor_is_bounded_as_a_whole() {
    // Every field is within its own bound, but the encoded job is over 64 KiB.
    let big = edit(|r| {
        let mut job = ingest();
        job.description = "𝄞".repeat(4096);
        job.input_schema = json_of(16 * 1024);
        job.output_schema = json_of(16 * 1024);
        job.triggers = vec![
            pb::JobTrigger {
                kind: "every".into(),
                spec: "1h".into(),
                input: json_of(4096),
                ..Default::default()
            };
            4
        ];
        d(r).jobs.push(job);
    });
    check(vec![("over 64 KiB", big, JOB)]);
}

#[test]
fn models_are_chat_models_with_unique_names() {
    check(vec![
        ("writer", edit(|r| *r = with_model(r.clone(), "writer")), OK),
        (
            "duplicate",
            edit(|r| *r = with_model(with_model(r.clone(), "w"), "w")),
            MODELS,
        ),
        (
            "129 models",
            edit(|r| {
                for i in 0..129 {
                    *r = with_model(r.clone(), &format!("w{i}"));
                }
            }),
            MODELS,
        ),
        (
            "not chat",
            edit(|r| {
                *r = with_model(r.clone(), "w");
                d(r).models[0].kind = "embedding".into();
            }),
            MODEL,
        ),
        (
            "bad name",
            edit(|r| *r = with_model(r.clone(), "a b")),
            MODEL,
        ),
        (
            "description 4097",
            edit(|r| {
                *r = with_model(r.clone(), "w");
                d(r).models[0].description = "d".repeat(4097);
            }),
            MODEL,
        ),
    ]);
}

#[test]
fn invalid_apps_are_refused() {
    fn with(f: impl Fn(&mut pb::AppDescriptor) + 'static) -> Edit {
        edit(move |r| {
            let mut console = app("console");
            f(&mut console);
            d(r).apps.push(console);
        })
    }
    check(vec![
        ("console", with(|_| {}), OK),
        ("dotted name", with(|a| a.name = "a.b".into()), APP),
        ("slash", with(|a| a.name = "a/b".into()), APP),
        ("empty name", with(|a| a.name.clear()), APP),
        ("65-character name", with(|a| a.name = "a".repeat(65)), APP),
        (
            "parent entry",
            with(|a| a.entry = "../secret.html".into()),
            APP,
        ),
        (
            "absolute entry",
            with(|a| a.entry = "/index.html".into()),
            APP,
        ),
        (
            "backslash entry",
            with(|a| a.entry = "a\\b.html".into()),
            APP,
        ),
        (
            "nested entry",
            with(|a| a.entry = "pages/index.html".into()),
            OK,
        ),
        (
            "dotted entry",
            with(|a| a.entry = "a/..b/c.html".into()),
            OK,
        ),
        ("title 257", with(|a| a.title = "t".repeat(257)), APP),
        (
            "description 4097",
            with(|a| a.description = "d".repeat(4097)),
            APP,
        ),
        ("category 65", with(|a| a.category = "c".repeat(65)), APP),
        ("icon 16", with(|a| a.icon_emoji = "🙂".repeat(16)), OK),
        ("icon 17", with(|a| a.icon_emoji = "🙂".repeat(17)), APP),
        ("contract 0", with(|a| a.contract_major = 0), APP),
        // Each field within bounds, the encoded app over 4 KiB.
        (
            "encoded over 4 KiB",
            with(|a| {
                a.title = "t".repeat(256);
                a.description = "d".repeat(4000);
            }),
            APP,
        ),
    ]);
}

#[test]
fn apps_are_bounded_and_unique() {
    check(vec![
        (
            "duplicate",
            edit(|r| *r = with_app(with_app(r.clone(), app("console")), app("console"))),
            APPS,
        ),
        (
            "17 apps",
            edit(|r| {
                for i in 0..17 {
                    *r = with_app(r.clone(), app(&format!("app{i}")));
                }
            }),
            APPS,
        ),
        (
            "16 apps",
            edit(|r| {
                for i in 0..16 {
                    let mut page = app(&format!("app{i}"));
                    page.entry = "pages/index.html".into();
                    *r = with_app(r.clone(), page);
                }
            }),
            OK,
        ),
    ]);
}

#[test]
fn the_first_broken_rule_names_the_error() {
    check(vec![
        (
            "identity before token",
            edit(|r| {
                d(r).module_id = "bad.*".into();
                r.lease_token.clear();
            }),
            IDENTITY,
        ),
        (
            "rollout id before modules",
            edit(|r| {
                r.rollout_id = "bad id".into();
                r.rollout_modules = vec!["x".into()];
            }),
            ROLLOUT_ID,
        ),
        (
            "modules before token",
            edit(|r| {
                r.rollout_modules = vec!["m".into()];
                r.lease_token.clear();
            }),
            ROLLOUT_MODULES,
        ),
        (
            "token before contract",
            edit(|r| {
                r.lease_token.clear();
                d(r).contract_major = 0;
            }),
            TOKEN,
        ),
        (
            "agents before jobs",
            edit(|r| {
                *r = with_agent(with_agent(r.clone(), "A"), "A");
                d(r).jobs = vec![ingest(), ingest()];
            }),
            DUPLICATE_AGENTS,
        ),
        (
            "jobs before models",
            edit(|r| {
                d(r).jobs = vec![job("j", "weekly", "x")];
                *r = with_model(r.clone(), "bad name");
            }),
            JOB,
        ),
        (
            "models before apps",
            edit(|r| {
                *r = with_model(r.clone(), "bad name");
                *r = with_app(r.clone(), app("a.b"));
            }),
            MODEL,
        ),
    ]);
}

#[test]
fn replicas_must_declare_identical_jobs_and_apps() {
    let mut reg = Registry::new();
    reg.register(&with_jobs(registration("m", "i1", &[]), [ingest()]))
        .unwrap();
    assert_refused(
        reg.register(&with_jobs(
            registration("m", "i2", &[]),
            [job("ingest", "cron", "0 0 7 * * *")],
        )),
        "DESCRIPTOR_CONFLICT: Replicas of a contract in one rollout must declare identical dependencies, agents, jobs, models and apps",
    );
    // Another contract major is another contract: it may differ.
    reg.register(&at_contract(registration("m", "i3", &[]), 2))
        .unwrap();

    let mut reg = Registry::new();
    reg.register(&with_app(registration("m", "one", &[]), app("console")))
        .unwrap();
    let mut titled = app("console");
    titled.title = "Different".into();
    assert_refused(
        reg.register(&with_app(registration("m", "two", &[]), titled)),
        "DESCRIPTOR_CONFLICT: Replicas of a contract in one rollout must declare identical dependencies, agents, jobs, models and apps",
    );
    // The package version is not part of what replicas must share.
    let mut newer = with_app(registration("m", "three", &[]), app("console"));
    descriptor(&mut newer).package_version = "1.0.1".into();
    reg.register(&newer).unwrap();
}

#[test]
fn a_refused_registration_leaves_the_others_of_its_batch_in_place() {
    // The writer applies a batch one mutation at a time; a refused one must
    // leave the snapshot exactly as the previous one left it.
    let mut reg = Registry::new();
    let mut answers = Vec::new();
    for (module, id) in [("a", "a"), ("b", "b"), ("bad.*", "bad"), ("c", "c")] {
        let before = reg.bytes();
        let answer = reg.register(&registration(module, id, &[]));
        if answer.is_err() {
            assert_eq!(reg.bytes(), before);
        }
        answers.push(answer.map(|r| r.instance.unwrap().instance_id));
    }
    assert_eq!(answers[0].as_deref(), Ok("a"));
    assert_eq!(answers[1].as_deref(), Ok("b"));
    assert_eq!(answers[2].as_ref().unwrap_err().to_string(), IDENTITY);
    assert_eq!(answers[3].as_deref(), Ok("c"));
    assert_eq!(reg.listed(), ["a", "b", "c"]);

    // Twenty modules registered back to back are all listed.
    let mut reg = Registry::new();
    for i in 0..20 {
        reg.register(&registration(&format!("m{i}"), &format!("i{i}"), &[]))
            .unwrap();
    }
    assert_eq!(reg.list(100, "").unwrap().instances.len(), 20);
}

#[test]
fn schemas_are_read_the_way_pythons_json_module_reads_them() {
    fn schema(text: String) -> Edit {
        edit(move |r| {
            let mut job = ingest();
            job.input_schema = text.clone();
            d(r).jobs.push(job);
        })
    }
    let nested = |depth: usize| format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    check(vec![
        ("empty means none", schema(String::new()), OK),
        ("whitespace around", schema(" \t\n{}\r\n".into()), OK),
        ("only whitespace", schema("  ".into()), JOB),
        (
            "Python literals",
            schema(r#"{"a": NaN, "b": Infinity, "c": -Infinity}"#.into()),
            OK,
        ),
        ("negative NaN", schema(r#"{"a": -NaN}"#.into()), JOB),
        (
            "lone surrogate escape",
            schema(r#"{"a": "\ud800"}"#.into()),
            OK,
        ),
        ("bad escape", schema(r#"{"a": "\x"}"#.into()), JOB),
        (
            "raw control character",
            schema("{\"a\": \"\u{1}\"}".into()),
            JOB,
        ),
        ("raw DEL", schema("{\"a\": \"\u{7f}\"}".into()), OK),
        ("byte order mark", schema("\u{feff}{}".into()), JOB),
        ("duplicate keys", schema(r#"{"a": 1, "a": 2}"#.into()), OK),
        ("leading zero", schema(r#"{"a": 01}"#.into()), JOB),
        ("bare key", schema("{a: 1}".into()), JOB),
        ("single quotes", schema("{'a': 1}".into()), JOB),
        ("two documents", schema("{} {}".into()), JOB),
        (
            "4300-digit integer",
            schema(format!("{{\"a\": {}}}", "9".repeat(4300))),
            OK,
        ),
        // Python refuses to convert integers of more than 4300 digits.
        (
            "4301-digit integer",
            schema(format!("{{\"a\": -{}}}", "9".repeat(4301))),
            JOB,
        ),
        (
            "4301-digit float",
            schema(format!("{{\"a\": {}.5}}", "9".repeat(4301))),
            OK,
        ),
        ("nested 900 deep", schema(nested(900)), OK),
    ]);
}
