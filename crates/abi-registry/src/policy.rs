//! The configured policy: lease length and admin identities. A leaf, so the
//! mutations and the batch draft can read it without depending on the
//! entry points in `rules`.

use std::collections::BTreeSet;

use abi_wire::discovery::{DEFAULT_ADMIN_IDENTITIES, DEFAULT_LEASE_SECONDS};

/// The policy: lease length and the identities allowed to evict.
///
/// ```
/// use abi_registry::Rules;
///
/// let rules = Rules::new(30.0, ["ops"]).unwrap();
/// assert!(rules.is_admin("ops"));
/// assert!(!rules.is_admin("api"));
/// assert!(Rules::new(0.5, ["ops"]).is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    lease_seconds: f64,
    admin_identities: BTreeSet<String>,
}

/// Why a [`Rules`] could not be built.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RulesError {
    /// The lease is not finite, or shorter than one second.
    #[error("lease_seconds must be finite and at least 1, got {0}")]
    LeaseSeconds(f64),
    /// An admin identity is the empty string.
    #[error("admin identities must be non-empty names")]
    EmptyAdminIdentity,
}

impl Default for Rules {
    /// A 20 s lease and the admins `api` and `engine`, the reference's defaults.
    fn default() -> Self {
        Self {
            lease_seconds: DEFAULT_LEASE_SECONDS,
            admin_identities: DEFAULT_ADMIN_IDENTITIES
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        }
    }
}

impl Rules {
    /// A policy with a lease of `lease_seconds` and the given admin identities
    /// (an empty list means nobody may evict).
    ///
    /// # Errors
    /// [`RulesError::LeaseSeconds`] unless the lease is finite and at least one
    /// second; [`RulesError::EmptyAdminIdentity`] for an empty identity.
    pub fn new<I, S>(lease_seconds: f64, admin_identities: I) -> Result<Rules, RulesError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if !lease_seconds.is_finite() || lease_seconds < 1.0 {
            return Err(RulesError::LeaseSeconds(lease_seconds));
        }
        let admin_identities: BTreeSet<String> =
            admin_identities.into_iter().map(Into::into).collect();
        if admin_identities.iter().any(String::is_empty) {
            return Err(RulesError::EmptyAdminIdentity);
        }
        Ok(Rules {
            lease_seconds,
            admin_identities,
        })
    }

    /// The lease a register or renew grants, in seconds.
    pub fn lease_seconds(&self) -> f64 {
        self.lease_seconds
    }

    /// Whether `identity` may evict registrations.
    pub fn is_admin(&self, identity: &str) -> bool {
        self.admin_identities.contains(identity)
    }

    /// The identities allowed to evict, sorted.
    pub fn admin_identities(&self) -> impl Iterator<Item = &str> {
        self.admin_identities.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_lease_must_be_finite_and_at_least_a_second() {
        for bad in [0.0, 0.999, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                Rules::new(bad, ["api"]),
                Err(RulesError::LeaseSeconds(_))
            ));
        }
        assert_eq!(Rules::new(1.0, ["api"]).unwrap().lease_seconds(), 1.0);
    }

    #[test]
    fn admin_identities_must_be_named() {
        assert_eq!(
            Rules::new(20.0, ["api", ""]),
            Err(RulesError::EmptyAdminIdentity)
        );
        let nobody = Rules::new(20.0, Vec::<String>::new()).unwrap();
        assert!(!nobody.is_admin("api"));
        assert!(!nobody.is_admin(""));
    }

    #[test]
    fn defaults_are_the_references() {
        let rules = Rules::default();
        assert_eq!(rules.lease_seconds(), 20.0);
        assert_eq!(
            rules.admin_identities().collect::<Vec<_>>(),
            ["api", "engine"]
        );
    }
}
