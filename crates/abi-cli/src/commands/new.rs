//! `abictl new`: writes a module crate (a job, an agent, logs) that depends
//! on this checkout's SDK by path, ready for `cargo run`.

use std::path::{Path, PathBuf};

use crate::error::Failure;

const CARGO_TOML: &str = include_str!("../../templates/module/Cargo.toml.tmpl");
const MAIN_RS: &str = include_str!("../../templates/module/main.rs.tmpl");
const GITIGNORE: &str = "/target\n";

/// The SDK crate of the checkout this abictl was built from.
fn built_from_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../abi-sdk")
}

/// The crate name of a module id: lowercase, `.` and `:` as `-`.
fn crate_name(module_id: &str) -> String {
    module_id
        .chars()
        .map(|c| match c {
            '.' | ':' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Writes the crate of module `module_id` into `dir` (default: the crate
/// name, here), depending on the SDK at `sdk` (default: the checkout this
/// abictl was built from).
///
/// # Errors
///
/// A module id the registry would refuse, a directory that exists, no SDK
/// at the path (exit 2), or a write that failed.
pub fn run(module_id: &str, dir: Option<&Path>, sdk: Option<&Path>) -> anyhow::Result<()> {
    if !abi_wire::names::name(module_id) || abi_auth::is_first_party(module_id) {
        return Err(Failure::usage(format!(
            "{module_id:?} is not a module id: 1 to 256 of [A-Za-z0-9_.:-], starting with a letter, digit or '_', and not api, engine or dagster"
        ))
        .into());
    }
    let name = crate_name(module_id);
    let dir = dir.map_or_else(|| PathBuf::from(&name), Path::to_path_buf);
    if dir.exists() {
        return Err(Failure::usage(format!("{} exists; pick another --dir", dir.display())).into());
    }
    let sdk = sdk.map_or_else(built_from_sdk, Path::to_path_buf);
    let sdk = sdk.canonicalize().map_err(|_| {
        Failure::usage(format!("no SDK at {}", sdk.display()))
            .hint("pass --sdk <checkout>/crates/abi-sdk")
    })?;
    if !sdk.join("Cargo.toml").is_file() {
        return Err(Failure::usage(format!("no SDK at {}", sdk.display()))
            .hint("pass --sdk <checkout>/crates/abi-sdk")
            .into());
    }
    let process = sdk.join("../abi-process").canonicalize().map_err(|_| {
        Failure::usage(format!(
            "no abi-process beside the SDK at {}",
            sdk.display()
        ))
    })?;
    let fill = |template: &str| {
        template
            .replace("{{module_id}}", module_id)
            .replace("{{crate_name}}", &name)
            .replace("{{sdk_path}}", &sdk.display().to_string())
            .replace("{{process_path}}", &process.display().to_string())
    };
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::write(dir.join("Cargo.toml"), fill(CARGO_TOML))?;
    std::fs::write(dir.join("src/main.rs"), fill(MAIN_RS))?;
    std::fs::write(dir.join(".gitignore"), GITIGNORE)?;
    eprintln!("wrote {} (module {module_id}); next:", dir.display());
    eprintln!(
        "  cd {} && ABI_MODULE_KEY=$(abictl key {module_id}) cargo run",
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_names_follow_module_ids() {
        assert_eq!(crate_name("acme.Billing:v2"), "acme-billing-v2");
        assert_eq!(crate_name("demo-provider"), "demo-provider");
    }
}
