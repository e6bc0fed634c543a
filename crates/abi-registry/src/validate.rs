//! Validation of a registration: every bound and pattern of the reference,
//! checked in the reference's order so the first failure names the same rule.

use std::collections::HashSet;

use abi_proto::discovery::v1 as pb;
use prost::Message;

use crate::cycles::refuse_cycles;
use crate::error::{Error, ErrorCode, require};
use crate::json::object_or_empty;
use crate::patterns::{app_entry, app_name, chars, instance_id, name, rollout_id};
use crate::record;
use crate::rollout::{cohort, sorted};

/// Most dependencies a module declares.
pub(crate) const MAX_DEPENDENCIES: usize = 64;
/// Most agents a module declares.
pub(crate) const MAX_AGENTS: usize = 128;
/// Most capabilities one agent declares.
pub(crate) const MAX_CAPABILITIES: usize = 32;
/// Most jobs a module declares.
pub(crate) const MAX_JOBS: usize = 128;
/// Most triggers one job declares.
pub(crate) const MAX_TRIGGERS: usize = 16;
/// Most models a module declares.
pub(crate) const MAX_MODELS: usize = 128;
/// Most apps a module declares.
pub(crate) const MAX_APPS: usize = 16;
/// Most module ids a rollout declares.
pub(crate) const MAX_ROLLOUT_MODULES: usize = 64;
/// Longest description, in characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 4096;
/// Largest input or output schema, in bytes.
pub(crate) const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Largest trigger input, in bytes.
pub(crate) const MAX_TRIGGER_INPUT_BYTES: usize = 4 * 1024;
/// Largest encoded job descriptor: every descriptor lives in the one snapshot.
pub(crate) const MAX_JOB_DESCRIPTOR_BYTES: usize = 64 * 1024;
/// Largest encoded app descriptor.
pub(crate) const MAX_APP_BYTES: usize = 4096;

const INVALID: ErrorCode = ErrorCode::InvalidArgument;

/// Checks a registration against the bounds, against the live records of its
/// generation and rollout, and for dependency cycles.
pub(crate) fn registration(
    req: &pb::RegisterRequest,
    state: &pb::RegistryState,
) -> Result<(), Error> {
    let d = record::or_empty(req.descriptor.as_ref());
    require(
        name(&d.module_id) && instance_id(&req.instance_id),
        INVALID,
        "Invalid module or instance identity",
    )?;
    require(rollout_id(&req.rollout_id), INVALID, "Invalid rollout id")?;
    let declared: Vec<&str> = if !req.rollout_modules.is_empty() {
        req.rollout_modules.iter().map(String::as_str).collect()
    } else if !req.rollout_id.is_empty() {
        vec![d.module_id.as_str()]
    } else {
        Vec::new()
    };
    require(
        (!req.rollout_id.is_empty() || req.rollout_modules.is_empty())
            && declared.len() <= MAX_ROLLOUT_MODULES
            && unique(declared.iter())
            && declared.iter().all(|m| name(m))
            && (declared.is_empty() || declared.contains(&d.module_id.as_str())),
        INVALID,
        "Invalid rollout modules",
    )?;
    require(
        (32..=256).contains(&chars(&req.lease_token)),
        INVALID,
        "Lease token must contain 32 to 256 characters",
    )?;
    require(
        d.contract_major > 0 && chars(&d.package_version) <= 128,
        INVALID,
        "Invalid contract or package version",
    )?;
    require(
        d.dependencies.len() <= MAX_DEPENDENCIES && d.agents.len() <= MAX_AGENTS,
        INVALID,
        "Too many dependencies or agents",
    )?;
    require(
        unique(
            d.dependencies
                .iter()
                .map(|x| (&x.module_id, x.contract_major)),
        ),
        INVALID,
        "Duplicate dependencies",
    )?;
    require(
        d.dependencies
            .iter()
            .all(|x| name(&x.module_id) && x.contract_major > 0),
        INVALID,
        "Invalid dependency",
    )?;
    require(
        unique(d.agents.iter().map(|x| &x.name)),
        INVALID,
        "Duplicate agents",
    )?;
    require(
        d.agents.iter().all(valid_agent),
        INVALID,
        "Invalid agent descriptor",
    )?;
    require(
        d.jobs.len() <= MAX_JOBS && unique(d.jobs.iter().map(|x| &x.name)),
        INVALID,
        "Too many or duplicate jobs",
    )?;
    require(
        d.jobs.iter().all(valid_job),
        INVALID,
        "Invalid job descriptor",
    )?;
    require(
        d.models.len() <= MAX_MODELS && unique(d.models.iter().map(|x| &x.name)),
        INVALID,
        "Too many or duplicate models",
    )?;
    require(
        d.models.iter().all(valid_model),
        INVALID,
        "Invalid model descriptor",
    )?;
    require(
        d.apps.len() <= MAX_APPS && unique(d.apps.iter().map(|x| &x.name)),
        INVALID,
        "Too many or duplicate apps",
    )?;
    require(
        d.apps.iter().all(valid_app),
        INVALID,
        "Invalid app descriptor",
    )?;

    let own_cohort = cohort(req);
    for r in &state.records {
        let other = record::descriptor(r);
        if !req.rollout_id.is_empty() && r.rollout_id == req.rollout_id {
            require(
                sorted(&r.rollout_modules) == own_cohort,
                ErrorCode::DescriptorConflict,
                "Rollout members do not match",
            )?;
        }
        // Replicas of one generation (a rollout id, or none) must match; a
        // rollout may change what the generation it replaces declares, since
        // it stays STAGED until its cohort cuts over.
        if other.module_id == d.module_id
            && other.contract_major == d.contract_major
            && r.rollout_id == req.rollout_id
        {
            require(
                other.dependencies == d.dependencies
                    && other.agents == d.agents
                    && other.jobs == d.jobs
                    && other.models == d.models
                    && other.apps == d.apps,
                ErrorCode::DescriptorConflict,
                "Replicas of a contract in one rollout must declare identical dependencies, agents, jobs, models and apps",
            )?;
        }
    }
    refuse_cycles(req, state)
}

