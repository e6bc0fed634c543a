//! The status names an instance has on the wire (`Instance.status`),
//! computed by the discovery service, never sent by a module.

/// Registered, not yet initialized.
pub const STARTING: &str = "STARTING";
/// Initialized, but its rollout does not serve yet.
pub const STAGED: &str = "STAGED";
/// Serves, but a dependency has no READY instance.
pub const DEGRADED: &str = "DEGRADED";
/// Serves.
pub const READY: &str = "READY";
/// Shutting down, or replaced by a newer generation.
pub const DRAINING: &str = "DRAINING";

/// Every status, in lifecycle order.
pub const ALL: [&str; 5] = [STARTING, STAGED, DEGRADED, READY, DRAINING];
