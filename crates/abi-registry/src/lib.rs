//! The discovery rules, as plain synchronous functions.
//!
//! Everything the discovery service decides lives here: validation, bounds,
//! leases, rollouts, statuses and the dependency-cycle check. Each rule takes
//! the registry snapshot ([`RegistryState`]) and the current time (`now`,
//! seconds since the Unix epoch, as an `f64` exactly like the reference) as
//! arguments, so every scenario is a fast deterministic test.
//!
//! **Architecture invariant:** no I/O, no async, no clock and no NATS types in
//! this crate. The service reads the snapshot, calls [`Rules::apply`] or a
//! lookup, and writes the result.

mod error;



use abi_proto::discovery::v1 as pb;
pub use pb::RegistryState;

/// Most live instances the registry holds.
pub const MAX_INSTANCES: usize = 256;
/// Largest encoded snapshot, in bytes.
pub const MAX_SNAPSHOT_BYTES: usize = 512 * 1024;
/// Default lease, in seconds (the reference's default).
pub const DEFAULT_LEASE_SECONDS: f64 = 20.0;
/// Identities allowed to evict when none are configured.
pub const DEFAULT_ADMIN_IDENTITIES: [&str; 2] = ["api", "engine"];

/// A change to the registry, as the service's writer receives it.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    /// Register (or idempotently re-register) an instance.
    Register(pb::RegisterRequest),
    /// Extend a lease and report `initialized`/`draining`.
    Renew(pb::RenewRequest),
    /// Remove one's own registration.
    Unregister(pb::UnregisterRequest),
    /// Remove any registration (admin identities only).
    Evict(pb::EvictRequest),
}

/// The answer to a successful [`Mutation`], one variant per operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Answer to [`Mutation::Register`].
    Register(pb::RegisterResponse),
    /// Answer to [`Mutation::Renew`].
    Renew(pb::RenewResponse),
    /// Answer to [`Mutation::Unregister`].
    Unregister(pb::UnregisterResponse),
    /// Answer to [`Mutation::Evict`].
    Evict(pb::EvictResponse),
}

/// The configured policy: lease length and admin identities.
#[derive(Debug, Clone)]
pub struct Rules {
    lease_seconds: f64,
    admin_identities: std::collections::BTreeSet<String>,
}
