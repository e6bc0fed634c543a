//! A module keeps its lease while the registry's stream leader is lost
//! (issue 9): a 3-node cluster, the bucket at 3 replicas, two owners and a
//! module process all given the seed list, a 20 s lease; the stream leader
//! is killed (-9). The module's registration is the same one afterwards
//! (same `registered_at` and lease), its renewals went on past the outage,
//! and it still drains cleanly on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_discovery::config::Config;
use abi_proto::Message as _;
use abi_proto::discovery::v1::{RegistryRecord, RegistryState};
use abi_sdk::{DiscoveryClient, TokenSource};
use abi_sdk_e2e::{DEADLINE, ModuleProc, SECRET, instance_of};
use abi_test_support::{NatsCluster, unique_name, wait_for_stream_leader, wait_until};
use clap::Parser as _;
use tokio_util::sync::CancellationToken;

/// The lease: the SDK renews every 5 s, so an election of several seconds
/// costs one or two renewals, never the lease.
const LEASE_SECONDS: &str = "20";

async fn connect(urls: &[String]) -> async_nats::Client {
    async_nats::connect(urls).await.unwrap()
}

/// Starts an in-process owner on the seed list `urls`.
fn start_owner(urls: &str, project: &str) -> CancellationToken {
    let valid = Config::try_parse_from([
        "abi-discovery",
        "--nats-url",
        urls,
        "--project",
        project,
        "--jwt-secret",
        SECRET,
        "--lease-seconds",
        LEASE_SECONDS,
        "--kv-replicas",
        "3",
    ])
    .unwrap()
    .validate()
    .unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(abi_discovery::run::run(valid, stop.clone()));
    stop
}

/// The stored registry, `None` when it could not be read just now.
async fn stored(client: &async_nats::Client, project: &str) -> Option<RegistryState> {
    let js = async_nats::jetstream::new(client.clone());
    let read = async {
        let kv = js
            .get_key_value(abi_wire::discovery::registry_bucket(project))
            .await
            .ok()?;
        kv.get(abi_wire::discovery::REGISTRY_KEY).await.ok()?
    };
    let bytes = tokio::time::timeout(Duration::from_secs(2), read)
        .await
        .ok()??;
    Some(RegistryState::decode(bytes).unwrap())
}

/// `instance`'s record, `None` when it is not stored or could not be read.
async fn record(
    client: &async_nats::Client,
    project: &str,
    instance: &str,
) -> Option<RegistryRecord> {
    stored(client, project)
        .await?
        .records
        .into_iter()
        .find(|r| {
            r.instance
                .as_ref()
                .is_some_and(|i| i.instance_id == instance)
        })
}

fn expires_at(record: &RegistryRecord) -> f64 {
    record.instance.as_ref().unwrap().expires_at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_keeps_its_lease_through_a_stream_leader_loss() {
    let mut cluster = NatsCluster::start(3).await;
    let urls = cluster.urls().join(",");
    let project = unique_name("leader");
    let stream = abi_wire::discovery::registry_stream(&project);
    let _owners = [start_owner(&urls, &project), start_owner(&urls, &project)];
    let observer = connect(&cluster.urls()).await;
    let admin_token = abi_test_support::requests::service_token(SECRET, "engine");
    let admin = DiscoveryClient::new(
        observer.clone(),
        project.clone(),
        TokenSource::issued(admin_token),
    );
    wait_until(DEADLINE, || async {
        admin.list_modules(1, "").await.is_ok()
    })
    .await
    .expect("the owners serve");

    let env = vec![
        ("E2E_ID".to_owned(), "leased".to_owned()),
        ("NATS_URL".to_owned(), urls.clone()),
        ("ABI_PROJECT".to_owned(), project.clone()),
        (
            "ABI_MODULE_KEY".to_owned(),
            abi_auth::module_key(SECRET, "leased").unwrap(),
        ),
    ];
    let mut module = ModuleProc::spawn("leased", &env);
    let instance = instance_of(&module.expect("on_initialized").await);
    let ready = wait_until(DEADLINE, || async {
        admin.get_module("leased", 1).await.is_ok_and(|instances| {
            instances
                .iter()
                .any(|i| i.instance_id == instance && i.status == "READY")
        })
    })
    .await;
    assert!(ready.is_ok(), "the module never turned READY");
    // A KV get may be answered by a follower that has not applied the
    // latest write yet: poll until the record shows up.
    let before = wait_for(|| record(&observer, &project, &instance)).await;

    let leader = wait_for_stream_leader(&observer, &stream, None, DEADLINE).await;
    let leader_index = cluster.node_index(&leader).unwrap();
    let fault = std::time::Instant::now();
    cluster.stop_node(leader_index);
    let new_leader = wait_for_stream_leader(&observer, &stream, Some(&leader), DEADLINE).await;
    let elected = fault.elapsed();

    // Renewals go on after the election: the stored lease moves past where
    // it stood at the fault plus a whole lease.
    let renewed_past = expires_at(&before) + 20.0;
    let renewed = wait_for(|| async {
        record(&observer, &project, &instance)
            .await
            .filter(|r| expires_at(r) > renewed_past)
    })
    .await;
    eprintln!(
        "stream leader {leader} killed; {new_leader} elected after {:.2} s; lease renewed past the outage",
        elected.as_secs_f64()
    );
    // The same registration: never expired and registered again.
    assert_eq!(renewed.registered_at, before.registered_at);
    assert_eq!(renewed.lease_hash, before.lease_hash);
    assert!(renewed.initialized && !renewed.draining);

    module.signal("TERM");
    assert!(module.wait().await.success(), "{:#?}", module.lines);
    // Gone from a snapshot actually read (a failed read proves nothing).
    let gone = wait_until(DEADLINE, || async {
        stored(&observer, &project).await.is_some_and(|state| {
            !state.records.iter().any(|r| {
                r.instance
                    .as_ref()
                    .is_some_and(|i| i.instance_id == instance)
            })
        })
    })
    .await;
    assert!(gone.is_ok(), "the module unregistered on SIGTERM");
}

/// Polls `probe` until it yields a value (60 s at most).
async fn wait_for<T, F, Fut>(mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "not within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
