//! How a caller authenticates on the wire.

/// The NATS header carrying the caller's token (the reference's).
pub const AUTH_HEADER: &str = "Nats-Auth-Token";
