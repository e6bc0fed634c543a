//! Two owner processes on one bucket: under concurrent load nothing acknowledged is
//! lost or duplicated, and killing one (-9) mid-burst loses no acknowledged
//! registration while the other keeps serving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::edges_common;

use std::collections::BTreeSet;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use abi_test_support::{NatsServer, WireCallError, unique_name};
use abi_wire::discovery::{Operation, Project};
use edges_common::binary::OwnerProcess;
use edges_common::*;
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;

const LEASE: (&str, &str) = ("ABI_LEASE_SECONDS", "600");

/// Sends one request; `None` when it got no reply (timeout, no responders).
async fn try_call<R: prost::Message + Default>(
    client: &async_nats::Client,
    project: &Project,
    op: Operation,
    token: &str,
    request: &impl prost::Message,
) -> Option<R> {
    match Rpc::new(client.clone(), project.as_str())
        .try_call(op, Some(token), request)
        .await
    {
        Ok(reply) => Some(reply),
        Err(WireCallError::Decode(e)) => panic!("{} reply does not decode: {e}", op.as_str()),
        Err(_) => None,
    }
}

async fn stored_ids(client: &async_nats::Client, project: &str) -> Vec<String> {
    snapshot(client, project)
        .await
        .records
        .into_iter()
        .map(|r| r.instance.unwrap().instance_id)
        .collect()
}

/// `$SRV.STATS` of every owner: (id, register requests).
async fn register_counts(client: &async_nats::Client, owners: usize) -> Vec<(String, u64)> {
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply("$SRV.STATS.abi-discovery", inbox, "".into())
        .await
        .unwrap();
    let mut counts = Vec::new();
    while counts.len() < owners {
        let msg = tokio::time::timeout(CALL_TIMEOUT, replies.next())
            .await
            .expect("every owner answers $SRV.STATS")
            .unwrap();
        let stats: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap();
        let register = stats["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "register")
            .unwrap()["num_requests"]
            .as_u64()
            .unwrap();
        counts.push((stats["id"].as_str().unwrap().to_owned(), register));
    }
    counts
}

#[tokio::test]
async fn two_owners_under_concurrent_load_lose_and_duplicate_nothing() {
    let server = NatsServer::start().await;
    let project = unique_name("two");
    let _a = OwnerProcess::start(&server.url(), &project, &[LEASE]).await;
    let _b = OwnerProcess::start(&server.url(), &project, &[LEASE]).await;
    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(CALL_TIMEOUT))
        .connect(server.url())
        .await
        .unwrap();
    wait_for_owners(&client, 2).await;
    let p = Project::new(&project).unwrap();

    // Per module: register, renew, and for every third unregister, in order; modules
    // run concurrently.
    let mut flows = FuturesUnordered::new();
    for i in 0..150 {
        let (client, p) = (client.clone(), p.clone());
        flows.push(async move {
            let module = format!("m{i}");
            let instance = format!("i{i}");
            let token = module_token(&module);
            let registered: pb::RegisterResponse = try_call(
                &client,
                &p,
                Operation::Register,
                &token,
                &register_request(&module, &instance),
            )
            .await
            .expect("register answered");
            let registered = registered.error.is_none();
            let renewed: pb::RenewResponse = try_call(
                &client,
                &p,
                Operation::Renew,
                &token,
                &requests::renew_request(&instance, true),
            )
            .await
            .expect("renew answered");
            if registered {
                // Contention may refuse a renewal (REGISTRY_BUSY); a stale refusal
                // (LEASE_EXPIRED) is checked by `each_owner_sees_the_other_owners_writes`.
                let code = renewed.error.as_ref().map_or("", |e| e.code.as_str());
                assert!(
                    ["", "REGISTRY_BUSY", "LEASE_EXPIRED"].contains(&code),
                    "renew of {instance}: {code}"
                );
            }
            let mut unregistered = false;
            if i % 3 == 0 {
                let gone: pb::UnregisterResponse = try_call(
                    &client,
                    &p,
                    Operation::Unregister,
                    &token,
                    &requests::unregister_request(&instance),
                )
                .await
                .expect("unregister answered");
                unregistered = gone.error.is_none();
            }
            (instance, registered, unregistered)
        });
    }
    let mut expected = BTreeSet::new();
    let mut acknowledged = 0;
    while let Some((instance, registered, unregistered)) = flows.next().await {
        if registered {
            acknowledged += 1;
        }
        if registered && !unregistered {
            expected.insert(instance);
        }
    }
    // REGISTRY_BUSY is allowed under contention, but most must get through.
    assert!(
        acknowledged > 100,
        "only {acknowledged} registrations acknowledged"
    );

    let stored = stored_ids(&client, &project).await;
    let unique: BTreeSet<String> = stored.iter().cloned().collect();
    assert_eq!(unique.len(), stored.len(), "duplicated records: {stored:?}");
    assert_eq!(unique, expected);

    let counts = register_counts(&client, 2).await;
    assert!(
        counts.iter().all(|(_, n)| *n > 0),
        "both owners serve: {counts:?}"
    );
}

