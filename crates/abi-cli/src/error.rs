//! Failures as an operator sees them: one line, the wire code, what to do,
//! and an exit code a script can branch on.

use std::fmt;

use abi_sdk::{CallError, CallErrorKind};

/// Success.
pub const EXIT_OK: u8 = 0;
/// The service answered with an error (the wire code is printed).
pub const EXIT_SERVICE: u8 = 1;
/// Bad usage or configuration (missing credentials, bad input).
pub const EXIT_USAGE: u8 = 2;
/// NATS or the discovery service could not be reached.
pub const EXIT_UNREACHABLE: u8 = 3;
/// `abictl wait` gave up.
pub const EXIT_WAIT_TIMEOUT: u8 = 4;

/// A failure with its exit code and a hint.
#[derive(Debug)]
pub struct Failure {
    /// The process exit code.
    pub exit: u8,
    /// One line: what failed (with the wire code when there is one).
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Failure {
    /// A usage or configuration failure.
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            exit: EXIT_USAGE,
            message: message.into(),
            hint: None,
        }
    }

    /// NATS or the service unreachable.
    pub fn unreachable(message: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            exit: EXIT_UNREACHABLE,
            message: message.into(),
            hint: Some(hint.into()),
        }
    }

    /// Attaches a hint.
    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Classifies a failed discovery call.
    pub fn from_call(err: &CallError, project: &str) -> Self {
        let code = err.code().map(str::to_owned).unwrap_or_else(|| {
            format!("{:?}", err.kind())
                .chars()
                .flat_map(|c| {
                    let upper = c.is_uppercase();
                    [upper.then_some('_'), Some(c.to_ascii_uppercase())]
                })
                .flatten()
                .collect::<String>()
                .trim_start_matches('_')
                .to_owned()
        });
        let message = format!("{code}: {}", err.message());
        use CallErrorKind as K;
        let (exit, hint) = match err.kind() {
            K::NoResponders => (
                EXIT_UNREACHABLE,
                format!("no abi-discovery serves project {project:?}: start it, or check ABI_PROJECT"),
            ),
            K::TimedOut | K::Transport => (
                EXIT_UNREACHABLE,
                "the service did not answer: check NATS_URL and that abi-discovery runs".into(),
            ),
            K::Unauthenticated => (
                EXIT_SERVICE,
                "the token was refused: use the service's secret (ABI_JWT_SECRET_FILE) or a fresh ABI_SERVICE_TOKEN".into(),
            ),
            K::PermissionDenied => (
                EXIT_SERVICE,
                "this identity may not do that: evict needs an admin identity (--as api)".into(),
            ),
            K::Token => (
                EXIT_USAGE,
                "cannot sign a token: check the secret or module key and --as".into(),
            ),
            K::ModuleNotFound => (
                EXIT_SERVICE,
                "no live instance: `abictl ls` shows what is registered".into(),
            ),
            K::IncompatibleModule => (
                EXIT_SERVICE,
                "no instance at that contract major: `abictl get <module>` shows the majors".into(),
            ),
            K::InstanceNotFound => (
                EXIT_SERVICE,
                "no such instance (already gone?): `abictl ls` shows the instance ids".into(),
            ),
            K::RegistryBusy | K::Unavailable | K::Internal | K::ResourceExhausted => (
                EXIT_SERVICE,
                "the service is overloaded or its KV bucket unavailable: retry, then check `nats kv info`".into(),
            ),
            _ => (EXIT_SERVICE, "see docs/operations.md".into()),
        };
        Self {
            exit,
            message,
            hint: Some(hint),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.hint {
            Some(hint) => write!(f, "{} ({hint})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Failure {}

/// The failure behind an error from a command: a [`Failure`] as is, a
/// [`CallError`] classified, anything else a service-side failure.
pub fn classify(err: &anyhow::Error, project: &str) -> Failure {
    if let Some(failure) = err.downcast_ref::<Failure>() {
        return Failure {
            exit: failure.exit,
            message: failure.message.clone(),
            hint: failure.hint.clone(),
        };
    }
    if let Some(call) = err.downcast_ref::<CallError>() {
        return Failure::from_call(call, project);
    }
    Failure {
        exit: EXIT_SERVICE,
        message: format!("{err:#}"),
        hint: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_and_refused_calls_get_distinct_exit_codes() {
        let none = CallError::new(CallErrorKind::NoResponders, "no responders");
        let failure = Failure::from_call(&none, "p");
        assert_eq!(failure.exit, EXIT_UNREACHABLE);
        assert!(
            failure.to_string().starts_with("NO_RESPONDERS: "),
            "{failure}"
        );

        let denied = CallError::new(CallErrorKind::PermissionDenied, "no");
        assert_eq!(Failure::from_call(&denied, "p").exit, EXIT_SERVICE);
        let err = anyhow::Error::new(Failure::usage("bad"));
        assert_eq!(classify(&err, "p").exit, EXIT_USAGE);
    }
}
