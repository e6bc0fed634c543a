//! Lookups and authorization decisions over a snapshot as stored.

use abi_proto::discovery::v1 as pb;

use crate::error::{Error, ErrorCode, require};
use crate::lease::authorize;
use crate::patterns::name;
use crate::record;
use crate::status::READY;
use crate::view;

/// The capability an agent must declare to be invoked through the registry.
pub(crate) const AGENT_INVOKE_CAPABILITY: &str = "agent.invoke.v1";

/// Live instances of one module at one contract major, ordered by instance id.
pub(crate) fn get_module(
    state: &pb::RegistryState,
    req: &pb::GetModuleRequest,
    now: f64,
) -> Result<pb::GetModuleResponse, Error> {
    require(
        name(&req.module_id) && req.contract_major > 0,
        ErrorCode::InvalidArgument,
        "Module identity and contract required",
    )?;
    let live = view(state, now);
    let of_module: Vec<pb::Instance> = live
        .records
        .into_iter()
        .map(|r| r.instance.unwrap_or_default())
        .filter(|i| record::descriptor_of(i).module_id == req.module_id)
        .collect();
    require(
        !of_module.is_empty(),
        ErrorCode::ModuleNotFound,
        &req.module_id,
    )?;
    let mut matches: Vec<pb::Instance> = of_module
        .into_iter()
        .filter(|i| record::descriptor_of(i).contract_major == req.contract_major)
        .collect();
    require(
        !matches.is_empty(),
        ErrorCode::IncompatibleModule,
        &req.module_id,
    )?;
    matches.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    Ok(pb::GetModuleResponse {
        error: None,
        instances: matches,
    })
}

/// One page of live instances ordered by instance id, after
/// `after_instance_id`; `next_after_instance_id` is empty on the last page.
pub(crate) fn list_modules(
    state: &pb::RegistryState,
    req: &pb::ListModulesRequest,
    now: f64,
) -> Result<pb::ListModulesResponse, Error> {
    require(
        (1..=100).contains(&req.limit),
        ErrorCode::InvalidArgument,
        "Page size must be 1..100",
    )?;
    let live = view(state, now);
    let mut after: Vec<pb::Instance> = live
        .records
        .into_iter()
        .map(|r| r.instance.unwrap_or_default())
        .filter(|i| i.instance_id.as_str() > req.after_instance_id.as_str())
        .collect();
    after.sort_by(|a, b| a.instance_id.cmp(&b.instance_id));
    // `limit` is at most 100 here, so the conversion cannot truncate.
    let limit = req.limit as usize;
    let more = after.len() > limit;
    after.truncate(limit);
    let next = match after.last() {
        Some(last) if more => last.instance_id.clone(),
        _ => String::new(),
    };
    Ok(pb::ListModulesResponse {
        error: None,
        instances: after,
        next_after_instance_id: next,
    })
}

/// The live record of `instance_id` (statuses computed), after checking the
/// caller owns it with `token`.
fn provider(
    state: &pb::RegistryState,
    instance_id: &str,
    token: &str,
    owner: &str,
    now: f64,
) -> Result<pb::RegistryRecord, Error> {
    let live = view(state, now);
    let Some(found) = live
        .records
        .into_iter()
        .find(|r| record::instance_id(r) == instance_id)
    else {
        return Err(Error::new(
            ErrorCode::LeaseExpired,
            "Provider registration expired",
        ));
    };
    authorize(&found, token, owner)?;
    Ok(found)
}

fn require_ready(found: &pb::RegistryRecord) -> Result<(), Error> {
    require(
        record::status(found) == READY,
        ErrorCode::ModuleUnavailable,
        "Provider is not ready",
    )
}

/// Whether a provider may serve an agent call: its lease is live and its
/// own, the agent is declared invocable, and a new invocation needs READY.
pub(crate) fn authorize_agent(
    state: &pb::RegistryState,
    req: &pb::AuthorizeAgentRequest,
    owner: &str,
    now: f64,
) -> Result<pb::AuthorizeAgentResponse, Error> {
    let found = provider(state, &req.instance_id, &req.lease_token, owner, now)?;
    require(
        record::descriptor(&found).agents.iter().any(|a| {
            a.name == req.agent_name && a.capabilities.iter().any(|c| c == AGENT_INVOKE_CAPABILITY)
        }),
        ErrorCode::AgentNotFound,
        &req.agent_name,
    )?;
    if req.new_invocation {
        require_ready(&found)?;
    }
    Ok(pb::AuthorizeAgentResponse::default())
}

/// Whether a provider may serve a chat model: its lease is live and its own,
/// the model is declared, and the provider is READY.
pub(crate) fn authorize_model(
    state: &pb::RegistryState,
    req: &pb::AuthorizeModelRequest,
    owner: &str,
    now: f64,
) -> Result<pb::AuthorizeModelResponse, Error> {
    let found = provider(state, &req.instance_id, &req.lease_token, owner, now)?;
    require(
        record::descriptor(&found)
            .models
            .iter()
            .any(|m| m.name == req.model_name && m.kind == "chat"),
        ErrorCode::ModelNotFound,
        &req.model_name,
    )?;
    require_ready(&found)?;
    Ok(pb::AuthorizeModelResponse::default())
}

/// Whether a provider may serve an app: its lease is live and its own, the
/// app is declared, and the provider is READY.
pub(crate) fn authorize_app(
    state: &pb::RegistryState,
    req: &pb::AuthorizeAppRequest,
    owner: &str,
    now: f64,
) -> Result<pb::AuthorizeAppResponse, Error> {
    let found = provider(state, &req.instance_id, &req.lease_token, owner, now)?;
    require(
        record::descriptor(&found)
            .apps
            .iter()
            .any(|a| a.name == req.app_name),
        ErrorCode::AppNotFound,
        &req.app_name,
    )?;
    require_ready(&found)?;
    Ok(pb::AuthorizeAppResponse::default())
}
