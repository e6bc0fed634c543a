//! Every NATS subject and queue group the service uses, in one place.
//!
//! `abi.discovery.<project>.v1.<op>` for the operations, served by the queue group
//! `abi.discovery.<project>.owners` so any number of owners share the load. The
//! project is validated once ([`Project::new`]) so a subject built from it is always
//! a valid, wildcard-free subject.

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
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if valid {
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
    format!("abi.discovery.{project}.v1.{}", op.as_str())
}

/// The queue group every owner of `project` serves in: `abi.discovery.<project>.owners`.
pub fn owners_queue(project: &Project) -> String {
    format!("abi.discovery.{project}.owners")
}

/// The NATS micro-service discovery subjects for `verb` (`PING`, `INFO`, `STATS`):
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
