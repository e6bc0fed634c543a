//! SIGTERM while requests are in flight: they are answered, the registrations
//! acknowledged are in the registry, and the process exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod edges_common;

use std::collections::BTreeSet;

use abi_discovery::subjects::{self, Operation};
use abi_proto::discovery::v1 as pb;
use abi_test_support::{NatsServer, unique_name};
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
    let rpc = Rpc {
        client: client.clone(),
        project: abi_discovery::subjects::Project::new(&project).unwrap(),
    };

    let mut calls = FuturesUnordered::new();
    for i in 0..REQUESTS {
        let client = client.clone();
        let subject = subjects::operation(&rpc.project, Operation::Register);
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
