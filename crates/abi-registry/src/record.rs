//! The record vocabulary every rule shares (a leaf: it uses no other module):
//! the status names, [`NodeRef`], and read access to stored records that
//! tolerates absent sub-messages.
//!
//! Protobuf leaves a sub-message unset when a writer never set it; the
//! reference then reads default values. These helpers do the same, so the
//! rules never branch on `Option`s that carry no meaning for them.

use abi_proto::discovery::v1 as pb;

// The computed statuses, as they travel in `Instance.status`: the wire names,
// kept in this leaf so statuses and rollouts can both use them without
// depending on each other.
pub(crate) use abi_wire::status::{DEGRADED, DRAINING, READY, STAGED, STARTING};

/// A module id at one contract major, borrowed: a node of the dependency graph.
pub(crate) type NodeRef<'a> = (&'a str, u32);

/// What an unset descriptor reads as.
static EMPTY_DESCRIPTOR: pb::ModuleDescriptor = pb::ModuleDescriptor {
    module_id: String::new(),
    package_version: String::new(),
    contract_major: 0,
    dependencies: Vec::new(),
    agents: Vec::new(),
    jobs: Vec::new(),
    models: Vec::new(),
    apps: Vec::new(),
};

/// What an unset instance reads as.
static EMPTY_INSTANCE: pb::Instance = pb::Instance {
    descriptor: None,
    instance_id: String::new(),
    status: String::new(),
    expires_at: 0.0,
    rollout_id: String::new(),
};

/// The record's instance, or an empty one.
pub(crate) fn instance(record: &pb::RegistryRecord) -> &pb::Instance {
    record.instance.as_ref().unwrap_or(&EMPTY_INSTANCE)
}

/// The record's instance, created empty if unset (as a Python write does).
pub(crate) fn instance_mut(record: &mut pb::RegistryRecord) -> &mut pb::Instance {
    record.instance.get_or_insert_with(Default::default)
}

/// An instance's descriptor, or an empty one.
pub(crate) fn descriptor_of(instance: &pb::Instance) -> &pb::ModuleDescriptor {
    instance.descriptor.as_ref().unwrap_or(&EMPTY_DESCRIPTOR)
}

/// A request's descriptor, or an empty one.
pub(crate) fn or_empty(descriptor: Option<&pb::ModuleDescriptor>) -> &pb::ModuleDescriptor {
    descriptor.unwrap_or(&EMPTY_DESCRIPTOR)
}

/// The record's descriptor, or an empty one.
pub(crate) fn descriptor(record: &pb::RegistryRecord) -> &pb::ModuleDescriptor {
    descriptor_of(instance(record))
}

/// The module id the record serves.
pub(crate) fn module_id(record: &pb::RegistryRecord) -> &str {
    &descriptor(record).module_id
}

/// The record's instance id.
pub(crate) fn instance_id(record: &pb::RegistryRecord) -> &str {
    &instance(record).instance_id
}

/// The record's computed status as last stored.
pub(crate) fn status(record: &pb::RegistryRecord) -> &str {
    &instance(record).status
}

/// Seconds left on a lease, never negative (the reference's `max(0, left)`).
pub(crate) fn remaining(expires_at: f64, now: f64) -> f64 {
    let left = expires_at - now;
    if left > 0.0 { left } else { 0.0 }
}

/// Index of the first record of `instance_id`, if any.
pub(crate) fn position(state: &pb::RegistryState, id: &str) -> Option<usize> {
    state.records.iter().position(|r| instance_id(r) == id)
}
