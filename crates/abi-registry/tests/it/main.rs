//! The integration tests of `abi-registry`, in one test binary (one link instead of
//! one per file): each former `tests/<name>.rs` is the module `<name>` here.

mod common;

mod bounds;
mod cycles;
mod differential;
mod leases;
mod lookups;
mod properties;
mod readiness;
mod rollouts;
mod validation;
