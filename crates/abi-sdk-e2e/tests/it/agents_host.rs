//! Our caller against our agent host, in process, with the real discovery
//! and document services: invoke, stream (an event above the inline limit
//! read back part by part), cancel, status from a new client, a deadline
//! that expires, and the records as the reference stores them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::agents::{AgentErrorKind, SubmitOptions};
use abi_sdk::documents::Value;

use super::agents_fixture::{DEADLINE, Provider, Setup, options, ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invoke_stream_cancel_and_status_from_a_new_client() {
    let setup = Setup::start(20.0).await;
    let provider = Provider::start(&setup.world, "rust", options()).await;
    let ids = ready(&setup.world, 1).await;
    let agent = setup.agent("caller", "echo").await;

    // invoke: the result, and the reference's record fields.
    let result = agent
        .invoke("hello", Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(result, "rust:hello");
    let runs = setup.all("runs").await;
    assert_eq!(runs.len(), 1);
    let record = &runs[0].data;
    for (field, value) in [
        ("status", Value::from("SUCCEEDED")),
        ("caller", Value::from("caller")),
        ("agent_name", Value::from("echo")),
        ("owner", Value::from(ids[0].as_str())),
        ("output_format", Value::Int(2)),
        ("last_sequence", Value::Int(2)),
        ("result_parts", Value::Int(1)),
    ] {
        assert_eq!(record.get(field), Some(&value), "{field}");
    }
    assert!(record.contains_key("finished_at") && record.contains_key("fingerprint"));
    assert!(
        setup.all("claims").await.is_empty(),
        "the claim is released"
    );

    // stream: the handler's events in order, one of them 40000 bytes (five
    // 8192-byte parts, above the 32 KiB inline limit).
    let mut run = agent
        .stream("hi", Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let events = run.events(Some(DEADLINE)).await.unwrap();
    let names: Vec<_> = events
        .iter()
        .map(|e| (e.event.as_str(), e.data.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("token", "a"),
            ("token", "b"),
            ("token", "c"),
            ("message", "rust:hi"),
            ("done", "[DONE]")
        ]
    );
    let mut big = agent
        .stream("big:40000", Some(Duration::from_secs(30)))
        .await
        .unwrap();
    let events = big.events(Some(DEADLINE)).await.unwrap();
    assert_eq!(events[0].data.len(), 40000);
    assert_eq!(
        big.last_status().unwrap().result.len(),
        40000,
        "the result read back in parts"
    );

    // cancel: a blocked run ends CANCELLED; the conversation is free again.
    let mut blocked = agent
        .submit("block", SubmitOptions::default())
        .await
        .unwrap();
    let cancelled = blocked.cancel().await.unwrap();
    assert!(
        ["CANCELLING", "CANCELLED", "FINALIZING"].contains(&cancelled.status.as_str()),
        "{}",
        cancelled.status
    );
    let err = blocked.result(Some(DEADLINE)).await.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::Cancelled, "{err}");
    assert_eq!(agent.invoke("again", None).await.unwrap(), "rust:again");

    // A new client (the caller restarted) reads a run by its id.
    let id = blocked.invocation_id().to_owned();
    let restarted = setup.agent("caller", "echo").await;
    let status = restarted.invocation(id.clone()).status(0).await.unwrap();
    assert_eq!(
        (status.status.as_str(), status.error_code.as_str()),
        ("CANCELLED", "CANCELLED")
    );
    // Another identity may not read it.
    let other = setup.agent("intruder", "echo").await;
    let denied = other.invocation(id).status(0).await.unwrap_err();
    assert_eq!(denied.code(), Some("PERMISSION_DENIED"));

    // A submit in another conversation, chosen per submit or per client:
    // the client's own thread stays as it was, clones share it, a
    // `new_thread` does not.
    let own = agent.thread_id();
    let mut other_thread = agent
        .submit(
            "hello",
            SubmitOptions {
                thread_id: Some("thread-explicit".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    other_thread.result(Some(DEADLINE)).await.unwrap();
    let status = other_thread.status(0).await.unwrap();
    assert_eq!(status.thread_id, "thread-explicit");
    assert_eq!(agent.thread_id(), own);
    assert_eq!(agent.clone().thread_id(), own);
    let fresh = agent.new_thread();
    assert_ne!(fresh.thread_id(), own);
    let mut on_fresh = fresh
        .submit("hello", SubmitOptions::default())
        .await
        .unwrap();
    on_fresh.result(Some(DEADLINE)).await.unwrap();
    assert_eq!(
        on_fresh.status(0).await.unwrap().thread_id,
        fresh.thread_id()
    );
    let empty = agent
        .submit(
            "hello",
            SubmitOptions {
                thread_id: Some(String::new()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(empty.kind(), AgentErrorKind::InvalidArgument);

    // A deadline that expires: TIMED_OUT.
    let mut late = agent
        .submit(
            "block",
            SubmitOptions {
                deadline_secs: 1,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let err = late.result(Some(DEADLINE)).await.unwrap_err();
    assert_eq!(
        (err.kind(), err.code()),
        (AgentErrorKind::TimedOut, Some("TIMED_OUT")),
        "{err}"
    );

    provider.stop().await;
    setup.stop().await;
}
