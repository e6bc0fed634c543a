//! Tokens and requests the tests send to discovery.
//!
//! Tokens are issued now, with the reference's lifetimes
//! ([`abi_auth::DEFAULT_TTL`], [`abi_auth::BOUND_TTL`] for tokens bound to an
//! instance).

use std::time::SystemTime;

use abi_proto::discovery::v1 as pb;

/// A token for the engine's services (`api`, `engine`, ...), signed with the
/// project `secret`.
///
/// # Panics
///
/// When the token cannot be issued (an empty identity or secret).
pub fn service_token(secret: &str, identity: &str) -> String {
    abi_auth::issue_service_token(
        identity,
        secret,
        abi_auth::DEFAULT_TTL,
        SystemTime::now(),
        None,
    )
    .expect("issue a service token")
}

/// A service token bound to one instance (`aud`), signed with the project
/// `secret`.
///
/// # Panics
///
/// As [`service_token`].
pub fn bound_service_token(secret: &str, identity: &str, instance_id: &str) -> String {
    abi_auth::issue_service_token(
        identity,
        secret,
        abi_auth::BOUND_TTL,
        SystemTime::now(),
        Some(instance_id),
    )
    .expect("issue a bound service token")
}

/// A module's own token, signed with its module key (derived from the
/// project `secret`).
///
/// # Panics
///
/// As [`service_token`].
pub fn module_token(secret: &str, identity: &str) -> String {
    let key = abi_auth::module_key(secret, identity).expect("derive the module key");
    abi_auth::issue_module_token(
        identity,
        &key,
        abi_auth::DEFAULT_TTL,
        SystemTime::now(),
        None,
    )
    .expect("issue a module token")
}

/// A module token bound to one instance, signed with the module's key.
///
/// # Panics
///
/// As [`service_token`].
pub fn bound_module_token(secret: &str, identity: &str, instance_id: &str) -> String {
    let key = abi_auth::module_key(secret, identity).expect("derive the module key");
    abi_auth::issue_module_token(
        identity,
        &key,
        abi_auth::BOUND_TTL,
        SystemTime::now(),
        Some(instance_id),
    )
    .expect("issue a bound module token")
}

/// A lease token of the size the rules require, unique per instance:
/// `lease-` and the instance id left-padded with zeros to 40 characters.
pub fn lease_token(instance_id: &str) -> String {
    format!("lease-{instance_id:0>40}")
}

/// Registers `descriptor` as `instance_id` with its [`lease_token`].
pub fn register_request(
    descriptor: pb::ModuleDescriptor,
    instance_id: &str,
) -> pb::RegisterRequest {
    pb::RegisterRequest {
        descriptor: Some(descriptor),
        instance_id: instance_id.to_owned(),
        lease_token: lease_token(instance_id),
        ..Default::default()
    }
}

/// Renews `instance_id` (registered with [`register_request`]), reporting
/// whether it finished initializing.
pub fn renew_request(instance_id: &str, initialized: bool) -> pb::RenewRequest {
    pb::RenewRequest {
        instance_id: instance_id.to_owned(),
        lease_token: lease_token(instance_id),
        initialized,
        ..Default::default()
    }
}

/// Unregisters `instance_id` (registered with [`register_request`]).
pub fn unregister_request(instance_id: &str) -> pb::UnregisterRequest {
    pb::UnregisterRequest {
        instance_id: instance_id.to_owned(),
        lease_token: lease_token(instance_id),
        ..Default::default()
    }
}
