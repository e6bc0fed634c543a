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
