//! SIGTERM while requests are in flight: they are answered, the registrations
//! acknowledged are in the registry, and the process exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::edges_common;

use std::collections::BTreeSet;

use abi_proto::discovery::v1 as pb;
use abi_test_support::{NatsServer, unique_name};
use abi_wire::discovery::Operation;
use async_nats::HeaderMap;
use async_nats::client::RequestErrorKind;
use edges_common::binary::OwnerProcess;
use edges_common::*;
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use prost::Message as _;

/// Below the registry's 256 live instances.
const REQUESTS: usize = 200;

#[tokio::test]
async fn sigterm_answers_requests_in_flight_and_exits_zero() {
    let server = NatsServer::start().await;
    let project = unique_name("term");
    let mut owner =
        OwnerProcess::start(&server.url(), &project, &[("ABI_LEASE_SECONDS", "600")]).await;
    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(CALL_TIMEOUT))
        .connect(server.url())
        .await
        .unwrap();
    let rpc = Rpc::new(client.clone(), &project);

    let mut calls = FuturesUnordered::new();
    for i in 0..REQUESTS {
        let client = client.clone();
        let subject = abi_wire::discovery::operation(&rpc.project, Operation::Register);
        calls.push(async move {
            let module = format!("m{i}");
            let mut headers = HeaderMap::new();
            headers.insert(abi_auth::AUTH_HEADER, module_token(&module).as_str());
            let payload = register_request(&module, &format!("i{i}")).encode_to_vec();
            (
                i,
                client
                    .request_with_headers(subject, headers, payload.into())
                    .await,
            )
        });
    }
    let mut acknowledged = BTreeSet::new();
    let mut no_responders = 0;
    let mut signalled = false;
    while let Some((i, result)) = calls.next().await {
        match result {
            Ok(reply) => {
                let reply = pb::RegisterResponse::decode(reply.payload).unwrap();
                assert_eq!(reply.error, None, "request {i}");
                acknowledged.insert(format!("i{i}"));
            }
            // Sent after the owner stopped listening: refused at once, never lost.
            Err(e) if e.kind() == RequestErrorKind::NoResponders => no_responders += 1,
            Err(e) => panic!("request {i} failed: {e}; stderr:\n{}", owner.stderr_text()),
        }
        if !signalled {
            // The first answer is back and the others are in flight: stop now.
            owner.signal("TERM");
            signalled = true;
        }
    }
    let status = owner.wait().await;
    assert!(
        status.success(),
        "exit {status:?}; stderr:\n{}",
        owner.stderr_text()
    );
    assert_eq!(acknowledged.len() + no_responders, REQUESTS);
    assert!(
        acknowledged.len() > 1,
        "only {} answered",
        acknowledged.len()
    );

    let stored: BTreeSet<String> = snapshot(&client, &project)
        .await
        .records
        .into_iter()
        .map(|r| r.instance.unwrap().instance_id)
        .collect();
    // Every request received was answered, so the registry holds exactly the
    // acknowledged registrations.
    assert_eq!(stored, acknowledged);
}

#[tokio::test]
async fn sigterm_under_load_with_a_peer_loses_no_request() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    let server = NatsServer::start().await;
    let project = unique_name("roll");
    let env = [("ABI_LEASE_SECONDS", "600")];
    let mut leaving = OwnerProcess::start(&server.url(), &project, &env).await;
    let _staying = OwnerProcess::start(&server.url(), &project, &env).await;
    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(std::time::Duration::from_secs(10)))
        .connect(server.url())
        .await
        .unwrap();
    wait_for_owners(&client, 2).await;
    let p = abi_wire::discovery::Project::new(&project).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let answered = Arc::new(AtomicU32::new(0));

    // Workers call without pause until told to stop; a call that is not answered
    // (lost in the stopping owner) fails the test.
    let mut workers = Vec::new();
    for w in 0..8 {
        let (client, p, stop) = (client.clone(), p.clone(), stop.clone());
        let answered = Arc::clone(&answered);
        workers.push(tokio::spawn(async move {
            let module = format!("w{w}");
            let token = module_token(&module);
            let mut n = 0_u32;
            while !stop.is_cancelled() {
                n += 1;
                let mut headers = HeaderMap::new();
                headers.insert(abi_auth::AUTH_HEADER, token.as_str());
                // Mutations and lookups alike: renewals go through the writer.
                let (op, payload) = if n == 1 {
                    let req = register_request(&module, &module);
                    (Operation::Register, req.encode_to_vec())
                } else if n.is_multiple_of(2) {
                    let req = requests::renew_request(&module, false);
                    (Operation::Renew, req.encode_to_vec())
                } else {
                    let req = pb::ListModulesRequest {
                        limit: 10,
                        ..Default::default()
                    };
                    (Operation::ListModules, req.encode_to_vec())
                };
                let subject = abi_wire::discovery::operation(&p, op);
                if let Err(e) = client
                    .request_with_headers(subject, headers, payload.into())
                    .await
                {
                    panic!("worker {w} call {n} lost: {e}");
                }
                answered.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let reached = |target: u32| {
        let answered = Arc::clone(&answered);
        abi_test_support::wait_until(CALL_TIMEOUT, move || {
            let answered = Arc::clone(&answered);
            async move { answered.load(Ordering::Relaxed) >= target }
        })
    };
    // Load on both owners, then stop one of them under it, then more load.
    reached(500)
        .await
        .expect("500 calls answered before the stop");
    leaving.signal("TERM");
    let status = leaving.wait().await;
    assert!(
        status.success(),
        "exit {status:?}; stderr:\n{}",
        leaving.stderr_text()
    );
    let at_exit = answered.load(Ordering::Relaxed);
    reached(at_exit + 500)
        .await
        .expect("the survivor keeps answering");
    stop.cancel();
    for worker in workers {
        worker.await.expect("no call was lost");
    }
}
