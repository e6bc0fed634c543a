//! Authenticated cancels: our caller signs its cancel with its token; our
//! host lets a signed cancel act only when the document service accepts the
//! token for the module's namespace (a forged token is refused), and keeps
//! accepting unsigned cancels, which is what the reference's caller sends,
//! unless `require_signed_cancels` is on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk::jobs::{JobHostOptions, JobSpec};
use abi_test_support::{requests, wait_until};
use abi_wire::jobs;
use serde_json::json;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_cancel_is_refused_and_signed_or_unsigned_ones_act() {
    let setup = Setup::start().await;
    let (host, _) = setup
        .host(MODULE, "rust-1", JobSpec::new("ingest").unwrap(), fast())
        .await;
    let job = setup.client(MODULE, "ingest");
    let running = job.trigger(json!({"block": true}), None).await.unwrap();
    wait_until(DEADLINE, || async {
        running.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    let queued = job.trigger(json!({}), None).await.unwrap();

    // A cancel of the running run signed by a token of another secret.
    let forged = requests::service_token("not-the-platform-secret-0123456789abcdef", "api");
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(abi_wire::auth::AUTH_HEADER, forged.as_str());
    let cancel = jobs::JobSubjects::new(&setup.project, MODULE, "ingest").cancel();
    setup
        .nats
        .publish_with_headers(cancel.clone(), headers, running.run_id().to_owned().into())
        .await
        .unwrap();
    // Our caller's signed cancel of the queued run, after it: the host
    // reads cancels in order, so once this one acted the forged one was
    // handled (and refused).
    queued.cancel().await.unwrap();
    let record = queued.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "CANCELLED", "a signed cancel acts");
    assert_eq!(
        running.status().await.unwrap().status,
        "RUNNING",
        "the forged cancel was refused"
    );

    // An unsigned cancel, as the reference's caller sends it, still acts.
    setup
        .nats
        .publish(cancel, running.run_id().to_owned().into())
        .await
        .unwrap();
    let record = running.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "CANCELLED");
    host.close_now().await;
    setup.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_cancel_is_refused_when_signed_ones_are_required() {
    let setup = Setup::start().await;
    let options = JobHostOptions {
        require_signed_cancels: true,
        ..fast()
    };
    let (host, _) = setup
        .host(MODULE, "rust-1", JobSpec::new("ingest").unwrap(), options)
        .await;
    let job = setup.client(MODULE, "ingest");
    let running = job.trigger(json!({"block": true}), None).await.unwrap();
    wait_until(DEADLINE, || async {
        running.status().await.unwrap().status == "RUNNING"
    })
    .await
    .unwrap();
    let queued = job.trigger(json!({}), None).await.unwrap();

    // The reference caller's unsigned cancel of the running run.
    let cancel = jobs::JobSubjects::new(&setup.project, MODULE, "ingest").cancel();
    setup
        .nats
        .publish(cancel, running.run_id().to_owned().into())
        .await
        .unwrap();
    // A signed cancel after it: once it acted, the unsigned one was handled.
    queued.cancel().await.unwrap();
    let record = queued.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "CANCELLED", "a signed cancel acts");
    assert_eq!(
        running.status().await.unwrap().status,
        "RUNNING",
        "the unsigned cancel was refused"
    );

    running.cancel().await.unwrap();
    let record = running.wait(DEADLINE).await.unwrap();
    assert_eq!(record.status, "CANCELLED");
    host.close_now().await;
    setup.stop().await;
}
