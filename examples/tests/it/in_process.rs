//! The demo modules, tested in process with `abi-testkit` (no NATS): how a
//! module's own tests can look.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_examples::{consumer, provider};
use abi_sdk::Status;
use abi_testkit::{Ended, TestRegistry};

fn provider_module() -> provider::Provider {
    provider::Provider {
        work_interval: Duration::from_millis(20),
    }
}

#[tokio::test]
async fn the_consumer_finds_the_providers_agent_and_job_once_it_serves() {
    let registry = TestRegistry::new();
    // Started first, the consumer waits for the provider.
    let consumer = registry.start_module(consumer::spec(), consumer::Consumer);
    registry
        .wait_for_status(consumer::MODULE_ID, Status::Starting)
        .await
        .unwrap();
    let provider = registry.start_module(provider::spec("1.0.0"), provider_module());
    // READY means its on_initialized found the agent and the job (a missing
    // one fails the hook, and the module with it).
    registry
        .wait_for_status(consumer::MODULE_ID, Status::Ready)
        .await
        .unwrap();
    let agents = registry.admin().find_agents("summarize").await.unwrap();
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0].module_id, provider::MODULE_ID);

    consumer.stop().await.unwrap();
    provider.stop().await.unwrap();
    registry.wait_gone(provider::MODULE_ID).await.unwrap();
}

#[tokio::test]
async fn the_consumer_stops_when_the_provider_lacks_what_it_needs() {
    let registry = TestRegistry::new();
    // A provider that serves no agent: the consumer's lookup fails.
    let bare = abi_sdk::ModuleSpec::new(provider::MODULE_ID).contract_major(1);
    let provider = registry.start_module(bare, provider_module());
    let consumer = registry.start_module(consumer::spec(), consumer::Consumer);
    match consumer.finished().await {
        Err(Ended::Failed(err)) => {
            assert_eq!(err.kind(), abi_sdk::RunErrorKind::Initialized, "{err}");
        }
        other => panic!("expected on_initialized to fail, got {other:?}"),
    }
    registry.wait_gone(consumer::MODULE_ID).await.unwrap();
    provider.stop().await.unwrap();
}
