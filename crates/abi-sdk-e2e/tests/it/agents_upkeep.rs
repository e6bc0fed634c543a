//! The host's upkeep, which the reference has not: a conversation claim
//! whose owner discovery no longer lists is released and its run FAILED
//! OWNER_GONE without anyone submitting to that conversation; finished
//! records past the retention go with their events. And the reference's
//! capacity limit (AGENT_BUSY).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::agents::{AgentErrorKind, AgentHostOptions, AgentRetention, SubmitOptions};
use abi_sdk::documents::{Data, Value};

use super::agents_fixture::{DEADLINE, Provider, Setup, options, ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_owners_claim_is_released_and_old_records_go() {
    let setup = Setup::start(20.0).await;
    let provider = Provider::start(
        &setup.world,
        "rust",
        AgentHostOptions {
            retention: Some(AgentRetention {
                max_age: Duration::from_secs(1),
                batch: 100,
            }),
            max_active_runs: 1,
            ..options()
        },
    )
    .await;
    ready(&setup.world, 1).await;
    let project = setup.world.project.clone();
    let docs = setup.documents().await;
    let runs = abi_wire::agents::runs_collection(&project);
    let claims = abi_wire::agents::claims_collection(&project);

    // A run a vanished instance left RUNNING, with its claim.
    let key = abi_wire::agents::invocation_key("echo", "orphan-1");
    let claim_key = abi_wire::agents::claim_key("echo", "caller", "t-orphan");
    let mut record = Data::new();
    for (k, v) in [
        ("agent_name", "echo"),
        ("invocation_id", "orphan-1"),
        ("thread_id", "t-orphan"),
        ("caller", "caller"),
        ("fingerprint", "f"),
        ("owner", "ghost-instance"),
        ("status", "RUNNING"),
    ] {
        record.insert(k.into(), Value::from(v));
    }
    record.insert("output_format".into(), Value::Int(2));
    record.insert("last_sequence".into(), Value::Int(0));
    docs.put(&runs, &key, record, Some(0)).await.unwrap();
    let mut claim = Data::new();
    claim.insert("invocation_key".into(), Value::from(key.as_str()));
    claim.insert("owner".into(), Value::from("ghost-instance"));
    docs.put(&claims, &claim_key, claim, Some(0)).await.unwrap();

    let agent = setup.agent("caller", "echo").await;
    let mut orphan = agent.invocation("orphan-1");
    let err = orphan.result(Some(DEADLINE)).await.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::OwnerUnavailable, "{err}");

    let (released, deleted) = provider.host().await.upkeep().await.unwrap();
    assert_eq!(
        (released, deleted),
        (1, 0),
        "released now, finished less than 1 s ago"
    );
    assert!(
        docs.try_get(&claims, &claim_key).await.unwrap().is_none(),
        "the claim is released"
    );
    let mut orphan = agent.invocation("orphan-1");
    let err = orphan.result(Some(DEADLINE)).await.unwrap_err();
    assert_eq!(
        (err.kind(), err.code()),
        (AgentErrorKind::OwnerGone, Some("OWNER_GONE")),
        "{err}"
    );

    // One live run at most: a second one is refused AGENT_BUSY.
    let mut blocked = agent
        .submit("block", SubmitOptions::default())
        .await
        .unwrap();
    let other = setup.agent("caller", "echo").await;
    let busy = other
        .submit("x", SubmitOptions::default())
        .await
        .unwrap_err();
    assert_eq!(busy.code(), Some("AGENT_BUSY"), "{busy}");
    blocked.cancel().await.unwrap();
    assert_eq!(
        blocked.result(Some(DEADLINE)).await.unwrap_err().kind(),
        AgentErrorKind::Cancelled
    );

    // Retention 1 s: every finished record goes, with its events.
    let answer = agent.invoke("keep?", None).await.unwrap();
    assert_eq!(answer, "rust:keep?");
    assert!(!setup.all("events").await.is_empty());
    let mut deleted = 0;
    let until = tokio::time::Instant::now() + DEADLINE;
    while deleted < 3 && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
        deleted += provider.host().await.upkeep().await.unwrap().1;
    }
    assert_eq!(deleted, 3, "the orphan, the cancelled and the finished run");
    assert!(setup.all("runs").await.is_empty());
    assert!(setup.all("events").await.is_empty(), "their events go too");

    provider.stop().await;
    setup.stop().await;
}
