//! Replays every input of `fuzz/corpus/handler/` through the fuzz target's own
//! check (`fuzz/src/check.rs`, included below), so CI keeps what fuzzing found:
//! no panic or hang, every reply decodes as its operation's response type and
//! carries the error the handler reported, and a refused request leaves the
//! stored snapshot byte-identical.

#[path = "../../../../fuzz/src/check.rs"]
#[allow(dead_code)]
mod check;

use std::path::{Path, PathBuf};

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/handler");
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read corpus {}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_corpus_input_passes_the_handler_check() {
    let files = corpus();
    assert!(
        files.len() >= 20,
        "the corpus has only {} inputs: fuzz/corpus/handler is missing",
        files.len()
    );
    for file in files {
        let input = std::fs::read(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        // Its own task, so a failure names the input that caused it.
        let result = tokio::spawn(async move { check::run(&input).await }).await;
        if let Err(e) = result {
            panic!("{} failed the handler check: {e}", file.display());
        }
    }
}

#[tokio::test]
async fn the_check_sees_refusals() {
    // The check is not vacuous: the input "register fz-a with fz-b's token"
    // passes it, and that very request is refused with an error the reply
    // decodes to.
    check::run(&[3, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]).await;
    assert_eq!(
        refused_register_code().await.as_deref(),
        Some("PERMISSION_DENIED")
    );
}

/// Registers module `fz-a` with `fz-b`'s token on a fresh handler and returns
/// the code of the error answered.
async fn refused_register_code() -> Option<String> {
    use abi_discovery::clock::ManualClock;
    use abi_discovery::config::Secret;
    use abi_discovery::discovery::DiscoveryConfig;
    use abi_discovery::service::{HandlerConfig, ServiceCore};
    use abi_discovery::store::memory::MemoryStore;
    use abi_wire::discovery::Operation;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    let shutdown = tokio_util::sync::CancellationToken::new();
    let core = ServiceCore::start(
        Arc::new(MemoryStore::new()),
        abi_registry::Rules::new(20.0, ["api"]).ok()?,
        Arc::new(ManualClock::new(1.0e9)),
        DiscoveryConfig::default(),
        HandlerConfig {
            secret: Secret::new(check::SECRET),
            broker_max_payload: 1 << 20,
        },
        shutdown.clone(),
    );
    let handler = core.handler();
    let key = abi_auth::module_key(check::SECRET, "fz-b").ok()?;
    let token = abi_auth::issue_module_token(
        "fz-b",
        &key,
        Duration::from_secs(600),
        SystemTime::now(),
        None,
    )
    .ok()?;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(abi_auth::AUTH_HEADER, token.as_str());
    let payload = {
        use prost::Message as _;
        abi_proto::discovery::v1::RegisterRequest {
            descriptor: Some(abi_proto::discovery::v1::ModuleDescriptor {
                module_id: "fz-a".to_owned(),
                package_version: "1.0.0".to_owned(),
                contract_major: 1,
                ..Default::default()
            }),
            instance_id: "i1".to_owned(),
            lease_token: "lease-a-0123456789abcdef0123456789".to_owned(),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let reply = handler
        .handle(Operation::Register, Some(&headers), &payload)
        .await;
    let carried = check::decode_error(Operation::Register, &reply.payload).ok()?;
    assert_eq!(carried, reply.error);
    shutdown.cancel();
    core.stopped().await;
    carried.map(|e| e.code)
}
