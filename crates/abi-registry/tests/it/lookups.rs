//! Lookups (get, list, view) and the provider-side authorization decisions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::*;
use abi_registry::{prune_expired, view};
use prost::Message;

#[test]
fn pages_walk_every_instance_in_order_and_show_no_credentials() {
    let mut reg = Registry::new();
    for id in ["c", "a", "b"] {
        reg.register(&registration(id, id, &[])).unwrap();
    }
    let first = reg.list(2, "").unwrap();
    assert_eq!(first.next_after_instance_id, "b");
    let second = reg.list(2, &first.next_after_instance_id).unwrap();
    let ids: Vec<_> = first
        .instances
        .iter()
        .chain(&second.instances)
        .map(|i| i.instance_id.as_str())
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(second.next_after_instance_id, "");

    let bytes = first.encode_to_vec();
    let contains = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(!contains(OWNER.as_bytes()));
    assert!(!contains("a".repeat(32).as_bytes()));
}

#[test]
fn a_page_that_ends_the_list_has_no_next_cursor() {
    let mut reg = Registry::new();
    for id in ["a", "b", "c"] {
        reg.register(&registration(id, id, &[])).unwrap();
    }
    let all = reg.list(3, "").unwrap();
    assert_eq!(all.instances.len(), 3);
    assert_eq!(all.next_after_instance_id, "");
    let rest = reg.list(100, "a").unwrap();
    assert_eq!(rest.instances.len(), 2);
    assert!(reg.list(1, "c").unwrap().instances.is_empty());
}

#[test]
fn page_sizes_are_1_to_100() {
    let reg = Registry::new();
    for limit in [0, 101, u32::MAX] {
        assert_refused(
            reg.list(limit, ""),
            "INVALID_ARGUMENT: Page size must be 1..100",
        );
    }
    assert!(reg.list(100, "").unwrap().instances.is_empty());
    assert!(reg.list(1, "").unwrap().instances.is_empty());
}

#[test]
fn get_module_checks_its_request_then_finds_the_contract() {
    let mut reg = Registry::new();
    reg.register(&registration("a", "a-2", &[])).unwrap();
    reg.register(&registration("a", "a-1", &[])).unwrap();
    assert_refused(
        reg.get_module("bad.*", 1),
        "INVALID_ARGUMENT: Module identity and contract required",
    );
    assert_refused(
        reg.get_module("a", 0),
        "INVALID_ARGUMENT: Module identity and contract required",
    );
    assert_refused(reg.get_module("billing", 1), "MODULE_NOT_FOUND: billing");
    assert_refused(reg.get_module("a", 2), "INCOMPATIBLE_MODULE: a");
    let found = reg.get_module("a", 1).unwrap();
    let ids: Vec<_> = found
        .instances
        .iter()
        .map(|i| i.instance_id.as_str())
        .collect();
    assert_eq!(ids, ["a-1", "a-2"]);
    assert!(found.error.is_none());
}

#[test]
fn lookups_hide_expired_instances_and_never_change_the_snapshot() {
    let mut reg = Registry::new();
    let a = registration("a", "a", &["b"]);
    reg.up(&registration("b", "b", &[]));
    reg.now = 10.0;
    reg.up(&a);
    let stored = reg.bytes();

    reg.now = 25.0; // b expired at 20, a lives until 30.
    assert_eq!(reg.listed(), ["a"]);
    assert_eq!(reg.statuses("a", 1), statuses(&[("a", "DEGRADED")]));
    assert_refused(reg.get_module("b", 1), "MODULE_NOT_FOUND: b");
    // The snapshot still holds b, with the statuses of the last write.
    assert_eq!(reg.bytes(), stored);
    assert_eq!(reg.state.records.len(), 2);

    let live = view(&reg.state, reg.now);
    assert_eq!(live.records.len(), 1);
    assert_eq!(
        live.records[0].instance.as_ref().unwrap().status,
        "DEGRADED"
    );
    assert_eq!(reg.bytes(), stored);

    let mut pruned = reg.state.clone();
    prune_expired(&mut pruned, reg.now);
    assert_eq!(pruned.records.len(), 1);
    // A record expiring exactly now is gone too.
    prune_expired(&mut pruned, 30.0);
    assert!(pruned.records.is_empty());
}

fn provider() -> pb::RegisterRequest {
    let req = with_agent(registration("provider", "instance", &[]), "Researcher");
    let req = with_model(req, "writer");
    with_app(req, app("console"))
}

fn agent_call(req: &pb::RegisterRequest, new_invocation: bool) -> pb::AuthorizeAgentRequest {
    pb::AuthorizeAgentRequest {
        instance_id: req.instance_id.clone(),
        lease_token: req.lease_token.clone(),
        agent_name: "Researcher".into(),
        new_invocation,
        ..Default::default()
    }
}

