//! Every operation end to end over a real nats-server, with real tokens (project
//! secret and module keys): successes and every error code the edge and the rules
//! give.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::edges_common;

use abi_proto::common::v1::CallError;
use abi_proto::discovery::v1 as pb;
use abi_test_support::{NatsServer, unique_name};
use abi_wire::discovery::Operation;
use async_nats::HeaderMap;
use edges_common::*;
use prost::Message as _;

fn code(error: &Option<CallError>) -> &str {
    error.as_ref().map_or("", |e| e.code.as_str())
}

fn message(error: &Option<CallError>) -> &str {
    error.as_ref().map_or("", |e| e.message.as_str())
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.insert(*k, *v);
    }
    map
}

struct Fixture {
    _server: NatsServer,
    owner: Owner,
    rpc: Rpc,
    project: String,
}

async fn fixture() -> Fixture {
    let server = NatsServer::start().await;
    let project = unique_name("ops");
    let owner = Owner::start(&server.url(), &project, &[]).await;
    let rpc = Rpc::connect(&server.url(), &project).await;
    Fixture {
        _server: server,
        owner,
        rpc,
        project,
    }
}

#[tokio::test]
async fn lifecycle_lookups_and_authorize() {
    let f = fixture().await;
    let rpc = &f.rpc;
    let research = module_token("research");

    let registered: pb::RegisterResponse = rpc
        .call(
            Operation::Register,
            Some(&research),
            &register_request("research", "r1"),
        )
        .await;
    assert_eq!(registered.error, None);
    assert_eq!(registered.lease_seconds, 20.0);
    assert_eq!(registered.instance.as_ref().unwrap().instance_id, "r1");

    let renewed: pb::RenewResponse = rpc
        .call(
            Operation::Renew,
            Some(&research),
            &requests::renew_request("r1", true),
        )
        .await;
    assert_eq!(renewed.error, None);
    assert_eq!(renewed.instance.unwrap().status, "READY");

    // Lookups need any valid token (here a module's).
    let consumer = module_token("consumer");
    let found: pb::GetModuleResponse = rpc
        .call(
            Operation::GetModule,
            Some(&consumer),
            &pb::GetModuleRequest {
                module_id: "research".into(),
                contract_major: 1,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(found.error, None);
    assert_eq!(found.instances.len(), 1);
    let listed: pb::ListModulesResponse = rpc
        .call(
            Operation::ListModules,
            Some(&consumer),
            &pb::ListModulesRequest {
                limit: 10,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(listed.instances.len(), 1);

    // authorize_agent: the provider asks about a caller whose token is bound to it.
    let ask = |caller_token: String, agent: &str| pb::AuthorizeAgentRequest {
        instance_id: "r1".into(),
        lease_token: requests::lease_token("r1"),
        agent_name: agent.into(),
        caller_token,
        new_invocation: true,
        ..Default::default()
    };
    let admin: pb::AuthorizeAgentResponse = rpc
        .call(
            Operation::AuthorizeAgent,
            Some(&research),
            &ask(bound_service_token("api", "r1"), "Researcher"),
        )
        .await;
    assert_eq!(admin.error, None);
    assert_eq!(admin.caller_identity, "api");
    assert!(admin.caller_admin);
    let module_caller: pb::AuthorizeAgentResponse = rpc
        .call(
            Operation::AuthorizeAgent,
            Some(&research),
            &ask(bound_module_token("consumer", "r1"), "Researcher"),
        )
        .await;
    assert_eq!(module_caller.error, None);
    assert_eq!(module_caller.caller_identity, "consumer");
    assert!(!module_caller.caller_admin);
    for (token, why) in [
        (service_token("api"), "a token bound to no instance"),
        (
            bound_service_token("api", "r2"),
            "a token bound to another instance",
        ),
        (String::new(), "no caller token"),
    ] {
        let refused: pb::AuthorizeAgentResponse = rpc
            .call(
                Operation::AuthorizeAgent,
                Some(&research),
                &ask(token, "Researcher"),
            )
            .await;
        assert_eq!(code(&refused.error), "UNAUTHENTICATED", "{why}");
        assert_eq!(message(&refused.error), "Missing or invalid service token");
        assert_eq!(refused.caller_identity, "");
    }
    let unknown_agent: pb::AuthorizeAgentResponse = rpc
        .call(
            Operation::AuthorizeAgent,
            Some(&research),
            &ask(bound_service_token("api", "r1"), "Nobody"),
        )
        .await;
    assert_eq!(code(&unknown_agent.error), "AGENT_NOT_FOUND");
    assert_eq!(message(&unknown_agent.error), "AGENT_NOT_FOUND: Nobody");
    let model: pb::AuthorizeModelResponse = rpc
        .call(
            Operation::AuthorizeModel,
            Some(&research),
            &pb::AuthorizeModelRequest {
                instance_id: "r1".into(),
                lease_token: requests::lease_token("r1"),
                model_name: "none".into(),
                caller_token: bound_service_token("api", "r1"),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(code(&model.error), "MODEL_NOT_FOUND");
    let app: pb::AuthorizeAppResponse = rpc
        .call(
            Operation::AuthorizeApp,
            Some(&research),
            &pb::AuthorizeAppRequest {
                instance_id: "r1".into(),
                lease_token: requests::lease_token("r1"),
                app_name: "none".into(),
                caller_token: bound_service_token("api", "r1"),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(code(&app.error), "APP_NOT_FOUND");

    // Lookups' own refusals.
    for (module_id, major, expected) in [
        ("nobody", 1, "MODULE_NOT_FOUND"),
        ("research", 2, "INCOMPATIBLE_MODULE"),
        ("", 1, "INVALID_ARGUMENT"),
    ] {
        let refused: pb::GetModuleResponse = rpc
            .call(
                Operation::GetModule,
                Some(&consumer),
                &pb::GetModuleRequest {
                    module_id: module_id.into(),
                    contract_major: major,
                    ..Default::default()
                },
            )
            .await;
        assert_eq!(code(&refused.error), expected, "{module_id} v{major}");
        assert!(!refused.error.unwrap().retryable);
    }

    // Evict: admins only, and only what exists.
    let evict = |id: &str| pb::EvictRequest {
        instance_id: id.into(),
        ..Default::default()
    };
    let denied: pb::EvictResponse = rpc
        .call(Operation::Evict, Some(&consumer), &evict("r1"))
        .await;
    assert_eq!(code(&denied.error), "PERMISSION_DENIED");
    let missing: pb::EvictResponse = rpc
        .call(Operation::Evict, Some(&service_token("api")), &evict("zz"))
        .await;
    assert_eq!(code(&missing.error), "INSTANCE_NOT_FOUND");

    // Unregister, then the lease is gone.
    let gone: pb::UnregisterResponse = rpc
        .call(
            Operation::Unregister,
            Some(&research),
            &requests::unregister_request("r1"),
        )
        .await;
    assert_eq!(gone.error, None);
    let expired: pb::RenewResponse = rpc
        .call(
            Operation::Renew,
            Some(&research),
            &requests::renew_request("r1", false),
        )
        .await;
    assert_eq!(code(&expired.error), "LEASE_EXPIRED");

    // An admin evicts a live registration.
    let _: pb::RegisterResponse = rpc
        .call(
            Operation::Register,
            Some(&research),
            &register_request("research", "r3"),
        )
        .await;
    let evicted: pb::EvictResponse = rpc
        .call(
            Operation::Evict,
            Some(&service_token("engine")),
            &evict("r3"),
        )
        .await;
    assert_eq!(evicted.error, None);
    assert_eq!(evicted.instance.unwrap().instance_id, "r3");

    f.owner.stop().await.unwrap();
}

#[tokio::test]
async fn refused_mutations_change_nothing() {
    let f = fixture().await;
    let rpc = &f.rpc;
    let _: pb::RegisterResponse = rpc
        .call(
            Operation::Register,
            Some(&module_token("research")),
            &register_request("research", "r1"),
        )
        .await;
    let before = snapshot_bytes(&rpc.client, &f.project).await;
    assert!(!before.is_empty());

    // No token, a bad token, the header in another case, a token of another project.
    let forged = abi_auth::issue_service_token(
        "api",
        "another-secret",
        abi_auth::DEFAULT_TTL,
        std::time::SystemTime::now(),
        None,
    )
    .unwrap();
    let payload = register_request("research", "r9").encode_to_vec();
    for (name, value) in [
        ("X-Other", "x"),
        (abi_auth::AUTH_HEADER, "not-a-token"),
        ("nats-auth-token", module_token("research").as_str()),
        (abi_auth::AUTH_HEADER, forged.as_str()),
    ] {
        let reply = rpc
            .raw(
                Operation::Register,
                headers(&[(name, value)]),
                payload.clone(),
            )
            .await;
        let reply = pb::RegisterResponse::decode(reply).unwrap();
        assert_eq!(code(&reply.error), "UNAUTHENTICATED", "{name}");
        assert_eq!(message(&reply.error), "Missing or invalid service token");
    }

    // A module registering as another one.
    let foreign: pb::RegisterResponse = rpc
        .call(
            Operation::Register,
            Some(&module_token("billing")),
            &register_request("research", "r9"),
        )
        .await;
    assert_eq!(code(&foreign.error), "PERMISSION_DENIED");
    assert_eq!(
        message(&foreign.error),
        "PERMISSION_DENIED: Identity 'billing' cannot register module 'research': a module \
         registers with a token for its own module id"
    );
    // Another identity renewing, unregistering or evicting the registration.
    let renew: pb::RenewResponse = rpc
        .call(
            Operation::Renew,
            Some(&module_token("billing")),
            &requests::renew_request("r1", false),
        )
        .await;
    assert_eq!(code(&renew.error), "PERMISSION_DENIED");
    let unregister: pb::UnregisterResponse = rpc
        .call(
            Operation::Unregister,
            Some(&module_token("billing")),
            &requests::unregister_request("r1"),
        )
        .await;
    assert_eq!(code(&unregister.error), "PERMISSION_DENIED");
    // A module token claiming a first-party identity cannot be made valid.
    let evict = pb::EvictRequest {
        instance_id: "r1".into(),
        ..Default::default()
    };
    let fake_admin = abi_auth::issue_module_token(
        "api",
        SECRET,
        abi_auth::DEFAULT_TTL,
        std::time::SystemTime::now(),
        None,
    )
    .unwrap();
    let evicted: pb::EvictResponse = rpc.call(Operation::Evict, Some(&fake_admin), &evict).await;
    assert_eq!(code(&evicted.error), "UNAUTHENTICATED");

    assert_eq!(snapshot_bytes(&rpc.client, &f.project).await, before);
    f.owner.stop().await.unwrap();
}

#[tokio::test]
async fn size_caps_malformed_requests_and_missing_replies() {
    let f = fixture().await;
    let rpc = &f.rpc;
    let token = service_token("api");

    // Over 512 KiB (the test server allows 1 MiB).
    let big = vec![0_u8; 512 * 1024 + 1];
    let reply = rpc
        .raw(
            Operation::ListModules,
            headers(&[(abi_auth::AUTH_HEADER, &token)]),
            big,
        )
        .await;
    let reply = pb::ListModulesResponse::decode(reply).unwrap();
    assert_eq!(code(&reply.error), "PAYLOAD_TOO_LARGE");
    assert_eq!(
        message(&reply.error),
        "PAYLOAD_TOO_LARGE: Discovery request exceeds limit"
    );
    // An overflow upload announcement, whatever its size.
    let small = pb::ListModulesRequest {
        limit: 1,
        ..Default::default()
    }
    .encode_to_vec();
    let reply = rpc
        .raw(
            Operation::ListModules,
            headers(&[
                (abi_auth::AUTH_HEADER, &token),
                ("Abi-Overflow-Request", "transfer-1"),
            ]),
            small,
        )
        .await;
    assert_eq!(
        code(&pb::ListModulesResponse::decode(reply).unwrap().error),
        "PAYLOAD_TOO_LARGE"
    );
    // The token is checked before the size.
    let reply = rpc
        .raw(
            Operation::ListModules,
            HeaderMap::new(),
            vec![0; 600 * 1024],
        )
        .await;
    assert_eq!(
        code(&pb::ListModulesResponse::decode(reply).unwrap().error),
        "UNAUTHENTICATED"
    );
    // Bytes that are not the request message.
    let reply = rpc
        .raw(
            Operation::Register,
            headers(&[(abi_auth::AUTH_HEADER, &token)]),
            vec![0xff, 0xff, 0xff],
        )
        .await;
    let reply = pb::RegisterResponse::decode(reply).unwrap();
    assert_eq!(code(&reply.error), "INVALID_ARGUMENT");
    assert_eq!(message(&reply.error), "Malformed protobuf");

    // A request without a reply subject is dropped and counted ($SRV.STATS).
    let mut h = HeaderMap::new();
    h.insert(abi_auth::AUTH_HEADER, token.as_str());
    rpc.client
        .publish_with_headers(
            abi_wire::discovery::operation(&rpc.project, Operation::Register),
            h,
            register_request("api", "noreply").encode_to_vec().into(),
        )
        .await
        .unwrap();
    rpc.client.flush().await.unwrap();
    let stats_subject = "$SRV.STATS.abi-discovery";
    abi_test_support::wait_until(CALL_TIMEOUT, || async {
        let reply = rpc.client.request(stats_subject, "".into()).await.unwrap();
        let stats: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
        stats["endpoints"][0]["data"]["dropped_without_reply_total"] == 1
    })
    .await
    .expect("the dropped request is counted");
    f.owner.stop().await.unwrap();
}

#[tokio::test]
async fn micro_service_discovery() {
    let f = fixture().await;
    let rpc = &f.rpc;
    let listed: pb::ListModulesResponse = rpc
        .call(
            Operation::ListModules,
            Some(&service_token("api")),
            &pb::ListModulesRequest {
                limit: 0,
                ..Default::default()
            },
        )
        .await;
    assert_eq!(code(&listed.error), "INVALID_ARGUMENT");

    let ping = rpc.client.request("$SRV.PING", "".into()).await.unwrap();
    let ping: serde_json::Value = serde_json::from_slice(&ping.payload).unwrap();
    assert_eq!(ping["type"], "io.nats.micro.v1.ping_response");
    assert_eq!(ping["name"], "abi-discovery");
    let id = ping["id"].as_str().unwrap().to_owned();

    let info = rpc
        .client
        .request(format!("$SRV.INFO.abi-discovery.{id}"), "".into())
        .await
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&info.payload).unwrap();
    assert_eq!(info["type"], "io.nats.micro.v1.info_response");
    let endpoints = info["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 9);
    let queue =
        abi_wire::discovery::owners_queue(&abi_wire::discovery::Project::new(&f.project).unwrap());
    assert!(endpoints.iter().all(|e| e["queue_group"] == queue.as_str()));

    let stats = rpc
        .client
        .request("$SRV.STATS.abi-discovery", "".into())
        .await
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&stats.payload).unwrap();
    assert_eq!(stats["type"], "io.nats.micro.v1.stats_response");
    let list = stats["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "list_modules")
        .unwrap()
        .clone();
    // The readiness probe and the call above.
    assert!(list["num_requests"].as_u64().unwrap() >= 2, "{list}");
    assert!(list["num_errors"].as_u64().unwrap() >= 1, "{list}");
    assert_eq!(
        list["last_error"],
        "INVALID_ARGUMENT: Page size must be 1..100"
    );
    f.owner.stop().await.unwrap();
}
