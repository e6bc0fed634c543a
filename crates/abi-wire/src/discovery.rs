//! `abi.discovery.v1` on the wire: subjects, queue group, bucket and key, the
//! caps and the reference's defaults.
//!
//! `abi.discovery.<project>.v1.<op>` for the operations, served by the queue
//! group `abi.discovery.<project>.owners` so any number of owners share the
//! load; the registry is key `registry` of KV bucket `ABI_DISCOVERY_<project>`.
//! The project is validated once ([`Project::new`]) so a subject built from it
//! is always a valid, wildcard-free subject.

use std::fmt;

/// A validated project name: 1 to 64 of `[A-Za-z0-9_-]`, as the reference requires.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Project(String);

/// Why a project name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid discovery project {0:?}: expected 1 to 64 of [A-Za-z0-9_-]")]
pub struct InvalidProject(pub String);

impl Project {
    /// Validates `name`.
    ///
    /// # Errors
    ///
    /// [`InvalidProject`] if it is empty, longer than 64 or has another character.
    pub fn new(name: &str) -> Result<Self, InvalidProject> {
        if crate::names::token(name, 64) {
            Ok(Self(name.to_owned()))
        } else {
            Err(InvalidProject(name.to_owned()))
        }
    }

    /// The name itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Project {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The operations of `abi.discovery.v1`, one subject each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// Register (or re-register) an instance.
    Register,
    /// Renew a lease.
    Renew,
    /// Remove one's own registration.
    Unregister,
    /// Remove any registration (admins only).
    Evict,
    /// Look up the instances serving a module.
    GetModule,
    /// Page through the registered modules.
    ListModules,
    /// Authorize a call to an agent.
    AuthorizeAgent,
    /// Authorize a call to a model.
    AuthorizeModel,
    /// Authorize a call to an app.
    AuthorizeApp,
}

impl Operation {
    /// Every operation, in the reference's subscription order.
    pub const ALL: [Operation; 9] = [
        Operation::AuthorizeAgent,
        Operation::AuthorizeModel,
        Operation::AuthorizeApp,
        Operation::Register,
        Operation::Renew,
        Operation::Unregister,
        Operation::Evict,
        Operation::GetModule,
        Operation::ListModules,
    ];

    /// The last subject token, e.g. `get_module`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Register => "register",
            Operation::Renew => "renew",
            Operation::Unregister => "unregister",
            Operation::Evict => "evict",
            Operation::GetModule => "get_module",
            Operation::ListModules => "list_modules",
            Operation::AuthorizeAgent => "authorize_agent",
            Operation::AuthorizeModel => "authorize_model",
            Operation::AuthorizeApp => "authorize_app",
        }
    }

    /// The operation a subject token names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.as_str() == name)
    }
}

/// The subject of `op` in `project`: `abi.discovery.<project>.v1.<op>`.
pub fn operation(project: &Project, op: Operation) -> String {
    operation_named(project.as_str(), op.as_str())
}

/// The subject of the operation whose last token is `name` in `project`, for
/// callers that hold names rather than typed values (the SDK's transport,
/// tools, tests); `name` `>` gives the wildcard over every operation.
pub fn operation_named(project: &str, name: &str) -> String {
    format!("abi.discovery.{project}.v1.{name}")
}

/// The queue group every owner of `project` serves in: `abi.discovery.<project>.owners`.
pub fn owners_queue(project: &Project) -> String {
    format!("abi.discovery.{project}.owners")
}

/// Every subject of `project`'s operations: `abi.discovery.<project>.v1.>`.
pub fn operations_wildcard(project: &Project) -> String {
    operation_named(project.as_str(), ">")
}

/// Whether requests on `subject` go to a platform service's queue group
/// (discovery owners, or an engine service on `abi.svc.*` such as the
/// document service), where a "no responders" answer means a handover
/// between servers and sending again is safe. Module subjects are never
/// resent (the reference's rule).
pub fn served_by_queue_group(subject: &str) -> bool {
    (subject.starts_with("abi.discovery.") && !subject.contains(".presence."))
        || subject.starts_with(crate::documents::SERVICE_SUBJECT_ROOT)
}