/// Read-your-writes across owners: a renewal right after an acknowledged
/// registration succeeds whichever owner answers each (the queue group picks at
/// random, so about half the renewals go to the owner that did not register).
#[tokio::test]
async fn each_owner_sees_the_other_owners_writes() {
    let server = NatsServer::start().await;
    let project = unique_name("ryw");
    let _a = OwnerProcess::start(&server.url(), &project, &[LEASE]).await;
    let _b = OwnerProcess::start(&server.url(), &project, &[LEASE]).await;
    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(CALL_TIMEOUT))
        .connect(server.url())
        .await
        .unwrap();
    wait_for_owners(&client, 2).await;
    let p = Project::new(&project).unwrap();
    let mut refused = Vec::new();
    for i in 0..40 {
        let module = format!("m{i}");
        let instance = format!("i{i}");
        let token = module_token(&module);
        let registered: pb::RegisterResponse = try_call(
            &client,
            &p,
            Operation::Register,
            &token,
            &register_request(&module, &instance),
        )
        .await
        .expect("register answered");
        assert_eq!(registered.error, None, "register {instance}");
        let renewed: pb::RenewResponse = try_call(
            &client,
            &p,
            Operation::Renew,
            &token,
            &requests::renew_request(&instance, false),
        )
        .await
        .expect("renew answered");
        if let Some(error) = renewed.error {
            refused.push(format!("{instance}: {}", error.message));
        }
    }
    // See tests/edges_common/FINDINGS.md when this fails.
    assert!(
        refused.is_empty(),
        "renewals refused after an acknowledged registration: {refused:?}"
    );
}

#[tokio::test]
async fn kill_9_mid_burst_loses_no_acknowledged_registration() {
    let server = NatsServer::start().await;
    let project = unique_name("kill");
    let a = OwnerProcess::start(&server.url(), &project, &[LEASE]).await;
    let _b = OwnerProcess::start(&server.url(), &project, &[LEASE]).await;
    // Requests that went to the killed owner time out; keep that short.
    let client = async_nats::ConnectOptions::new()
        .request_timeout(Some(Duration::from_secs(5)))
        .connect(server.url())
        .await
        .unwrap();
    wait_for_owners(&client, 2).await;
    let p = Project::new(&project).unwrap();

    let mut calls = FuturesUnordered::new();
    for i in 0..200 {
        let (client, p) = (client.clone(), p.clone());
        calls.push(async move {
            let module = format!("m{i}");
            let instance = format!("i{i}");
            let reply: Option<pb::RegisterResponse> = try_call(
                &client,
                &p,
                Operation::Register,
                &module_token(&module),
                &register_request(&module, &instance),
            )
            .await;
            (instance, reply)
        });
    }
    let mut acknowledged = BTreeSet::new();
    let mut answers = 0;
    let mut killed = false;
    while let Some((instance, reply)) = calls.next().await {
        if let Some(reply) = reply {
            answers += 1;
            if reply.error.is_none() {
                acknowledged.insert(instance);
            }
        }
        if !killed && answers >= 20 {
            a.signal("KILL");
            killed = true;
        }
    }
    assert!(killed);
    assert!(acknowledged.len() >= 20);

    let stored: BTreeSet<String> = stored_ids(&client, &project).await.into_iter().collect();
    let lost: Vec<_> = acknowledged.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");

    // The survivor serves alone now.
    let after: pb::RegisterResponse = try_call(
        &client,
        &p,
        Operation::Register,
        &module_token("after"),
        &register_request("after", "after-1"),
    )
    .await
    .expect("the surviving owner answers");
    assert_eq!(after.error, None);
    let found: pb::GetModuleResponse = try_call(
        &client,
        &p,
        Operation::GetModule,
        &service_token("api"),
        &pb::GetModuleRequest {
            module_id: "after".into(),
            contract_major: 1,
            ..Default::default()
        },
    )
    .await
    .expect("the surviving owner answers");
    assert_eq!(found.instances.len(), 1);
}
