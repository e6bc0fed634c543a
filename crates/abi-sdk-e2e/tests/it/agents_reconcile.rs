//! An uncertain submission keeps its handle (reconciled by invocation id:
//! resubmitting the same id and input finds the run, never a second one),
//! and a streamed run that stops making progress is timed out by the
//! host's inactivity watchdog.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_sdk::agents::{AgentErrorKind, AgentHostOptions, SubmitOptions};

use super::agents_fixture::{DEADLINE, Provider, Setup, options, ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncertain_submit_is_reconciled_and_an_idle_stream_times_out() {
    let setup = Setup::start(20.0).await;
    let provider = Provider::start(
        &setup.world,
        "rust",
        AgentHostOptions {
            idle_timeout: Duration::from_millis(500),
            ..options()
        },
    )
    .await;
    ready(&setup.world, 1).await;

    // A reply that cannot arrive in time: the outcome is unknown.
    let hasty = setup
        .agent("caller", "echo")
        .await
        .request_timeout(Duration::from_millis(1));
    hasty.set_thread_id("t-unsure").unwrap();
    let submit = SubmitOptions {
        invocation_id: Some("unsure-1".into()),
        deadline_secs: 30,
        ..Default::default()
    };
    let err = hasty.submit("sleep:300", submit.clone()).await.unwrap_err();
    assert_eq!(err.kind(), AgentErrorKind::SubmissionUncertain, "{err}");
    let handle = err.into_invocation().expect("the handle survives");
    assert_eq!(handle.invocation_id(), "unsure-1");
    // Reconcile: the same id and input again finds the run (or starts it,
    // if the first never arrived), and it runs once.
    let agent = setup.agent("caller", "echo").await;
    agent.set_thread_id("t-unsure").unwrap();
    let mut run = agent.submit("sleep:300", submit.clone()).await.unwrap();
    assert_eq!(run.result(Some(DEADLINE)).await.unwrap(), "rust:slept");
    let mut again = agent.submit("sleep:300", submit).await.unwrap();
    assert_eq!(again.result(Some(DEADLINE)).await.unwrap(), "rust:slept");
    assert_eq!(
        provider.started.count(),
        1,
        "one run, whatever the first submit did"
    );
    // The same id with other input is refused.
    let conflict = agent
        .submit(
            "other",
            SubmitOptions {
                invocation_id: Some("unsure-1".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(conflict.code(), Some("INVOCATION_CONFLICT"), "{conflict}");

    // A stream that stops emitting: TIMED_OUT after the idle timeout, its
    // events so far kept.
    let mut stalled = agent.stream("block", None).await.unwrap();
    let mut events = Vec::new();
    let end = loop {
        match stalled
            .next_event(Some(tokio::time::Instant::now() + DEADLINE))
            .await
        {
            Ok(Some(e)) => events.push(e.data),
            Ok(None) => panic!("the stalled stream succeeded"),
            Err(e) => break e,
        }
    };
    assert_eq!(events, ["a", "b", "c", "rust:block"]);
    assert_eq!(end.kind(), AgentErrorKind::TimedOut, "{end}");

    provider.stop().await;
    setup.stop().await;
}
