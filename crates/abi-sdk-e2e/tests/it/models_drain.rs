//! SIGTERM to a real module process (`model-module`) while it answers a
//! chat: the chat in flight is answered (the reference cancels it without a
//! reply, so its caller times out), chats sent during the drain go to the
//! other replica, and the process exits cleanly. A chat that outlives the
//! drain timeout is answered `UNAVAILABLE` when the host closes, not left to
//! time out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::CallErrorKind;
use abi_sdk::models::ChatMessage;
use abi_sdk_e2e::World;

use super::models_fixture::{DEADLINE, Process, chat_model, ready_instances};

fn tag_of(answer: &ChatMessage) -> String {
    let content: serde_json::Value = serde_json::from_str(&answer.content_text()).unwrap();
    content["tag"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_host_answers_its_chat_in_flight_and_new_chats_go_elsewhere() {
    let world = World::start(5.0).await;
    let mut a = Process::ours(&world, "rs_models", "a");
    let mut b = Process::ours(&world, "rs_models", "b");
    let a_id = a.instance_id().await;
    let b_id = b.instance_id().await;
    ready_instances(&world, "rs_models", 2).await;
    // Longer than a drain would take without waiting, shorter than the budget.
    let model = chat_model(&world, "rs_models", "echo")
        .await
        .timeout(Duration::from_secs(30));

    let slow = tokio::spawn({
        let model = model.clone();
        async move { model.invoke([ChatMessage::human("slow")]).await }
    });
    // Whichever replica took it says so; that one is drained.
    let a_took_it = tokio::select! {
        _ = a.expect("chat slow") => true,
        _ = b.expect("chat slow") => false,
    };
    let (draining, draining_id, other, other_tag) = if a_took_it {
        (&mut a, a_id, &mut b, "b")
    } else {
        (&mut b, b_id, &mut a, "a")
    };
    draining.sigterm();
    // DRAINING (or already gone).
    abi_test_support::wait_until(DEADLINE, || async {
        !world
            .statuses("rs_models")
            .await
            .iter()
            .any(|(id, status)| *id == draining_id && status == "READY")
    })
    .await
    .unwrap();
    // While it drains (its chat still running), new chats are answered by
    // the other replica, whether the caller's instance list saw the drain
    // yet or not (the drained one refuses, the caller goes on).
    for n in 0..4 {
        let answer = model
            .invoke([ChatMessage::human(format!("hi {n}"))])
            .await
            .unwrap();
        assert_eq!(tag_of(&answer), other_tag);
    }
    let answer = slow.await.unwrap().expect("the chat in flight is answered");
    assert_ne!(
        tag_of(&answer),
        other_tag,
        "the drained replica answered it"
    );
    draining.expect("exit ok").await;
    draining.exits_ok().await;
    other.sigterm();
    other.exits_ok().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_longer_than_the_drain_is_answered_unavailable_at_close() {
    let world = World::start(5.0).await;
    let mut module = Process::ours_with(
        &world,
        "rs_closing",
        "a",
        &[("E2E_SLOW_MS", "20000"), ("E2E_DRAIN_MS", "300")],
    );
    module.instance_id().await;
    ready_instances(&world, "rs_closing", 1).await;
    let model = chat_model(&world, "rs_closing", "echo")
        .await
        .timeout(Duration::from_secs(40));
    let slow = tokio::spawn(async move { model.invoke([ChatMessage::human("slow")]).await });
    module.expect("chat slow").await;
    module.sigterm();
    let err = slow
        .await
        .unwrap()
        .expect_err("the handler outlives the drain");
    assert_eq!(
        (err.kind(), err.code()),
        (CallErrorKind::Unavailable, Some("UNAVAILABLE")),
        "answered at close, not timed out: {err}"
    );
    module.exits_ok().await;
}