#[test]
fn agent_calls_need_the_provider_lease_and_submits_need_readiness() {
    let mut reg = Registry::new();
    let req = provider();
    reg.register_as(&req, "provider-identity").unwrap();
    let rules = reg.rules.clone();
    let decide = |reg: &Registry, call: &pb::AuthorizeAgentRequest, owner: &str| {
        rules.authorize_agent(&reg.state, call, owner, reg.now)
    };

    assert_refused(
        decide(&reg, &agent_call(&req, true), "provider-identity"),
        "MODULE_UNAVAILABLE: Provider is not ready",
    );
    // Status, event and cancel polls only need the lease.
    assert_eq!(
        decide(&reg, &agent_call(&req, false), "provider-identity").unwrap(),
        pb::AuthorizeAgentResponse::default()
    );
    reg.renew_with(renewal(&req, true), "provider-identity")
        .unwrap();
    decide(&reg, &agent_call(&req, true), "provider-identity").unwrap();

    assert_refused(
        decide(&reg, &agent_call(&req, true), "other-identity"),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    let mut wrong = agent_call(&req, true);
    wrong.lease_token = "wrong".into();
    assert_refused(
        decide(&reg, &wrong, "provider-identity"),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    let mut missing = agent_call(&req, false);
    missing.agent_name = "Missing".into();
    assert_refused(
        decide(&reg, &missing, "provider-identity"),
        "AGENT_NOT_FOUND: Missing",
    );
    let mut gone = agent_call(&req, false);
    gone.instance_id = "gone".into();
    assert_refused(
        decide(&reg, &gone, "provider-identity"),
        "LEASE_EXPIRED: Provider registration expired",
    );
    // Leases are judged by the clock given, not by what was stored.
    reg.now = 20.0;
    assert_refused(
        decide(&reg, &agent_call(&req, false), "provider-identity"),
        "LEASE_EXPIRED: Provider registration expired",
    );
}

#[test]
fn an_agent_without_the_invoke_capability_is_not_found() {
    let mut reg = Registry::new();
    let mut req = registration("provider", "instance", &[]);
    descriptor(&mut req).agents.push(pb::AgentDescriptor {
        name: "Researcher".into(),
        contract_major: 1,
        capabilities: vec!["agent.describe.v1".into()],
        ..Default::default()
    });
    reg.up(&req);
    assert_refused(
        reg.rules
            .authorize_agent(&reg.state, &agent_call(&req, false), OWNER, reg.now),
        "AGENT_NOT_FOUND: Researcher",
    );
}

#[test]
fn model_calls_need_the_provider_lease_and_readiness() {
    let mut reg = Registry::new();
    let req = provider();
    reg.register_as(&req, "provider-identity").unwrap();
    let mut call = pb::AuthorizeModelRequest {
        instance_id: "instance".into(),
        lease_token: req.lease_token.clone(),
        model_name: "writer".into(),
        ..Default::default()
    };
    let decide = |reg: &Registry, call: &pb::AuthorizeModelRequest, owner: &str| {
        reg.rules.authorize_model(&reg.state, call, owner, reg.now)
    };
    assert_refused(
        decide(&reg, &call, "provider-identity"),
        "MODULE_UNAVAILABLE: Provider is not ready",
    );
    reg.renew_with(renewal(&req, true), "provider-identity")
        .unwrap();
    assert_eq!(
        decide(&reg, &call, "provider-identity").unwrap(),
        pb::AuthorizeModelResponse::default()
    );
    assert_refused(
        decide(&reg, &call, "someone-else"),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    call.model_name = "missing".into();
    assert_refused(
        decide(&reg, &call, "provider-identity"),
        "MODEL_NOT_FOUND: missing",
    );
    call.instance_id = "gone".into();
    assert_refused(
        decide(&reg, &call, "provider-identity"),
        "LEASE_EXPIRED: Provider registration expired",
    );
}

#[test]
fn app_requests_need_the_provider_lease_and_readiness() {
    let mut reg = Registry::new();
    let req = provider();
    reg.register_as(&req, "provider-identity").unwrap();
    let mut call = pb::AuthorizeAppRequest {
        instance_id: "instance".into(),
        lease_token: req.lease_token.clone(),
        app_name: "console".into(),
        ..Default::default()
    };
    let decide = |reg: &Registry, call: &pb::AuthorizeAppRequest, owner: &str| {
        reg.rules.authorize_app(&reg.state, call, owner, reg.now)
    };
    assert_refused(
        decide(&reg, &call, "provider-identity"),
        "MODULE_UNAVAILABLE: Provider is not ready",
    );
    reg.renew_with(renewal(&req, true), "provider-identity")
        .unwrap();
    assert_eq!(
        decide(&reg, &call, "provider-identity").unwrap(),
        pb::AuthorizeAppResponse::default()
    );
    assert_refused(
        decide(&reg, &call, "someone-else"),
        "PERMISSION_DENIED: Registration belongs to another lease or caller",
    );
    call.app_name = "missing".into();
    assert_refused(
        decide(&reg, &call, "provider-identity"),
        "APP_NOT_FOUND: missing",
    );
    call.instance_id = "gone".into();
    assert_refused(
        decide(&reg, &call, "provider-identity"),
        "LEASE_EXPIRED: Provider registration expired",
    );
}

#[test]
fn a_degraded_or_staged_provider_is_not_ready() {
    let mut reg = Registry::new();
    let req = with_model(registration("provider", "p", &["missing"]), "writer");
    reg.up(&req);
    let call = pb::AuthorizeModelRequest {
        instance_id: "p".into(),
        lease_token: req.lease_token.clone(),
        model_name: "writer".into(),
        ..Default::default()
    };
    assert_eq!(reg.statuses("provider", 1)["p"], "DEGRADED");
    assert_refused(
        reg.rules.authorize_model(&reg.state, &call, OWNER, reg.now),
        "MODULE_UNAVAILABLE: Provider is not ready",
    );

    let mut reg = Registry::new();
    reg.up(&registration("provider", "old", &[]));
    let staged = in_rollout(
        with_model(registration("provider", "new", &[]), "writer"),
        "release-2",
        &["provider", "other"],
    );
    reg.up(&staged);
    assert_eq!(reg.statuses("provider", 1)["new"], "STAGED");
    let call = pb::AuthorizeModelRequest {
        instance_id: "new".into(),
        lease_token: staged.lease_token.clone(),
        model_name: "writer".into(),
        ..Default::default()
    };
    assert_refused(
        reg.rules.authorize_model(&reg.state, &call, OWNER, reg.now),
        "MODULE_UNAVAILABLE: Provider is not ready",
    );
}
