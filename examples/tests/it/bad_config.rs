//! The example binaries say what is wrong with their configuration: each
//! exits 1 with the refused setting named on stderr (the runner logs the
//! error it returns, whatever step it came from). No NATS needed: the
//! configuration is refused before anything connects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn run(binary: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = Command::new(binary);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().into_owned();
        if key.starts_with("ABI_") || key.starts_with("NATS_") || key == "RUST_LOG" {
            command.env_remove(key);
        }
    }
    command.envs(env.iter().copied());
    let out = command.output().expect("run the example");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_examples_name_what_is_wrong_with_their_configuration() {
    let cases: [(&[(&str, &str)], &str); 3] = [
        (&[("ABI_PROJECT", "demo")], "ABI_MODULE_KEY"),
        (&[("NATS_URL", "bad://")], "NATS_URL"),
        (
            &[
                ("ABI_PROJECT", "demo"),
                ("ABI_SERVICE_TOKEN", "t"),
                ("ABI_ROLLOUT_ID", "bad!id"),
            ],
            "ABI_ROLLOUT_ID must match",
        ),
    ];
    for binary in [
        env!("CARGO_BIN_EXE_provider"),
        env!("CARGO_BIN_EXE_consumer"),
    ] {
        for (env, named) in cases {
            let (code, stderr) = run(binary, env);
            assert_eq!(code, Some(1), "{binary} {env:?}: {stderr}");
            assert!(
                stderr.contains("module failed") && stderr.contains(named),
                "{binary} {env:?} does not name {named}: {stderr:?}"
            );
        }
    }
}
