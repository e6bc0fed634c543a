//! abictl against a real nats-server and the discovery service: what each
//! command prints, and its exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tokio::io::AsyncBufReadExt as _;

use crate::common::{DEADLINE, SECRET, Stack, descriptor};

/// The next line a running abictl prints.
async fn next_line(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> String {
    tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .expect("a line in time")
        .unwrap()
        .expect("the watch still runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_get_tree_and_wait_show_the_live_registry() {
    let stack = Stack::start().await;
    stack
        .register(descriptor("store", &[]), "store-1", true)
        .await;
    stack
        .register(descriptor("app", &["store", "ghost"]), "app-1", true)
        .await;

    let ls = stack.abictl().run(&["ls"]).await;
    let text = ls.ok();
    let store_line = text.lines().find(|l| l.contains("store-1")).unwrap();
    assert!(
        store_line.starts_with("store") && store_line.contains("READY"),
        "{text}"
    );
    assert!(
        store_line.contains("1.2.3") && store_line.contains('s'),
        "{text}"
    );
    // app depends on a module nobody registered.
    let app_line = text.lines().find(|l| l.contains("app-1")).unwrap();
    assert!(app_line.contains("DEGRADED"), "{text}");
    assert!(
        !text.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );

    let json = stack.abictl().run(&["ls", "--json"]).await.json();
    let ids: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["instance_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["app-1", "store-1"]);

    let get = stack.abictl().run(&["get", "store"]).await;
    assert!(
        get.ok().contains("agent       summarizer [summarize]"),
        "{get:#?}"
    );
    let get = stack.abictl().run(&["get", "app", "--major", "1"]).await;
    assert!(get.ok().contains("depends on  ghost (major 1)"), "{get:#?}");
    let wrong = stack.abictl().run(&["get", "store", "--major", "2"]).await;
    assert_eq!(wrong.code, 1, "{wrong:#?}");
    assert!(
        wrong.stderr.starts_with("abictl: INCOMPATIBLE_MODULE"),
        "{wrong:#?}"
    );
    let none = stack.abictl().run(&["get", "nobody"]).await;
    assert_eq!(none.code, 1);
    assert!(none.stderr.contains("MODULE_NOT_FOUND"), "{none:#?}");

    let tree = stack.abictl().run(&["tree"]).await;
    assert_eq!(
        tree.ok(),
        "app  DEGRADED\n  ghost@1  MISSING\n  store@1  READY\n",
        "{tree:#?}"
    );

    let waited = stack
        .abictl()
        .run(&["wait", "store", "--status", "READY", "--for", "30"])
        .await;
    assert_eq!(waited.code, 0, "{waited:#?}");
    let timed_out = stack
        .abictl()
        .run(&["wait", "app", "--status", "READY", "--for", "0.5"])
        .await;
    assert_eq!(timed_out.code, 4, "{timed_out:#?}");
    assert!(
        timed_out.stderr.contains("last seen: DEGRADED"),
        "{timed_out:#?}"
    );

    // A live table: drawn at once, then again when a module registers.
    let mut live = stack.abictl().spawn(&["ls", "--watch", "--for", "120"]);
    let mut lines = tokio::io::BufReader::new(live.stdout.take().unwrap()).lines();
    let mut first = Vec::new();
    while first.len() < 4 {
        first.push(next_line(&mut lines).await);
    }
    assert!(first[0].starts_with("--- "), "{first:?}");
    assert!(first[1].starts_with("MODULE"), "{first:?}");
    assert!(
        first[2..].iter().all(|l| !l.contains("late-1")),
        "{first:?}"
    );
    stack
        .register(descriptor("late", &[]), "late-1", true)
        .await;
    loop {
        let line = next_line(&mut lines).await;
        if line.contains("late-1") {
            assert!(line.starts_with("late") && line.contains("READY"), "{line}");
            break;
        }
    }
    live.kill().await.unwrap();
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dump_and_decode_show_the_snapshot_without_lease_hashes() {
    let stack = Stack::start().await;
    stack
        .register(descriptor("store", &[]), "store-1", true)
        .await;
    stack
        .register(descriptor("app", &["store"]), "app-1", false)
        .await;

    let dump = stack.abictl().run(&["dump", "--json"]).await;
    let json = dump.json();
    assert!(json["revision"].as_u64().unwrap() >= 3, "{json}");
    let raw = stack.raw_snapshot().await;
    assert_eq!(json["size_bytes"].as_u64().unwrap(), raw.len() as u64);
    assert_eq!(
        json["bucket"],
        abi_wire::discovery::registry_bucket(&stack.project)
    );
    let records = json["records"].as_array().unwrap();
    assert_eq!(records.len(), 2);
    assert!(!dump.stdout.contains("lease_hash"), "{}", dump.stdout);
    assert!(
        records
            .iter()
            .any(|r| r["initialized"] == true && r["owner"] == "store")
    );

    let human = stack.abictl().run(&["dump"]).await;
    assert!(
        human
            .ok()
            .contains(&format!("size {} bytes  records 2", raw.len())),
        "{human:#?}"
    );

    let decoded = stack
        .abictl()
        .stdin(raw.clone())
        .run(&["decode", "--json"])
        .await;
    let json = decoded.json();
    assert_eq!(json["records"].as_array().unwrap().len(), 2);
    assert_eq!(json["size_bytes"].as_u64().unwrap(), raw.len() as u64);
    assert!(!decoded.stdout.contains("lease_hash"));
    let text = stack.abictl().stdin(raw).run(&["decode"]).await;
    assert!(
        text.ok().contains("app-1") && text.ok().contains("STARTING"),
        "{text:#?}"
    );

    let garbage = stack
        .abictl()
        .stdin(b"\xff\xff\xff".to_vec())
        .run(&["decode"])
        .await;
    assert_eq!(garbage.code, 2, "{garbage:#?}");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evict_needs_an_admin_and_says_what_it_removed() {
    let stack = Stack::start().await;
    stack
        .register(descriptor("store", &[]), "store-1", true)
        .await;

    let denied = stack
        .abictl()
        .run(&["evict", "store-1", "--as", "someone"])
        .await;
    assert_eq!(denied.code, 1, "{denied:#?}");
    assert!(
        denied.stderr.starts_with("abictl: PERMISSION_DENIED"),
        "{denied:#?}"
    );

    let evicted = stack.abictl().run(&["evict", "store-1"]).await;
    assert!(
        evicted
            .ok()
            .starts_with("evicted store-1 (module store, status READY"),
        "{evicted:#?}"
    );
    let again = stack.abictl().run(&["evict", "store-1"]).await;
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("INSTANCE_NOT_FOUND"), "{again:#?}");
    let json = stack.abictl().run(&["ls", "--json"]).await.json();
    assert_eq!(json.as_array().unwrap().len(), 0);
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_reachability_map_to_exit_codes() {
    let stack = Stack::start().await;
    let missing = stack.abictl().without("ABI_JWT_SECRET").run(&["ls"]).await;
    assert_eq!(missing.code, 2, "{missing:#?}");
    assert!(
        missing.stderr.contains("ABI_JWT_SECRET_FILE"),
        "{missing:#?}"
    );

    let wrong = stack
        .abictl()
        .env("ABI_JWT_SECRET", "not-the-secret")
        .run(&["ls"])
        .await;
    assert_eq!(wrong.code, 1, "{wrong:#?}");
    assert!(
        wrong.stderr.starts_with("abictl: UNAUTHENTICATED"),
        "{wrong:#?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, format!("{SECRET}\n")).unwrap();
    let from_file = stack
        .abictl()
        .without("ABI_JWT_SECRET")
        .env("ABI_JWT_SECRET_FILE", file.to_str().unwrap())
        .run(&["ls"])
        .await;
    assert!(from_file.ok().starts_with("MODULE"), "{from_file:#?}");

    let nobody = stack
        .abictl()
        .env("ABI_PROJECT", "nobody_serves_this")
        .run(&["ls"])
        .await;
    assert_eq!(nobody.code, 3, "{nobody:#?}");
    assert!(nobody.stderr.contains("NO_RESPONDERS"), "{nobody:#?}");

    let url = stack.server.url();
    // Stopping the stack stops its nats-server too.
    stack.stop().await;
    let unreachable = crate::common::Abictl::for_url(&url).run(&["ls"]).await;
    assert_eq!(unreachable.code, 3, "{unreachable:#?}");
    assert!(
        unreachable.stderr.contains("cannot reach NATS"),
        "{unreachable:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_and_token_derive_from_the_secret() {
    let stack = Stack::start().await;
    let key = stack.abictl().run(&["key", "demo-provider"]).await;
    assert_eq!(
        key.ok().trim(),
        abi_auth::module_key(SECRET, "demo-provider").unwrap()
    );
    let first_party = stack.abictl().run(&["key", "api"]).await;
    assert_eq!(first_party.code, 2, "{first_party:#?}");

    let token = stack
        .abictl()
        .run(&["token", "engine", "--aud", "inst-1", "--ttl", "60"])
        .await;
    let token = token.ok().trim().to_owned();
    assert_eq!(
        abi_auth::verify(&token, SECRET, Some("inst-1")).unwrap(),
        "engine"
    );
    assert!(abi_auth::verify(&token, SECRET, None).is_err());

    // A module key works for calls when --as names its module.
    let key = abi_auth::module_key(SECRET, "store").unwrap();
    let as_module = stack
        .abictl()
        .without("ABI_JWT_SECRET")
        .env("ABI_MODULE_KEY", &key)
        .run(&["ls", "--as", "store"])
        .await;
    assert!(as_module.ok().starts_with("MODULE"), "{as_module:#?}");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_events_and_rollouts_show_what_a_staged_rollout_waits_for() {
    let stack = Stack::start().await;
    let staged = |m: &str| {
        let mut d = descriptor(m, &[]);
        d.package_version = "2.0.0".into();
        d
    };
    stack.register(descriptor("a", &[]), "a-1", true).await;
    // A v2 of "a" in a two-module rollout: initialized, but b never came.
    // (The watch runs a generous while so that a loaded machine still sees
    // both events.)
    stack
        .register_in_rollout(staged("a"), "a-2", "v2", &["a", "b"])
        .await;
    let watch = stack.abictl().run(&["watch", "--for", "10"]).await;
    let text = watch.ok();
    assert!(
        text.lines()
            .any(|l| l.contains("registered") && l.contains("a@1") && l.contains("instance=a-1")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("STAGED") && l.contains("rollout=v2")),
        "{text}"
    );

    let rollouts = stack.abictl().run(&["rollouts", "--json"]).await.json();
    let a = &rollouts["modules"][0];
    assert_eq!(a["module_id"], "a");
    assert_eq!(a["staged"][0], "v2");
    assert_eq!(a["waiting_for"]["v2"][0], "b (not registered)");
    let table = stack.abictl().run(&["rollouts"]).await;
    assert!(table.ok().contains("v2: b (not registered)"), "{table:#?}");
    stack.stop().await;
}

/// Bad input is refused before anything is sent: exit 2, naming what is
/// allowed (no server is even needed).
#[tokio::test]
async fn bad_input_exits_2_naming_what_is_allowed() {
    let ctl = || crate::common::Abictl::for_url("nats://127.0.0.1:1");
    let cases: [(&[&str], &str); 6] = [
        (
            &["runs", "m", "j", "--status", "BOGUS"],
            "is not one of QUEUED, RUNNING",
        ),
        (
            &["wait", "m", "--status", "BOGUS"],
            "is not one of STARTING",
        ),
        (
            &["agent-runs", "m", "--status", "BOGUS"],
            "is not one of ACCEPTED",
        ),
        (
            &["--project", "a.b", "ls"],
            "must be 1 to 64 of [A-Za-z0-9_-]",
        ),
        (&["key", "bad id!"], "is not a module id"),
        (
            &["chat", "m", "echo", "hi", "--option", "k=notjson"],
            "is not JSON",
        ),
    ];
    for (args, said) in cases {
        let run = ctl().run(args).await;
        assert_eq!(run.code, 2, "{args:?}: {run:#?}");
        assert!(run.stderr.contains(said), "{args:?}: {run:#?}");
    }
}

/// Shell completions for the three shells, and `--help` listing every
/// command an operator looks for (no server needed).
#[tokio::test]
async fn completions_and_help_list_the_commands() {
    let ctl = || crate::common::Abictl::for_url("nats://127.0.0.1:1");
    let help = ctl().run(&["--help"]).await;
    for command in [
        "docs",
        "agent-run",
        "rerun",
        "retry",
        "pause",
        "resume",
        "purge",
        "micro",
        "kv",
        "completions",
    ] {
        assert!(
            help.ok()
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{command} "))),
            "{command} missing from --help: {help:#?}"
        );
    }
    let docs_help = ctl().run(&["docs", "--help"]).await;
    assert!(docs_help.ok().contains("put") && docs_help.ok().contains("delete"));
    for (shell, marker) in [
        ("bash", "_abictl()"),
        ("zsh", "#compdef abictl"),
        ("fish", "complete -c abictl"),
    ] {
        let script = ctl().run(&["completions", shell]).await;
        let text = script.ok();
        assert!(text.contains(marker), "{shell}: {text}");
        assert!(
            text.contains("pause") && text.contains("agent-run"),
            "{shell}"
        );
    }
    let bad = ctl().run(&["completions", "tcsh"]).await;
    assert_eq!(bad.code, 2, "{bad:#?}");
}