/// The KV bucket holding `project`'s registry: `ABI_DISCOVERY_<project>`.
pub fn registry_bucket(project: &str) -> String {
    format!("ABI_DISCOVERY_{project}")
}

/// The stream behind the registry bucket: `KV_ABI_DISCOVERY_<project>`.
pub fn registry_stream(project: &str) -> String {
    format!("KV_{}", registry_bucket(project))
}

/// How the service describes itself to NATS micro-service discovery
/// (`$SRV.INFO`).
pub const SERVICE_DESCRIPTION: &str = "abi.discovery.v1: module registration, leases and lookups";

/// The key of the registry snapshot inside its bucket.
pub const REGISTRY_KEY: &str = "registry";

/// The subject the registry key's messages are stored on:
/// `$KV.ABI_DISCOVERY_<project>.registry`.
pub fn registry_key_subject(project: &str) -> String {
    format!("$KV.{}.{REGISTRY_KEY}", registry_bucket(project))
}

/// Most instances the registry holds (the reference's cap).
pub const MAX_INSTANCES: usize = 256;
/// Largest encoded snapshot, and largest value the bucket accepts (the
/// reference's 512 KiB).
pub const MAX_SNAPSHOT_BYTES: usize = 512 * 1024;
/// The lease a registration gets unless configured (the reference's 20 s):
/// long enough to ride out a GC pause or a leader election, short enough that
/// a crashed module is gone within half a minute.
pub const DEFAULT_LEASE_SECONDS: f64 = 20.0;
/// Identities allowed to evict unless configured (the reference's: the
/// engine's API and scheduler).
pub const DEFAULT_ADMIN_IDENTITIES: [&str; 2] = ["api", "engine"];
/// The project when none is named (the reference's default), so an
/// unconfigured owner and module meet.
pub const DEFAULT_PROJECT: &str = "default";

/// The NATS micro-service discovery verbs a service answers.
pub mod micro_verb {
    /// `$SRV.PING`: who is there.
    pub const PING: &str = "PING";
    /// `$SRV.INFO`: the service's endpoints.
    pub const INFO: &str = "INFO";
    /// `$SRV.STATS`: the endpoints' counts.
    pub const STATS: &str = "STATS";
}

/// The NATS micro-service discovery subjects for `verb` (one of [`micro_verb`]):
/// `$SRV.<verb>`, `$SRV.<verb>.<name>` and `$SRV.<verb>.<name>.<id>`.
pub fn micro(verb: &str, name: &str, id: &str) -> [String; 3] {
    [
        format!("$SRV.{verb}"),
        format!("$SRV.{verb}.{name}"),
        format!("$SRV.{verb}.{name}.{id}"),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn subjects_match_the_reference() {
        let p = Project::new("acme").unwrap();
        assert_eq!(
            operation(&p, Operation::GetModule),
            "abi.discovery.acme.v1.get_module"
        );
        assert_eq!(owners_queue(&p), "abi.discovery.acme.owners");
        assert_eq!(operations_wildcard(&p), "abi.discovery.acme.v1.>");
        assert_eq!(registry_bucket("acme"), "ABI_DISCOVERY_acme");
        assert_eq!(registry_stream("acme"), "KV_ABI_DISCOVERY_acme");
        assert_eq!(
            registry_key_subject("acme"),
            "$KV.ABI_DISCOVERY_acme.registry"
        );
        assert!(served_by_queue_group("abi.discovery.p1.v1.renew"));
        assert!(served_by_queue_group("abi.svc.document.v1.put"));
        assert!(!served_by_queue_group("abi.agent.p1.i1.h.v1.submit"));
        for op in Operation::ALL {
            assert_eq!(Operation::from_name(op.as_str()), Some(op));
        }
    }

    #[test]
    fn project_validation() {
        for ok in ["a", "default", "A-b_9", &"x".repeat(64)] {
            assert!(Project::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a.b", "a*", "a b", ">", &"x".repeat(65), "é"] {
            assert!(Project::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn micro_subjects() {
        assert_eq!(
            micro("PING", "abi-discovery", "X1"),
            [
                "$SRV.PING".to_owned(),
                "$SRV.PING.abi-discovery".to_owned(),
                "$SRV.PING.abi-discovery.X1".to_owned()
            ]
        );
    }
}
