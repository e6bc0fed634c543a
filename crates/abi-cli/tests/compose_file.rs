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
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name);
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
        BTreeSet::from(["nats", "abi-discovery", "provider", "consumer"])
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
    for package in ["abi-discovery", "abi-cli", "abi-examples"] {
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
    let command = abi_discovery::config::Config::command();
    for arg in command.get_arguments() {
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
