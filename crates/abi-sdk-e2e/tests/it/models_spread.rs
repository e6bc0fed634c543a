//! Load across replicas and under pressure: chats spread over two READY
//! replicas (the reference always picks the first), and a full host answers
//! at once that it is busy instead of leaving the chat in its
//! subscription's buffer (the reference's `ConcurrentCalls` blocks there).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use abi_sdk::CallErrorKind;
use abi_sdk::models::ChatMessage;
use abi_sdk_e2e::World;

use super::models_fixture::{Provider, chat_model, ready_instances};

/// Sends `chats` chats, each through the model `caller` gives, and counts
/// the answers by the replica (tag) that gave them.
async fn answers_by_replica<F, Fut>(chats: usize, caller: F) -> BTreeMap<String, usize>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = abi_sdk::models::ChatModel>,
{
    let mut by_tag: BTreeMap<String, usize> = BTreeMap::new();
    for n in 0..chats {
        let answer = caller()
            .await
            .invoke([ChatMessage::human(format!("hi {n}"))])
            .await
            .unwrap();
        let content: serde_json::Value = serde_json::from_str(&answer.content_text()).unwrap();
        *by_tag
            .entry(content["tag"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    by_tag
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_spread_over_two_ready_replicas() {
    let world = World::start(5.0).await;
    let a = Provider::start(&world, "rs_models", "a", None).await;
    let b = Provider::start(&world, "rs_models", "b", None).await;
    ready_instances(&world, "rs_models", 2).await;
    let model = chat_model(&world, "rs_models", "echo").await;
    let by_tag = answers_by_replica(20, || {
        let model = model.clone();
        async move { model }
    })
    .await;
    assert_eq!(by_tag.values().sum::<usize>(), 20);
    assert!(
        by_tag.get("a").copied().unwrap_or(0) >= 5 && by_tag.get("b").copied().unwrap_or(0) >= 5,
        "both replicas answer: {by_tag:?}"
    );
    assert_eq!(a.seen.all().len() + b.seen.all().len(), 20);
    a.stop().await;
    b.stop().await;
}

/// A caller built per chat (as `abictl chat` and the README's snippet do)
/// still spreads: each fresh `ChatModel` starts its round robin at a random
/// replica (the reference's, and ours before, always begin with the lowest
/// instance id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_callers_spread_over_two_ready_replicas() {
    let world = World::start(5.0).await;
    let a = Provider::start(&world, "rs_fresh", "a", None).await;
    let b = Provider::start(&world, "rs_fresh", "b", None).await;
    ready_instances(&world, "rs_fresh", 2).await;
    let by_tag = answers_by_replica(24, || chat_model(&world, "rs_fresh", "echo")).await;
    // Each replica gets at least 2 of 24 fair coin flips but for a chance
    // of 2 * 25 / 2^24 (about 3 in a million).
    assert!(
        by_tag.get("a").copied().unwrap_or(0) >= 2 && by_tag.get("b").copied().unwrap_or(0) >= 2,
        "fresh callers reach both replicas: {by_tag:?}"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_host_answers_busy_at_once() {
    let world = World::start(5.0).await;
    // One chat at a time, none waiting.
    let provider = Provider::start(&world, "rs_busy", "a", Some((1, 0))).await;
    ready_instances(&world, "rs_busy", 1).await;
    let model = chat_model(&world, "rs_busy", "echo")
        .await
        .timeout(Duration::from_secs(30));
    // Warm the caller's instance list and the host's authorization.
    model.invoke([ChatMessage::human("warm")]).await.unwrap();
    let slow = tokio::spawn({
        let model = model.clone();
        async move { model.invoke([ChatMessage::human("slow")]).await }
    });
    abi_test_support::wait_until(Duration::from_secs(30), || async {
        provider.seen.all().len() == 2
    })
    .await
    .unwrap();
    let err = model
        .invoke([ChatMessage::human("next")])
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind(), err.code()),
        (CallErrorKind::ResourceExhausted, Some("RESOURCE_EXHAUSTED"))
    );
    assert!(
        !slow.is_finished(),
        "refused while the slow chat still runs"
    );
    slow.await.unwrap().unwrap();
    // Once free, it answers again.
    model.invoke([ChatMessage::human("again")]).await.unwrap();
    provider.stop().await;
}
