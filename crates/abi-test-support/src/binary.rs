//! Finding the `nats-server` executable.

use std::path::PathBuf;

use crate::python::workspace_root;

/// The environment variable naming the `nats-server` executable to use.
pub const NATS_SERVER_ENV: &str = "ABI_NATS_SERVER";

/// The `nats-server` executable: `$ABI_NATS_SERVER`, else the first on
/// `PATH`, else `<workspace>/.venv/bin/nats-server`.
///
/// # Panics
///
/// When none of these exists, with a message saying to run
/// `./scripts/setup.sh` (tests must fail, never skip, without a server).
pub fn nats_server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(NATS_SERVER_ENV) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "{NATS_SERVER_ENV}={} is not a file; unset it or run ./scripts/setup.sh",
            path.display()
        );
        return path;
    }
    if let Some(found) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nats-server"))
            .find(|candidate| candidate.is_file())
    }) {
        return found;
    }
    let venv = workspace_root().join(".venv/bin/nats-server");
    assert!(
        venv.is_file(),
        "nats-server not found (looked at ${NATS_SERVER_ENV}, PATH and {}): \
         run ./scripts/setup.sh from the workspace root",
        venv.display()
    );
    venv
}

/// The executable `bin` of workspace package `package`, beside the test's own
/// binary `beside` (the same profile directory), built only when missing.
///
/// A workspace test run (`cargo test --workspace --all-targets`) has built
/// every binary already, with the workspace's unified features; building it
/// again with one package's features would recompile much of the tree and
/// relink a file other tests may be running. A narrower run (`cargo test -p
/// <one crate>`) builds the missing one here.
///
/// # Panics
///
/// When the build fails or leaves no such file.
pub fn workspace_binary(beside: &std::path::Path, package: &str, bin: &str) -> PathBuf {
    let profile_dir = beside
        .parent()
        .expect("a test binary lives in a profile directory");
    let path = profile_dir.join(bin);
    if path.is_file() {
        return path;
    }
    let target_dir = profile_dir
        .parent()
        .expect("a profile directory lives in a target directory");
    let mut cmd =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.args(["build", "--quiet", "-p", package, "--bin", bin])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(workspace_root());
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build");
    assert!(
        status.success(),
        "cargo build -p {package} --bin {bin} failed"
    );
    assert!(path.is_file(), "{} was not built", path.display());
    path
}
