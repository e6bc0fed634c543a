//! Chat model names against the reference's own functions
//! (`naas_abi_sdk.model_host`, `naas_abi_sdk.model_codec`): the subject of a
//! few names, the limits, and the message types.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use abi_wire::models::{self, MessageType};

fn python() -> PathBuf {
    std::env::var_os("ABI_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"))
}

const SCRIPT: &str = r#"
import json, sys
from naas_abi_sdk import model_host
from naas_abi_sdk.model_codec import MESSAGE_TYPES
from naas_abi_sdk.concurrency import DEFAULT_LIMIT
cases = json.loads(sys.stdin.read())
print(json.dumps({
    "subjects": [model_host.model_subject(p, i, n) for p, i, n in cases],
    "limits": [model_host.MAX_REQUEST_BYTES, model_host.MAX_MESSAGES, model_host.MAX_TOOLS, DEFAULT_LIMIT],
    "types": sorted(MESSAGE_TYPES),
}))
"#;

#[test]
fn model_names_and_limits_match_the_reference() {
    let cases = [
        ("default", "i-1", "echo"),
        ("p-1", "AbC_9", "gpt-4o_mini"),
        ("x", "0123456789abcdef", "modèle"),
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
    assert!(
        out.status.success(),
        "the reference needs langchain-core in .venv"
    );
    let want: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let subjects: Vec<String> = cases
        .iter()
        .map(|(p, i, n)| models::chat_subject(p, i, n))
        .collect();
    assert_eq!(serde_json::json!(subjects), want["subjects"]);
    assert_eq!(
        serde_json::json!([
            models::MAX_REQUEST_BYTES,
            models::MAX_MESSAGES,
            models::MAX_TOOLS,
            models::DEFAULT_MAX_CONCURRENCY
        ]),
        want["limits"]
    );
    let mut ours: Vec<&str> = MessageType::ALL.iter().map(|t| t.as_str()).collect();
    ours.sort_unstable();
    assert_eq!(serde_json::json!(ours), want["types"]);
}
