//! `scripts/stack.sh` end to end: the README's first command brings the
//! whole stack up, shows every transition, stops on Ctrl-C with exit 0
//! (dependents first), and leaves nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tokio::io::AsyncBufReadExt as _;

/// The whole demo on a loaded 2-core machine, with room to spare.
const DEADLINE: Duration = Duration::from_secs(240);

fn workspace() -> PathBuf {
    abi_test_support::workspace_root()
}

/// The directory holding abictl, where cargo also puts the other binaries.
/// `cargo test --workspace --all-targets` builds them all first; a narrower
/// run builds the missing ones here (same target dir, same profile).
fn bin_dir() -> PathBuf {
    let abictl = PathBuf::from(env!("CARGO_BIN_EXE_abictl"));
    let dir = abictl.parent().unwrap().to_path_buf();
    let bins = [
        "abi-discovery",
        "abi-documents",
        "provider",
        "consumer",
        "rollout-a",
        "rollout-b",
    ];
    if bins.iter().any(|b| !dir.join(b).exists()) {
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace())
            .args([
                "build",
                "--quiet",
                "-p",
                "abi-discovery",
                "-p",
                "abi-documents",
                "-p",
                "abi-examples",
                "--bins",
            ])
            .status()
            .expect("run cargo build");
        assert!(
            status.success(),
            "building abi-discovery and the examples failed"
        );
    }
    for bin in bins {
        assert!(dir.join(bin).exists(), "{bin} missing in {}", dir.display());
    }
    dir
}

/// Processes still running whose command line mentions `needle` and, with
/// `env`, whose environment holds that `KEY=value`.
fn running(needle: &str, env: Option<&str>) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.contains(needle) {
            continue;
        }
        if let Some(env) = env {
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if !environ.split(|b| *b == 0).any(|var| var == env.as_bytes()) {
                continue;
            }
        }
        found.push(cmdline);
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stack_script_runs_the_demo_and_stops_cleanly() {
    let bins = tokio::task::spawn_blocking(bin_dir).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // In its own process group, as a terminal runs it, so that the Ctrl-C
    // below reaches it (and whatever it runs in the foreground) together.
    let mut child = tokio::process::Command::new("bash")
        .arg(workspace().join("scripts/stack.sh"))
        .args(["--duration", "120", "--bin-dir"])
        .arg(&bins)
        // Its temp dir goes here, so that we can check it is removed.
        .env("TMPDIR", tmp.path())
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run scripts/stack.sh");
    let pgid = child.id().expect("running");
    let mut stdout_lines = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut stderr = child.stderr.take().expect("piped");
    let stderr_task = tokio::spawn(async move {
        let mut text = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        text
    });
    let read = async {
        let mut text = String::new();
        while let Ok(Some(line)) = stdout_lines.next_line().await {
            if line.starts_with("==> stack is up") {
                // Ctrl-C once the demo is done, as a user would.
                let sent = std::process::Command::new("kill")
                    .args(["-s", "INT", "--", &format!("-{pgid}")])
                    .status();
                assert!(sent.is_ok_and(|s| s.success()), "Ctrl-C not sent");
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    };
    let stdout = tokio::time::timeout(DEADLINE, read)
        .await
        .expect("stack.sh finished within the deadline");
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("stack.sh exited")
        .unwrap();
    let stderr = stderr_task.await.unwrap();
    let report = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(status.code(), Some(0), "stack.sh after Ctrl-C: {report}");
    // Dependents stop before what they depend on.
    let at = |needle: &str| {
        stdout
            .find(needle)
            .unwrap_or_else(|| panic!("no `{needle}` in {report}"))
    };
    assert!(
        at("stopped consumer") < at("stopped provider-2"),
        "{report}"
    );
    let shutdown = &stdout[at("==> shutdown")..];
    assert!(
        !shutdown
            .lines()
            .any(|l| l.contains("demo-consumer@1") && l.contains("-> DEGRADED")),
        "the consumer saw its provider leave while stopping: {report}"
    );
    assert!(
        at("stopped rollout-b-v2") < at("stopped rollout-a-v2"),
        "{report}"
    );

    for step in [
        "ok: demo-provider READY",
        "ok: demo-consumer READY",
        "ok: abi-documents serves abi.svc.document.v1.*",
        "ok: demo-provider/work holds one document per provider instance",
        "ok: demo-provider tick ran on its schedule",
        "ok: demo-provider echo triggered and SUCCEEDED",
        "cancelled while running",
        "SUCCEEDED: 4 words: HELLO FROM THE STACK; its step timeline:",
        "ok: demo-consumer got answers from the echo agent and the echo-chat model",
        "ok: demo-provider echo agent streamed its events",
        "ok: demo-provider echo-chat answered: hello from abictl",
        "/apps/demo-provider/status/: {\"caller\":\"api\",\"hello\":\"from demo-provider\"}",
        "shows: demo-consumer READY, demo-provider READY",
        "the web console:  http://",
        "ok: demo-consumer DEGRADED",
        "ok: demo-consumer READY again",
        "ok: demo-rollout-a v1 READY",
        "ok: demo-rollout-b v1 READY",
        "ok: demo-rollout-a v2 STAGED (v1 still serves)",
        "ok: demo-rollout-a v2 READY",
        "ok: demo-rollout-b v2 READY",
        "ok: demo-rollout-a v1 gone",
        "ok: demo-rollout-b v1 gone",
        "ok: v1 processes drained and exited 0",
        "==> stack: stopped cleanly",
    ] {
        assert!(stdout.contains(step), "missing `{step}` in {report}");
    }
    // The digest's timeline: its two steps and its call of the consumer.
    let timeline = &stdout[at("its step timeline:")..];
    for key in ["count", "shout", "summarize"] {
        assert!(
            timeline
                .lines()
                .any(|l| l.trim_start().starts_with(key) && l.contains("SUCCEEDED")),
            "no SUCCEEDED step {key} in {report}"
        );
    }
    // The live events show the transitions themselves.
    let events: Vec<&str> = stdout.lines().filter(|l| l.starts_with("    | ")).collect();
    let saw = |module: &str, what: &str| {
        events
            .iter()
            .any(|l| l.contains(&format!("{module}@1 ")) && l.contains(what))
    };
    assert!(saw("demo-provider", "-> READY"), "{report}");
    assert!(saw("demo-consumer", "READY -> DEGRADED"), "{report}");
    assert!(saw("demo-rollout-a", "STAGED"), "{report}");
    assert!(
        events.iter().any(|l| l.contains("demo-rollout-a@1")
            && l.contains("gone")
            && l.contains("rollout=v1")),
        "{report}"
    );
    // Nothing left behind: no process from the stack, no temp dir. The
    // stack's processes inherit its TMPDIR; other tests of this binary run
    // abictl from the same directory at the same time.
    let stack_env = format!("TMPDIR={}", tmp.path().display());
    let leftovers: Vec<String> = [
        "abi-discovery",
        "abi-documents",
        "nats-server",
        "abictl watch",
        "rollout-a",
        "provider",
    ]
    .iter()
    .flat_map(|n| {
        running(&format!("{}/", bins.display()), Some(&stack_env))
            .into_iter()
            .filter(move |c| c.contains(n))
    })
    .collect();
    assert!(
        leftovers.is_empty(),
        "left running: {leftovers:?}\n{report}"
    );
    assert!(
        running(tmp.path().to_str().unwrap(), None).is_empty(),
        "nats-server left running"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "temp dir not removed: {left:?}");
}
