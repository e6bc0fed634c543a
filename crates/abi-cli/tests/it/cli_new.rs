//! A module author's first hour, as the README's "Your first module" walks
//! it: `abictl new` writes a crate outside the workspace that depends on the
//! SDK by path (no `[patch]`, nothing else copied), it builds, and it runs
//! against a stack: READY, its job triggered and its agent invoked through
//! abictl, then SIGTERM drains it and it exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use abi_test_support::{wait_until, workspace_root};

use crate::common::{DEADLINE, SECRET, Stack, documents};

const MODULE: &str = "acme.first";

/// The target directory the tests were built in (so the new crate reuses
/// what the workspace built).
fn target_dir() -> PathBuf {
    let abictl = Path::new(env!("CARGO_BIN_EXE_abictl"));
    // <target>/<profile>/abictl
    abictl
        .parent()
        .and_then(Path::parent)
        .expect("abictl sits in <target>/<profile>")
        .to_path_buf()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_module_builds_outside_the_workspace_and_runs_against_a_stack() {
    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path().join("first");
    let stack = Stack::start().await;
    let made = stack
        .abictl()
        .run(&["new", MODULE, "--dir", krate.to_str().unwrap()])
        .await;
    assert_eq!(made.code, 0, "{made:#?}");
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("[patch"), "{manifest}");
    // A second run refuses to overwrite it; a bad module id is a usage error.
    let again = stack
        .abictl()
        .run(&["new", MODULE, "--dir", krate.to_str().unwrap()])
        .await;
    assert_eq!(again.code, 2, "{again:#?}");
    let bad = stack.abictl().run(&["new", "bad id!"]).await;
    assert_eq!(bad.code, 2, "{bad:#?}");

    // The workspace's lock pins the same versions (and lets it build offline).
    std::fs::copy(
        workspace_root().join("Cargo.lock"),
        krate.join("Cargo.lock"),
    )
    .unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let built = tokio::process::Command::new(cargo)
        .args(["build", "--offline", "--quiet"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", target_dir())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(
        built.status.success(),
        "the new module does not build: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    // The SDK's own NATS client is the patched one, by path.
    let tree = std::fs::read_to_string(krate.join("Cargo.lock")).unwrap();
    let async_nats = tree
        .split("[[package]]")
        .find(|p| p.contains("name = \"async-nats\""))
        .unwrap();
    assert!(
        !async_nats.contains("source ="),
        "from the registry: {async_nats}"
    );

    let docs = documents(&stack, dir.path()).await;
    let mut module = tokio::process::Command::new(target_dir().join("debug/acme-first"))
        .env_clear()
        .env("NATS_URL", stack.server.url())
        .env("ABI_PROJECT", &stack.project)
        .env(
            "ABI_MODULE_KEY",
            abi_auth::module_key(SECRET, MODULE).unwrap(),
        )
        .env("ABI_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let ready = stack.abictl().run(&["wait", MODULE, "--for", "60"]).await;
    assert_eq!(ready.code, 0, "{ready:#?}");

    let done = stack
        .abictl()
        .run(&[
            "trigger",
            MODULE,
            "hello",
            "--payload",
            r#"{"name": "you"}"#,
            "--wait",
            "60",
        ])
        .await
        .json();
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    assert_eq!(
        done["result"],
        serde_json::json!({"greeting": "hello, you"})
    );
    let invoked = stack
        .abictl()
        .run(&["invoke", MODULE, "echo", "hi", "there", "--no-stream"])
        .await;
    assert!(invoked.ok().contains("echo: hi there"), "{invoked:#?}");

    let pid = module.id().unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = tokio::time::timeout(DEADLINE, module.wait())
        .await
        .expect("the module stops within its budget")
        .unwrap();
    assert!(status.success(), "{status:?}");
    wait_until(DEADLINE, || async {
        stack
            .abictl()
            .run(&["wait", MODULE, "--gone", "--for", "1"])
            .await
            .code
            == 0
    })
    .await
    .expect("it unregistered");
    docs.cancel();
    stack.stop().await;
}
