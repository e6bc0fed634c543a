//! The subjects and bucket names the SDK uses, from [`abi_wire::discovery`].

/// The subject of discovery `operation` (its last token, e.g. `register`) in
/// `project`. The SDK takes the project as given by the module; a malformed
/// one is refused by its configuration first.
pub(crate) fn discovery(project: &str, operation: &str) -> String {
    abi_wire::discovery::operation_named(project, operation)
}

pub(crate) use abi_wire::discovery::{REGISTRY_KEY, registry_bucket, served_by_queue_group};
