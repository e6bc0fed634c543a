//! The service's subjects and queue group: `abi.discovery.v1` as
//! [`abi_wire::discovery`] defines it, re-exported for the service's modules
//! and its embedders.

pub use abi_wire::discovery::{InvalidProject, Operation, Project, micro, operation, owners_queue};
