//! The Python reference reads every demo module's declaration: its
//! discovery client decodes each descriptor (jobs through
//! `JobDescriptor.from_pb`) as a `ModuleProxy` call would. A declaration it
//! refuses (a 5-field cron, say) would fail every Python caller of the module.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_examples::{consumer, provider};
use abi_sdk::ModuleSpec;
use abi_test_support::{python, workspace_root};
use prost::Message as _;

fn hex(spec: &ModuleSpec) -> String {
    spec.descriptor()
        .encode_to_vec()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs the reference's reader over `specs`: its output.
fn reference_reads(specs: &[&ModuleSpec]) -> std::process::Output {
    std::process::Command::new(python())
        .arg(workspace_root().join("tests/interop/read_module.py"))
        .args(specs.iter().map(|spec| hex(spec)))
        .output()
        .expect("run the reference")
}

/// Asserts the reference refuses `spec` with `message`.
fn reference_refuses(spec: &ModuleSpec, message: &str) {
    let out = reference_reads(&[spec]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the reference read it");
    assert!(stderr.contains(message), "{stderr}");
}

#[test]
fn the_reference_reads_every_demo_module() {
    let specs = [
        provider::spec("1.0.0"),
        provider::with_jobs(provider::spec("1.0.0")),
        consumer::spec(),
        consumer::with_jobs(consumer::spec()),
    ];
    for spec in &specs {
        spec.check_declarations().unwrap();
    }
    let out = reference_reads(&specs.iter().collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "the reference refused a demo module: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read[0]["jobs"], serde_json::json!(["nightly-report"]));
    assert_eq!(read[1]["jobs"].as_array().unwrap().len(), 5, "{read}");
    assert_eq!(read[3]["jobs"], serde_json::json!(["shout"]), "{read}");
}

#[test]
fn a_raw_descriptor_the_reference_refuses_is_refused_before_it_registers() {
    use abi_sdk::pb;
    let spec = ModuleSpec::new("acme.bad").job(pb::JobDescriptor {
        name: "nightly".into(),
        kind: "job".into(),
        max_concurrency: 1,
        max_attempts: 1,
        triggers: vec![pb::JobTrigger {
            kind: "cron".into(),
            spec: "0 2 * * *".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let err = spec.check_declarations().unwrap_err();
    assert!(err.contains("Cron needs 6 fields"), "{err}");
    let config = abi_sdk::Config::from_lookup("acme.bad", &|_| None).unwrap();
    let refused = config.validate_for(&spec).unwrap_err();
    assert_eq!(refused.kind(), abi_sdk::ConfigErrorKind::InvalidDeclaration);
    // The reference refuses the same bytes.
    reference_refuses(&spec, "Cron needs 6 fields");
}

#[test]
fn a_raw_app_descriptor_the_reference_refuses_is_refused_too() {
    use abi_sdk::pb;
    for (app, message) in [
        (
            pb::AppDescriptor {
                name: "my app".into(),
                ..Default::default()
            },
            "App name 'my app': 1 to 64 letters",
        ),
        (
            pb::AppDescriptor {
                name: "ui".into(),
                entry: "../secret.html".into(),
                ..Default::default()
            },
            "App ui: entry must be a relative path",
        ),
    ] {
        let spec = ModuleSpec::new("acme.apps").app(app);
        let err = spec.check_declarations().unwrap_err();
        assert!(err.contains(message), "{err}");
        reference_refuses(&spec, message);
    }
}
