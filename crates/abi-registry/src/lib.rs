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
//!
//! **API boundary:** the service, not this crate, verifies tokens, caps the
//! payload size, and checks that a module registers only its own module id.
//!
//! **Where we knowingly differ from the reference** (both are edge cases no
//! SDK produces):
//! - a schema or trigger input nested more than 1000 levels deep is refused
//!   as INVALID_ARGUMENT; Python fails on it with a `RecursionError` (the
//!   reference answers UNAVAILABLE) from a depth that depends on its stack;
//! - a job `timeout_seconds` of `-0.0` equals `0.0` here (prost compares
//!   values and does not encode `-0.0`), while the reference compares the
//!   bits, so it may answer DESCRIPTOR_CONFLICT where we register.
//!
//! ```
//! use abi_registry::{Mutation, Outcome, RegistryState, Rules, pb};
//!
//! let rules = Rules::default();
//! let mut state = RegistryState::default();
//! let register = pb::RegisterRequest {
//!     descriptor: Some(pb::ModuleDescriptor {
//!         module_id: "billing".into(),
//!         contract_major: 1,
//!         ..Default::default()
//!     }),
//!     instance_id: "billing-1".into(),
//!     lease_token: "t".repeat(32),
//!     ..Default::default()
//! };
//! let Outcome::Register(answer) = rules
//!     .apply(&mut state, &Mutation::Register(register), "billing", 100.0)
//!     .unwrap()
//! else {
//!     unreachable!()
//! };
//! assert_eq!(answer.lease_seconds, 20.0);
//! assert_eq!(answer.instance.unwrap().status, "STARTING");
//! ```

mod cycles;
mod draft;
mod error;
mod json;
mod lease;
mod lookup;
mod mutate;
pub mod overview;
mod patterns;
mod policy;
mod record;
mod rollout;
mod rules;
mod status;
mod validate;

pub use abi_proto::discovery::v1 as pb;
pub use draft::Draft;
pub use error::{Error, ErrorCode};
pub use lease::lease_hash;
pub use lookup::{LookupSource, Prepared};
pub use pb::RegistryState;
pub use policy::{Rules, RulesError};

pub use abi_wire::discovery::{
    DEFAULT_ADMIN_IDENTITIES, DEFAULT_LEASE_SECONDS, MAX_INSTANCES, MAX_SNAPSHOT_BYTES,
};

/// A change to the registry, as the service's writer receives it.
// The variants hold the wire requests as they are (a fixed API); a mutation
// lives only as long as one write, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
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

/// Drops records whose lease has ended (`expires_at <= now`), as the
/// reference does to every snapshot it reads before a write.
pub fn prune_expired(state: &mut RegistryState, now: f64) {
    state
        .records
        .retain(|r| record::instance(r).expires_at > now);
}

/// The live records with freshly computed statuses: what lookups see, for
/// watchers and tools. `state` itself is not changed.
pub fn view(state: &RegistryState, now: f64) -> RegistryState {
    let live = lookup::Live::new(state, now);
    RegistryState {
        records: (0..live.records.len()).map(|i| live.record(i)).collect(),
    }
}
