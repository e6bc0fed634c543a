//! Every NATS subject and bucket name the SDK uses, in one place.

/// The subject of discovery `operation` in `project`.
pub(crate) fn discovery(project: &str, operation: &str) -> String {
    format!("abi.discovery.{project}.v1.{operation}")
}

/// The JetStream KV bucket holding the registry snapshot of `project`.
pub(crate) fn registry_bucket(project: &str) -> String {
    format!("ABI_DISCOVERY_{project}")
}

/// The key of the registry snapshot inside its bucket.
pub(crate) const REGISTRY_KEY: &str = "registry";

/// Whether requests on `subject` go to the service's queue group, where a
/// "no responders" answer means a handover and sending again is safe.
pub(crate) fn served_by_queue_group(subject: &str) -> bool {
    subject.starts_with("abi.discovery.") && !subject.contains(".presence.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_reference() {
        assert_eq!(discovery("p1", "register"), "abi.discovery.p1.v1.register");
        assert_eq!(registry_bucket("p1"), "ABI_DISCOVERY_p1");
        assert!(served_by_queue_group("abi.discovery.p1.v1.renew"));
        assert!(!served_by_queue_group("abi.mod.p1.x.y"));
    }
}
