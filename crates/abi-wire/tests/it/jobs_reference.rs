//! Job names against the reference's own functions (`naas_abi_sdk.jobs`):
//! hashes, subjects, consumers, collections and idempotency ids for names
//! with dots, quotes, backslashes and non-ASCII characters.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use abi_wire::jobs::{self, JobSubjects};

fn python() -> PathBuf {
    std::env::var_os("ABI_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

const SCRIPT: &str = r#"
import json, sys
from naas_abi_sdk.jobs import job_subjects, runs_collection, stream_name, run_key, _hash
from naas_abi_sdk.workflows import steps_collection, results_collection
out = []
for project, module, job, key in json.loads(sys.stdin.read()):
    s = job_subjects(project, module, job)
    out.append([s.trigger, s.schedule(3), s.cancel, s.done, s.consumer, runs_collection(project),
                steps_collection(project), results_collection(project), stream_name(project),
                run_key(job, 42), _hash(s.trigger, key)])
print(json.dumps(out))
"#;

#[test]
fn job_names_match_the_reference_functions() {
    let cases = [
        ("default", "acme.billing", "ingest", "k1"),
        ("p-1", "mod_é", "job:with.dots", "clé \"quoted\" \\ back"),
        ("x", "📦", "nightly-report", ""),
        ("A_b", "a\"b", "j'ob", "日本"),
    ];
    let input = serde_json::to_string(&cases).unwrap();
    let mut child = Command::new(python())
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run the venv Python (./scripts/setup.sh)");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let expected: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
    for ((project, module, job, key), want) in cases.iter().zip(expected) {
        let s = JobSubjects::new(project, module, job);
        let ours = vec![
            s.trigger(),
            s.schedule(3),
            s.cancel(),
            s.done(),
            s.consumer(),
            jobs::runs_collection(project),
            jobs::workflow_steps_collection(project),
            jobs::workflow_results_collection(project),
            jobs::stream(project),
            jobs::run_id(job, 42),
            s.idempotency_id(key),
        ];
        assert_eq!(ours, want, "{project} {module} {job} {key}");
    }
}
