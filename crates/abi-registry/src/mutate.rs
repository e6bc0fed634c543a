//! The four mutations, each applied to a candidate copy of the registry.

use abi_proto::discovery::v1 as pb;

use crate::error::{Error, ErrorCode, require};
use crate::lease::{authorize, lease_hash};
use crate::record::{self, remaining};
use crate::rollout::{cohort, sorted};
use crate::validate::registration;
use crate::{MAX_INSTANCES, Rules, status};

/// Registers an instance, or answers a retry of the same registration
/// without extending its lease.
pub(crate) fn register(
    rules: &Rules,
    state: &mut pb::RegistryState,
    req: &pb::RegisterRequest,
    owner: &str,
    now: f64,
) -> Result<pb::RegisterResponse, Error> {
    registration(req, state)?;
    let descriptor = record::or_empty(req.descriptor.as_ref());
    let index = match record::position(state, &req.instance_id) {
        Some(index) => {
            let existing = &state.records[index];
            authorize(existing, &req.lease_token, owner)?;
            require(
                record::descriptor(existing) == descriptor
                    && existing.rollout_id == req.rollout_id
                    && sorted(&existing.rollout_modules) == cohort(req),
                ErrorCode::DescriptorConflict,
                "Registration identity cannot change",
            )?;
            index
        }
        None => {
            require(
                state.records.len() < MAX_INSTANCES,
                ErrorCode::RegistryFull,
                "Registry supports at most 256 live instances",
            )?;
            state.records.push(pb::RegistryRecord {
                instance: Some(pb::Instance {
                    descriptor: Some(descriptor.clone()),
                    instance_id: req.instance_id.clone(),
                    status: String::new(),
                    expires_at: now + rules.lease_seconds(),
                    rollout_id: req.rollout_id.clone(),
                }),
                owner: owner.to_owned(),
                lease_hash: lease_hash(&req.lease_token),
                initialized: false,
                draining: false,
                rollout_id: req.rollout_id.clone(),
                registered_at: now,
                rollout_modules: cohort(req),
            });
            state.records.len() - 1
        }
    };
    status::compute(state);
    let instance = record::instance(&state.records[index]).clone();
    Ok(pb::RegisterResponse {
        error: None,
        lease_seconds: remaining(instance.expires_at, now),
        instance: Some(instance),
    })
}

/// Extends a lease and records `initialized`/`draining`, which only ever go
/// from false to true within one registration.
pub(crate) fn renew(
    rules: &Rules,
    state: &mut pb::RegistryState,
    req: &pb::RenewRequest,
    owner: &str,
    now: f64,
) -> Result<pb::RenewResponse, Error> {
    let Some(index) = record::position(state, &req.instance_id) else {
        return Err(Error::new(
            ErrorCode::LeaseExpired,
            "Register a fresh instance after lease loss",
        ));
    };
    let existing = &mut state.records[index];
    authorize(existing, &req.lease_token, owner)?;
    existing.initialized = existing.initialized || req.initialized;
    existing.draining = existing.draining || req.draining;
    record::instance_mut(existing).expires_at = now + rules.lease_seconds();
    status::compute(state);
    let instance = record::instance(&state.records[index]).clone();
    Ok(pb::RenewResponse {
        error: None,
        lease_seconds: remaining(instance.expires_at, now),
        instance: Some(instance),
    })
}

/// Removes one's own registration; removing one that is already gone succeeds.
///
/// Like the reference, this does not recompute the other records' statuses:
/// the next write or lookup does.
pub(crate) fn unregister(
    state: &mut pb::RegistryState,
    req: &pb::UnregisterRequest,
    owner: &str,
) -> Result<pb::UnregisterResponse, Error> {
    if let Some(index) = record::position(state, &req.instance_id) {
        authorize(&state.records[index], &req.lease_token, owner)?;
        state.records.remove(index);
    }
    Ok(pb::UnregisterResponse::default())
}

/// Removes any registration, whatever its lease (administrators only). The
/// evicted process learns of it at its next renewal (LEASE_EXPIRED).
pub(crate) fn evict(
    rules: &Rules,
    state: &mut pb::RegistryState,
    req: &pb::EvictRequest,
    owner: &str,
) -> Result<pb::EvictResponse, Error> {
    require(
        rules.is_admin(owner),
        ErrorCode::PermissionDenied,
        "Only platform administrators can evict registrations",
    )?;
    require(
        crate::patterns::instance_id(&req.instance_id),
        ErrorCode::InvalidArgument,
        "Invalid instance identity",
    )?;
    status::compute(state);
    let Some(index) = record::position(state, &req.instance_id) else {
        return Err(Error::new(
            ErrorCode::InstanceNotFound,
            req.instance_id.clone(),
        ));
    };
    let evicted = record::instance(&state.records[index]).clone();
    state.records.remove(index);
    status::compute(state);
    Ok(pb::EvictResponse {
        error: None,
        instance: Some(evicted),
    })
}
