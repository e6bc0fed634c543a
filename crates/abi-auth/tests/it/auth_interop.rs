//! Tokens against the Python reference (`naas_abi_core.engine.nats_auth`), run with the
//! venv's Python: what it mints we verify, what we mint it verifies, and both sides
//! produce the same bytes for the same inputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abi_auth::{
    AuthError, DEFAULT_TTL, InvalidToken, issue_module_token, issue_service_token, module_key,
    verify,
};
use abi_test_support::{python, workspace_root};
use serde_json::{Value, json};

const SECRET: &str = "interop-secret-0123456789-abcdefghijklmnopqrstuvwxyz";

/// Runs tests/interop/tokens.py with one JSON request and returns its JSON answer.
fn reference(request: &Value) -> Value {
    let mut child = Command::new(python())
        .arg(workspace_root().join("tests/interop/tokens.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the reference's Python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "tokens.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn invalid(result: Result<String, AuthError>) -> InvalidToken {
    match result {
        Err(AuthError::Invalid(reason)) => reason,
        other => panic!("expected an invalid token, got {other:?}"),
    }
}

#[test]
fn we_verify_what_the_reference_mints() {
    let minted = reference(&json!({"op": "mint", "secret": SECRET, "now": now_secs()}));
    let tok = |name: &str| minted[name].as_str().unwrap().to_owned();

    assert_eq!(tok("billing_key"), module_key(SECRET, "billing").unwrap());
    assert_eq!(verify(&tok("service"), SECRET, None).unwrap(), "api");
    assert_eq!(
        verify(&tok("service_aud"), SECRET, Some("inst-1")).unwrap(),
        "engine"
    );
    assert_eq!(
        invalid(verify(&tok("service_aud"), SECRET, None)),
        InvalidToken::Audience
    );
    assert_eq!(
        invalid(verify(&tok("service_aud"), SECRET, Some("inst-2"))),
        InvalidToken::Audience
    );
    assert_eq!(verify(&tok("module"), SECRET, None).unwrap(), "billing");
    assert_eq!(
        verify(&tok("module_aud"), SECRET, Some("inst-1")).unwrap(),
        "billing"
    );
    assert_eq!(
        invalid(verify(&tok("module"), SECRET, Some("inst-1"))),
        InvalidToken::Audience
    );
    assert_eq!(
        invalid(verify(&tok("expired"), SECRET, None)),
        InvalidToken::Expired
    );
    assert_eq!(
        invalid(verify(&tok("wrong_key"), SECRET, None)),
        InvalidToken::BadSignature
    );
    assert_eq!(
        invalid(verify(&tok("module_api"), SECRET, None)),
        InvalidToken::FirstPartyModuleToken
    );
}

#[test]
fn the_reference_verifies_what_we_mint() {
    let now = SystemTime::now();
    let key = module_key(SECRET, "billing").unwrap();
    let hour = Duration::from_secs(3600);
    let cases = [
        // (token, audience, expected identity or None for a refusal)
        (
            issue_service_token("api", SECRET, DEFAULT_TTL, now, None).unwrap(),
            None,
            Some("api"),
        ),
        (
            issue_service_token("engine", SECRET, DEFAULT_TTL, now, Some("inst-1")).unwrap(),
            Some("inst-1"),
            Some("engine"),
        ),
        (
            issue_service_token("engine", SECRET, DEFAULT_TTL, now, Some("inst-1")).unwrap(),
            None,
            None,
        ),
        (
            issue_module_token("billing", &key, DEFAULT_TTL, now, None).unwrap(),
            None,
            Some("billing"),
        ),
        (
            issue_module_token("billing", &key, DEFAULT_TTL, now, Some("inst-9")).unwrap(),
            Some("inst-9"),
            Some("billing"),
        ),
        (
            issue_module_token("billing", &key, DEFAULT_TTL, now, Some("inst-9")).unwrap(),
            Some("inst-1"),
            None,
        ),
        (
            issue_service_token("api", SECRET, hour, now - 2 * hour, None).unwrap(),
            None,
            None,
        ),
        (
            issue_service_token("api", "not-the-secret", DEFAULT_TTL, now, None).unwrap(),
            None,
            None,
        ),
        // A module key used to assert another identity.
        (
            issue_module_token("shipping", &key, DEFAULT_TTL, now, None).unwrap(),
            None,
            None,
        ),
        // A module token asserting a first-party identity, signed with the real secret.
        (
            issue_module_token("api", SECRET, DEFAULT_TTL, now, None).unwrap(),
            None,
            None,
        ),
    ];
    let request = json!({
        "op": "verify",
        "secret": SECRET,
        "cases": cases.iter().map(|(t, a, _)| json!({"token": t, "audience": a})).collect::<Vec<_>>(),
    });
    let answers = reference(&request);
    let answers = answers.as_array().unwrap();
    assert_eq!(answers.len(), cases.len());
    for (i, ((token, audience, expected), answer)) in cases.iter().zip(answers).enumerate() {
        match expected {
            Some(identity) => assert_eq!(answer["ok"], json!(identity), "case {i}: {answer}"),
            None => assert!(answer.get("err").is_some(), "case {i}: {answer}"),
        }
        // And we agree with the reference on every case.
        let ours = verify(token, SECRET, *audience).ok();
        assert_eq!(ours.as_deref(), answer["ok"].as_str(), "case {i}");
    }
}

#[test]
fn same_inputs_give_the_same_bytes() {
    let key = module_key(SECRET, "billing").unwrap();
    let now = 1_700_000_123_u64;
    for (identity, sign_key, module, ttl, audience) in [
        ("api", SECRET, false, 3600_u64, None),
        ("dagster", SECRET, false, 300, Some("inst-1")),
        ("billing", key.as_str(), true, 3600, None),
        ("billing", key.as_str(), true, 300, Some("inst-7")),
    ] {
        let theirs = reference(&json!({
            "op": "issue", "identity": identity, "key": sign_key, "module": module,
            "now": now, "ttl": ttl, "audience": audience,
        }));
        let at = UNIX_EPOCH + Duration::from_secs(now);
        let ttl = Duration::from_secs(ttl);
        let ours = if module {
            issue_module_token(identity, sign_key, ttl, at, audience).unwrap()
        } else {
            issue_service_token(identity, sign_key, ttl, at, audience).unwrap()
        };
        assert_eq!(json!(ours), theirs, "{identity} module={module}");
    }
}
