//! [`Config::validate_for`]: whether a configuration can run a module's
//! declaration. Here, beside the declaration, so that `config.rs` stays
//! about settings only.

use crate::config::{Config, ConfigError, ConfigErrorKind};

use super::ModuleSpec;

impl Config {
    /// Checks that this configuration can run the module `spec` declares:
    /// the discovery settings ([`DiscoveryConfig::validate`]), discovery
    /// configured when the module declares dependencies, and a module key
    /// or service token when discovery is on. The runner calls it before
    /// connecting.
    ///
    /// # Errors
    ///
    /// The first problem found, in that order: what `validate` reports,
    /// [`ConfigErrorKind::InvalidDeclaration`] (a declaration the reference
    /// would refuse to read: [`ModuleSpec::check_declarations`]),
    /// [`ConfigErrorKind::DependenciesWithoutDiscovery`],
    /// [`ConfigErrorKind::MissingToken`].
    pub fn validate_for(&self, spec: &ModuleSpec) -> Result<(), ConfigError> {
        if let Some(discovery) = &self.discovery {
            discovery.validate()?;
        }
        spec.check_declarations()
            .map_err(|message| ConfigError::new(ConfigErrorKind::InvalidDeclaration, message))?;
        if !spec.descriptor.dependencies.is_empty() && self.discovery.is_none() {
            return Err(ConfigError::new(
                ConfigErrorKind::DependenciesWithoutDiscovery,
                "this module declares module dependencies: configure discovery (ABI_PROJECT)",
            ));
        }
        if self.discovery.is_some() && self.token.is_none() {
            return Err(ConfigError::new(
                ConfigErrorKind::MissingToken,
                format!(
                    "set ABI_MODULE_KEY to the module key of {:?}, or ABI_SERVICE_TOKEN",
                    spec.module_id()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::DiscoveryConfig;

    #[test]
    fn a_configuration_is_checked_against_the_module_it_runs() {
        let with_dependency = ModuleSpec::new("m").dependency("store", 1);
        let alone = ModuleSpec::new("m");
        let no_discovery = Config::default();
        assert_eq!(
            no_discovery
                .validate_for(&with_dependency)
                .unwrap_err()
                .kind(),
            ConfigErrorKind::DependenciesWithoutDiscovery
        );
        assert!(no_discovery.validate_for(&alone).is_ok());
        let no_token = Config::default().discovery(DiscoveryConfig::default());
        assert_eq!(
            no_token.validate_for(&alone).unwrap_err().kind(),
            ConfigErrorKind::MissingToken
        );
        let bad_project = Config::default().discovery(DiscoveryConfig::default().project("a.b"));
        assert_eq!(
            bad_project.validate_for(&alone).unwrap_err().kind(),
            ConfigErrorKind::InvalidProject
        );
        let ready = Config::from_lookup("m", &|key: &str| match key {
            "ABI_PROJECT" => Some("p".to_owned()),
            "ABI_SERVICE_TOKEN" => Some("t".to_owned()),
            _ => None,
        })
        .unwrap();
        assert!(ready.validate_for(&with_dependency).is_ok());
    }
}
