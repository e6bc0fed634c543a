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

/// What the tools (`abictl tree`, the console) show for a dependency edge
/// that no live instance serves: never computed by discovery, never sent
/// by a module.
pub mod edge {
    /// No live instance of the module needed.
    pub const MISSING: &str = "MISSING";
    /// The module lives, but not at the contract major needed.
    pub const INCOMPATIBLE: &str = "INCOMPATIBLE";
}

/// The statuses a module's SDK reports of itself beside the wire ones
/// (never in the registry): what a caller of `Context::status` sees.
pub mod local {
    /// Its registration was lost (discovery unreachable, lease gone).
    pub const UNAVAILABLE: &str = "UNAVAILABLE";
    /// The module stopped.
    pub const STOPPED: &str = "STOPPED";
    /// Running without discovery.
    pub const DISABLED: &str = "DISABLED";
    /// A status this SDK does not know.
    pub const UNKNOWN: &str = "UNKNOWN";
}