/// Whether no item repeats.
fn unique<T: Eq + std::hash::Hash>(items: impl Iterator<Item = T>) -> bool {
    let mut seen = HashSet::new();
    items.into_iter().all(|item| seen.insert(item))
}

fn valid_agent(x: &pb::AgentDescriptor) -> bool {
    name(&x.name)
        && x.contract_major > 0
        && chars(&x.description) <= MAX_DESCRIPTION_CHARS
        && x.capabilities.len() <= MAX_CAPABILITIES
        && x.capabilities.iter().all(|c| name(c))
}

fn valid_trigger(t: &pb::JobTrigger) -> bool {
    matches!(t.kind.as_str(), "cron" | "every" | "event")
        && (1..=256).contains(&chars(&t.spec))
        && chars(&t.time_zone) <= 64
        && object_or_empty(&t.input, MAX_TRIGGER_INPUT_BYTES)
}

fn valid_job(job: &pb::JobDescriptor) -> bool {
    name(&job.name)
        && job.contract_major > 0
        && chars(&job.description) <= MAX_DESCRIPTION_CHARS
        && (1..=64).contains(&job.max_concurrency)
        && (1..=100).contains(&job.max_attempts)
        && job.timeout_seconds >= 0.0
        && job.timeout_seconds.is_finite()
        && job.triggers.len() <= MAX_TRIGGERS
        && job.triggers.iter().all(valid_trigger)
        // An empty kind is a descriptor written before workflows existed: a job.
        && matches!(job.kind.as_str(), "" | "job" | "workflow")
        && object_or_empty(&job.input_schema, MAX_SCHEMA_BYTES)
        && object_or_empty(&job.output_schema, MAX_SCHEMA_BYTES)
        && job.encoded_len() <= MAX_JOB_DESCRIPTOR_BYTES
}

fn valid_model(x: &pb::ModelDescriptor) -> bool {
    name(&x.name) && x.kind == "chat" && chars(&x.description) <= MAX_DESCRIPTION_CHARS
}

fn valid_app(app: &pb::AppDescriptor) -> bool {
    app_name(&app.name)
        && app.contract_major > 0
        && chars(&app.title) <= 256
        && chars(&app.description) <= MAX_DESCRIPTION_CHARS
        && chars(&app.category) <= 64
        && chars(&app.icon_emoji) <= 16
        && app_entry(&app.entry)
        && app.encoded_len() <= MAX_APP_BYTES
}
