//! `scripts/setup.sh` and `scripts/test.sh` on a machine that lacks what
//! they need: each names the missing piece and the one command that brings
//! it, and exits 1 before doing anything. The scripts run from a copy in a
//! temp dir (no `.venv` there), with stand-ins first on `PATH`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

/// A copy of `scripts/<script>` in `dir/scripts`, and `dir/bin` with the
/// stand-ins (`name`, shell body) first on its PATH.
fn run_copy(dir: &Path, script: &str, stand_ins: &[(&str, &str)]) -> (Option<i32>, String) {
    let scripts = dir.join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::copy(
        abi_test_support::workspace_root()
            .join("scripts")
            .join(script),
        scripts.join(script),
    )
    .unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, body) in stand_ins {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(scripts.join(script))
        .env("PATH", path)
        // The browser check of setup.sh is not what these tests are about.
        .env("ABI_SETUP_BROWSER", "0")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn setup_names_a_python_without_venv_and_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    // A python3 whose `import venv, ensurepip` fails, as Debian's without python3-venv.
    let python = r#"case "$*" in *ensurepip*) exit 1 ;; *) exit 0 ;; esac"#;
    let (code, stderr) = run_copy(dir.path(), "setup.sh", &[("python3", python)]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot create a venv") && stderr.contains("apt-get install python3-venv"),
        "{stderr}"
    );
    assert!(!dir.path().join(".venv").exists(), "nothing was made");
}

#[test]
fn test_names_a_missing_rustfmt_and_its_fix() {
    let dir = tempfile::tempdir().unwrap();
    let cargo = r#"[ "$1" = fmt ] && exit 101; exit 0"#;
    let (code, stderr) = run_copy(dir.path(), "test.sh", &[("cargo", cargo)]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("rustup component add rustfmt"), "{stderr}");
}
