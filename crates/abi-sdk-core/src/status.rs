//! Instance statuses as discovery computes them, plus the SDK's own views.

use abi_wire::status as wire;

use std::fmt;

/// The status of a module instance.
///
/// The first five come from the service; [`Status::Unavailable`],
/// [`Status::Stopped`] and [`Status::Disabled`] are what a process says of
/// itself when its lease is not confirmed, after it closed, or when it runs
/// without discovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// Registered, not yet initialized.
    Starting,
    /// Initialized, but another generation serves this module (a rollout).
    Staged,
    /// Initialized, serving, but a dependency is not READY.
    Degraded,
    /// Initialized, serving, every dependency READY.
    Ready,
    /// Finishing its work before it leaves.
    Draining,
    /// The lease is not confirmed (expired, or the last renewal failed).
    Unavailable,
    /// The session closed.
    Stopped,
    /// Running without discovery.
    Disabled,
    /// A status string this SDK does not know.
    Unknown,
}

impl Status {
    /// Parses a wire status ("READY", ...).
    pub fn parse(value: &str) -> Self {
        match value {
            wire::STARTING => Self::Starting,
            wire::STAGED => Self::Staged,
            wire::DEGRADED => Self::Degraded,
            wire::READY => Self::Ready,
            wire::DRAINING => Self::Draining,
            wire::local::UNAVAILABLE => Self::Unavailable,
            wire::local::STOPPED => Self::Stopped,
            wire::local::DISABLED => Self::Disabled,
            _ => Self::Unknown,
        }
    }

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => wire::STARTING,
            Self::Staged => wire::STAGED,
            Self::Degraded => wire::DEGRADED,
            Self::Ready => wire::READY,
            Self::Draining => wire::DRAINING,
            Self::Unavailable => wire::local::UNAVAILABLE,
            Self::Stopped => wire::local::STOPPED,
            Self::Disabled => wire::local::DISABLED,
            Self::Unknown => wire::local::UNKNOWN,
        }
    }

    /// Whether this generation takes traffic (READY or DEGRADED).
    pub fn is_serving(self) -> bool {
        matches!(self, Self::Ready | Self::Degraded)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_wire_names() {
        for s in [
            Status::Starting,
            Status::Staged,
            Status::Degraded,
            Status::Ready,
            Status::Draining,
        ] {
            assert_eq!(Status::parse(s.as_str()), s);
        }
        assert_eq!(Status::parse("what"), Status::Unknown);
        assert!(Status::Degraded.is_serving() && !Status::Staged.is_serving());
    }
}
