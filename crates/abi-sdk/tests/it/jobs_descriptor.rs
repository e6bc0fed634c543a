//! Job declarations against the Python reference: the descriptors our
//! `JobSpec::to_descriptor` builds are byte for byte the ones
//! `JobDescriptor.to_pb()` builds, and `fired_at` is nats-py's text.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::Duration;

use abi_sdk::jobs::time::fired_at;
use abi_sdk::jobs::{JobSpec, Trigger};
use abi_test_support::{python, workspace_root};
use prost::Message as _;
use serde_json::json;

/// The jobs and workflows `tests/interop/job_descriptors.py` declares, in its order.
fn ours() -> Vec<JobSpec> {
    let nightly = JobSpec::new("nightly.report:v2")
        .unwrap()
        .description("Nightly — report")
        .trigger(
            Trigger::cron(
                "  0 0 2 * * *  ",
                "Europe/Paris",
                Some(&json!({"b": 1, "a": "é"})),
            )
            .unwrap(),
        )
        .unwrap()
        .trigger(Trigger::cron("@daily", "", None).unwrap())
        .unwrap()
        .trigger(Trigger::every("1h30m", None).unwrap())
        .unwrap()
        .trigger(
            Trigger::every_duration(
                Duration::from_secs(90),
                Some(&json!({"k": [1, 2.5, null, true]})),
            )
            .unwrap(),
        )
        .unwrap()
        .trigger(
            Trigger::on_event(
                "orders.created",
                Some(&json!({"status": ["paid", "open"], "amount": {"gt": 10}})),
            )
            .unwrap(),
        )
        .unwrap()
        .trigger(Trigger::on_event_type("https://ex.org/ontology#Invoice", None).unwrap())
        .unwrap()
        .max_concurrency(16)
        .unwrap()
        .timeout(Duration::from_secs_f64(90.5))
        .unwrap()
        .max_attempts(5)
        .unwrap()
        .input_schema(&json!({"type": "object", "properties": {"x": {"type": "integer"}}}))
        .unwrap()
        .output_schema(&json!({"type": "object"}))
        .unwrap();
    // Workflows: `declare_workflow` of a `dict -> dict` handler, and of an
    // untyped one with explicit schemas.
    let flow = JobSpec::new("flow")
        .unwrap()
        .description("Three steps")
        .as_workflow()
        .max_attempts(3)
        .unwrap()
        .output_schema(&json!({"type": "object"}))
        .unwrap();
    let typed = JobSpec::new("typed.flow")
        .unwrap()
        .as_workflow()
        .input_schema(&json!({"type": "object", "required": ["n"]}))
        .unwrap()
        .output_schema(&json!({"type": "integer"}))
        .unwrap()
        .max_concurrency(4)
        .unwrap()
        .trigger(Trigger::every("5m", None).unwrap())
        .unwrap();
    vec![JobSpec::new("ingest").unwrap(), nightly, flow, typed]
}

#[test]
fn descriptors_and_fired_at_match_the_reference_byte_for_byte() {
    let stamps: Vec<i128> = (0..2000)
        .map(|i: i128| 1_764_582_000_000_000_000 + i * 7_919_777_531 + (i % 7) * 500)
        .collect();
    let out = std::process::Command::new(python())
        .arg(workspace_root().join("tests/interop/job_descriptors.py"))
        .args(stamps.iter().map(ToString::to_string))
        .output()
        .expect("run the reference");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let descriptors: Vec<String> = ours()
        .iter()
        .map(|spec| {
            spec.validate().unwrap();
            hex(&spec.to_descriptor().encode_to_vec())
        })
        .collect();
    assert_eq!(json!(descriptors), theirs["descriptors"]);
    let fired: Vec<String> = stamps.iter().map(|ns| fired_at(*ns)).collect();
    assert_eq!(json!(fired), theirs["fired_at"]);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
