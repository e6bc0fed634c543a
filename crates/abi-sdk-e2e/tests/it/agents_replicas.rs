//! Two replicas of one agent module: submits spread over both (the
//! reference always picks the lowest instance id), and a replica whose host
//! drains finishes its run while new submits go to the other one, even
//! before discovery reports it DRAINING (its AGENT_BUSY sends the submit on).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use abi_sdk::Host as _;
use abi_sdk::agents::SubmitOptions;

use super::agents_fixture::{DEADLINE, Provider, Setup, options, ready};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_spread_over_replicas_and_avoid_a_draining_one() {
    let setup = Setup::start(20.0).await;
    let a = Provider::start(&setup.world, "A", options()).await;
    let b = Provider::start(&setup.world, "B", options()).await;
    ready(&setup.world, 2).await;

    let agent = setup.agent("caller", "echo").await;
    let mut tags = BTreeSet::new();
    for i in 0..6 {
        let answer = agent.invoke(&format!("n{i}"), None).await.unwrap();
        tags.insert(answer.split(':').next().unwrap().to_owned());
    }
    assert_eq!(
        tags,
        BTreeSet::from(["A".to_owned(), "B".to_owned()]),
        "both replicas serve"
    );

    // A long run on A (its own conversation), then A's host drains while
    // discovery still lists A as READY.
    let long = setup.agent("caller", "echo").await;
    let mut run = loop {
        let mut run = long
            .submit("sleep:1500", SubmitOptions::default())
            .await
            .unwrap();
        if a.host().await.running() == 1 {
            break run;
        }
        run.result(Some(DEADLINE)).await.unwrap();
    };
    let host = a.host().await;
    let drain = tokio::spawn(async move { host.drain(Duration::from_secs(30)).await });
    for i in 0..6 {
        let answer = agent.invoke(&format!("d{i}"), None).await.unwrap();
        assert_eq!(
            answer,
            format!("B:d{i}"),
            "a new submit went to the draining replica"
        );
    }
    assert_eq!(
        run.result(Some(DEADLINE)).await.unwrap(),
        "A:slept",
        "the drained run finished"
    );
    drain.await.unwrap().unwrap();

    a.stop().await;
    b.stop().await;
    setup.stop().await;
}
