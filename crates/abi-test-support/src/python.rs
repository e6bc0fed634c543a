//! Finding the workspace and the Python that imports the reference.

use std::path::{Path, PathBuf};

/// The environment variable naming the Python executable to use.
pub const PYTHON_ENV: &str = "ABI_PYTHON";

/// The Python that imports the reference: `$ABI_PYTHON`, else
/// `<workspace>/.venv/bin/python`.
///
/// # Panics
///
/// When that file does not exist, with a message saying to run
/// `./scripts/setup.sh` (tests must fail, never skip, without the reference).
pub fn python() -> PathBuf {
    let path = std::env::var_os(PYTHON_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    assert!(
        path.exists(),
        "the reference's Python is missing at {}: run ./scripts/setup.sh from the workspace \
         root (or set {PYTHON_ENV})",
        path.display()
    );
    path
}

/// The workspace root: this crate lives in `<root>/crates/abi-test-support`.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}
