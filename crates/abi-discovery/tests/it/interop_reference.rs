//! The Python reference owner and ours: on one bucket, serving together in one queue
//! group; and side by side, answering the same requests with the same bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::edges_common;

use std::collections::BTreeSet;

use abi_proto::discovery::v1 as pb;
use abi_test_support::{NatsServer, unique_name};
use abi_test_support::{ReferenceOwner, reference_dump};
use abi_wire::discovery::Operation;
use async_nats::HeaderMap;
use edges_common::*;
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use prost::Message as _;

const MODULES: usize = 60;

async fn our_count(rpc: &Rpc, op: &str) -> u64 {
    let reply = rpc
        .client
        .request("$SRV.STATS.abi-discovery", "".into())
        .await
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
    stats["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == op)
        .unwrap()["num_requests"]
        .as_u64()
        .unwrap()
}

#[tokio::test]
async fn reference_and_ours_share_a_bucket_and_a_queue_group() {
    let server = NatsServer::start().await;
    let project = unique_name("mixed");
    // The reference creates the bucket; ours opens it.
    let reference = ReferenceOwner::start(&server.url(), SECRET, &project, 600).await;
    let ours = Owner::start(&server.url(), &project, &["--lease-seconds", "600"]).await;
    let rpc = Rpc::connect(&server.url(), &project).await;
    // The reference answered the readiness probe; wait until ours serves too.
    wait_for_owners(&rpc.client, 1).await;
    let registers_before = our_count(&rpc, "register").await;

    // Registrations spread over both owners by the queue group.
    let mut calls = FuturesUnordered::new();
    for i in 0..MODULES {
        let rpc = rpc.clone();
        calls.push(async move {
            let module = format!("m{i}");
            let reply: pb::RegisterResponse = rpc
                .call(
                    Operation::Register,
                    Some(&module_token(&module)),
                    &register_request(&module, &format!("i{i}")),
                )
                .await;
            (i, reply)
        });
    }
    while let Some((i, reply)) = calls.next().await {
        assert_eq!(reply.error, None, "register {i}");
    }
    let ours_served = our_count(&rpc, "register").await - registers_before;
    assert!(
        0 < ours_served && ours_served < MODULES as u64,
        "both owners serve registrations (ours: {ours_served} of {MODULES}); reference stderr:\n{}",
        reference.stderr_text()
    );

    // Every registration is visible through whichever owner answers.
    let expected: BTreeSet<String> = (0..MODULES).map(|i| format!("i{i}")).collect();
    let lists_before = our_count(&rpc, "list_modules").await;
    let lookups = 30;
    for _ in 0..lookups {
        let mut seen = BTreeSet::new();
        let mut after = String::new();
        loop {
            let page: pb::ListModulesResponse = rpc
                .call(
                    Operation::ListModules,
                    Some(&service_token("api")),
                    &pb::ListModulesRequest {
                        limit: 100,
                        after_instance_id: after.clone(),
                        ..Default::default()
                    },
                )
                .await;
            assert_eq!(page.error, None);
            seen.extend(page.instances.into_iter().map(|i| i.instance_id));
            if page.next_after_instance_id.is_empty() {
                break;
            }
            after = page.next_after_instance_id;
        }
        assert_eq!(seen, expected);
    }
    let ours_listed = our_count(&rpc, "list_modules").await - lists_before;
    assert!(
        0 < ours_listed && ours_listed < lookups,
        "both owners answered lookups (ours: {ours_listed} of {lookups})"
    );
    for i in [0, MODULES / 2, MODULES - 1] {
        let found: pb::GetModuleResponse = rpc
            .call(
                Operation::GetModule,
                Some(&service_token("api")),
                &pb::GetModuleRequest {
                    module_id: format!("m{i}"),
                    contract_major: 1,
                    ..Default::default()
                },
            )
            .await;
        assert_eq!(found.instances.len(), 1, "m{i}");
    }

    // The snapshot decodes the same on both sides.
    let ours_decoded: BTreeSet<(String, String)> = snapshot(&rpc.client, &project)
        .await
        .records
        .into_iter()
        .map(|r| (r.instance.unwrap().instance_id, r.owner))
        .collect();
    let theirs: BTreeSet<(String, String)> = reference_dump(&server.url(), &project)
        .await
        .into_iter()
        .collect();
    assert_eq!(ours_decoded, theirs);
    assert_eq!(ours_decoded.len(), MODULES);
    assert!(
        ours_decoded
            .iter()
            .all(|(id, owner)| owner == &format!("m{}", &id[1..]))
    );

    ours.stop().await.unwrap();
    assert!(reference.stop().await, "the reference owner stops cleanly");
}

/// One request to send to both owners.
struct Case {
    name: &'static str,
    op: Operation,
    headers: Vec<(&'static str, String)>,
    payload: Vec<u8>,
}

fn case(name: &'static str, op: Operation, token: Option<String>, payload: Vec<u8>) -> Case {
    Case {
        name,
        op,
        headers: token
            .map(|t| vec![(abi_auth::AUTH_HEADER, t)])
            .unwrap_or_default(),
        payload,
    }
}

#[tokio::test]
async fn same_requests_get_the_same_reply_bytes() {
    let server = NatsServer::start().await;
    let (theirs_project, ours_project) = (unique_name("ref"), unique_name("ours"));
    let reference = ReferenceOwner::start(&server.url(), SECRET, &theirs_project, 600).await;
    let ours = Owner::start(&server.url(), &ours_project, &["--lease-seconds", "600"]).await;
    let theirs_rpc = Rpc::connect(&server.url(), &theirs_project).await;
    let ours_rpc = Rpc::connect(&server.url(), &ours_project).await;

    let research = module_token("research");
    let api = service_token("api");
    let renew = |id: &str| pb::RenewRequest {
        instance_id: id.into(),
        lease_token: requests::lease_token(id),
        ..Default::default()
    };
    let authorize = |caller: String, agent: &str| pb::AuthorizeAgentRequest {
        instance_id: "r1".into(),
        lease_token: requests::lease_token("r1"),
        agent_name: agent.into(),
        caller_token: caller,
        new_invocation: true,
        ..Default::default()
    };
    let mut with_overflow = case(
        "overflow header",
        Operation::ListModules,
        Some(api.clone()),
        pb::ListModulesRequest {
            limit: 1,
            ..Default::default()
        }
        .encode_to_vec(),
    );
    with_overflow
        .headers
        .push(("Abi-Overflow-Request", "t1".to_owned()));
    let cases = vec![
        case(
            "no token",
            Operation::ListModules,
            None,
            pb::ListModulesRequest::default().encode_to_vec(),
        ),
        case(
            "bad token",
            Operation::Register,
            Some("x.y.z".into()),
            Vec::new(),
        ),
        case(
            "malformed",
            Operation::Register,
            Some(research.clone()),
            vec![0xff, 0xff],
        ),
        case(
            "too large",
            Operation::Renew,
            Some(research.clone()),
            vec![0; 512 * 1024 + 1],
        ),
        with_overflow,
        case(
            "foreign register",
            Operation::Register,
            Some(module_token("billing")),
            register_request("research", "r1").encode_to_vec(),
        ),
        case(
            "register",
            Operation::Register,
            Some(research.clone()),
            register_request("research", "r1").encode_to_vec(),
        ),
        case(
            "renew unknown",
            Operation::Renew,
            Some(research.clone()),
            renew("zz").encode_to_vec(),
        ),
        case(
            "renew foreign",
            Operation::Renew,
            Some(module_token("billing")),
            renew("r1").encode_to_vec(),
        ),
        case(
            "authorize ok",
            Operation::AuthorizeAgent,
            Some(research.clone()),
            authorize(bound_service_token("api", "r1"), "Researcher").encode_to_vec(),
        ),
        case(
            "authorize module caller",
            Operation::AuthorizeAgent,
            Some(research.clone()),
            authorize(bound_module_token("consumer", "r1"), "Researcher").encode_to_vec(),
        ),
        case(
            "authorize unbound caller",
            Operation::AuthorizeAgent,
            Some(research.clone()),
            authorize(service_token("api"), "Researcher").encode_to_vec(),
        ),
        case(
            "authorize unknown agent",
            Operation::AuthorizeAgent,
            Some(research.clone()),
            authorize(bound_service_token("api", "r1"), "Nobody").encode_to_vec(),
        ),
        case(
            "get unknown",
            Operation::GetModule,
            Some(api.clone()),
            pb::GetModuleRequest {
                module_id: "nobody".into(),
                contract_major: 1,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        case(
            "get wrong major",
            Operation::GetModule,
            Some(api.clone()),
            pb::GetModuleRequest {
                module_id: "research".into(),
                contract_major: 9,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        case(
            "list bad limit",
            Operation::ListModules,
            Some(api.clone()),
            pb::ListModulesRequest::default().encode_to_vec(),
        ),
        case(
            "evict non-admin",
            Operation::Evict,
            Some(research.clone()),
            pb::EvictRequest {
                instance_id: "r1".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        case(
            "evict unknown",
            Operation::Evict,
            Some(api.clone()),
            pb::EvictRequest {
                instance_id: "zz".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        case(
            "unregister",
            Operation::Unregister,
            Some(research.clone()),
            requests::unregister_request("r1").encode_to_vec(),
        ),
    ];
    for case in cases {
        let headers = || {
            let mut map = HeaderMap::new();
            for (k, v) in &case.headers {
                map.insert(*k, v.as_str());
            }
            map
        };
        let theirs = theirs_rpc
            .raw(case.op, headers(), case.payload.clone())
            .await;
        let mine = ours_rpc.raw(case.op, headers(), case.payload.clone()).await;
        if case.name == "register" {
            // The expiry is a timestamp and the reference's lease_seconds what is
            // left of it when answering: compare those roughly, the rest exactly.
            let strip = |bytes: &[u8]| {
                let mut reply = pb::RegisterResponse::decode(bytes).unwrap();
                reply.instance.as_mut().unwrap().expires_at = 0.0;
                assert!((590.0..=600.0).contains(&reply.lease_seconds), "{reply:?}");
                reply.lease_seconds = 0.0;
                reply
            };
            assert_eq!(strip(&mine), strip(&theirs), "{}", case.name);
            continue;
        }
        assert_eq!(
            mine,
            theirs,
            "{}: ours {:?} vs reference {:?}",
            case.name,
            String::from_utf8_lossy(&mine),
            String::from_utf8_lossy(&theirs)
        );
    }

    ours.stop().await.unwrap();
    assert!(reference.stop().await, "the reference owner stops cleanly");
}
