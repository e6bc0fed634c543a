//! Secrets: values that never show in `Debug` or logs, and reading them
//! from files.

use std::fmt;

/// A secret string whose `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for signing, verifying or authenticating only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Reads a secret from a file, without its trailing line break.
///
/// # Errors
///
/// A message naming the file and what is wrong, for a configuration error.
///
/// When the file is there but this process may not read it (a private file
/// bind-mounted into a container keeps its host owner and mode), the error
/// says which uid and gid the process runs as, who owns the file with which
/// mode, and the ways to make them match.
pub fn read_secret_file(path: &std::path::Path) -> Result<String, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.trim_end_matches(['\r', '\n']).to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(format!(
            "cannot read {}: {e}; {}",
            path.display(),
            unreadable_secret_hint(path)
        )),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The project secret as a service binary takes it: `--jwt-secret-file`
/// (`ABI_JWT_SECRET_FILE`, preferred) or `--jwt-secret` (`ABI_JWT_SECRET`);
/// exactly one is required ([`SecretArgs::validate`]).
#[derive(Clone, Default)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SecretArgs {
    /// Project JWT secret. Prefer --jwt-secret-file; exactly one of the two is required.
    #[cfg_attr(
        feature = "clap",
        arg(long, env = "ABI_JWT_SECRET", hide_env_values = true)
    )]
    pub jwt_secret: Option<String>,

    /// File holding the project JWT secret (a trailing newline is ignored).
    #[cfg_attr(feature = "clap", arg(long, env = "ABI_JWT_SECRET_FILE"))]
    pub jwt_secret_file: Option<std::path::PathBuf>,
}

impl SecretArgs {
    /// Reads and checks the secret (see [`project_secret`]).
    ///
    /// # Errors
    ///
    /// The problem, naming the setting.
    pub fn validate(&self) -> Result<Secret, crate::SettingError> {
        project_secret(self.jwt_secret.as_deref(), self.jwt_secret_file.as_deref())
    }
}

impl fmt::Debug for SecretArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretArgs")
            .field(
                "jwt_secret",
                &self.jwt_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("jwt_secret_file", &self.jwt_secret_file)
            .finish()
    }
}

/// The project's JWT secret from `ABI_JWT_SECRET` (`value`) or
/// `ABI_JWT_SECRET_FILE` (`file`): exactly one must be given, and not empty.
///
/// # Errors
///
/// The problem, naming the setting, for a configuration error.
pub fn project_secret(
    value: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<Secret, crate::SettingError> {
    use crate::SettingError;
    let text = match (value, file) {
        (Some(_), Some(_)) => {
            return Err(SettingError::new(
                "ABI_JWT_SECRET",
                "set ABI_JWT_SECRET or ABI_JWT_SECRET_FILE, not both",
            ));
        }
        (None, None) => {
            return Err(SettingError::new(
                "ABI_JWT_SECRET",
                "required: set ABI_JWT_SECRET_FILE (or ABI_JWT_SECRET) to the project's JWT secret",
            ));
        }
        (Some(value), None) => value.to_owned(),
        (None, Some(path)) => {
            read_secret_file(path).map_err(|p| SettingError::new("ABI_JWT_SECRET_FILE", p))?
        }
    };
    if text.is_empty() {
        return Err(SettingError::new("ABI_JWT_SECRET", "the secret is empty"));
    }
    Ok(Secret::new(text))
}

/// Who this process is against who owns `path`, and the ways to match them.
#[cfg(unix)]
fn unreadable_secret_hint(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    // The kernel gives /proc/self the process's effective uid and gid.
    let me = std::fs::metadata("/proc/self").map(|m| (m.uid(), m.gid()));
    let file = std::fs::metadata(path).map(|m| (m.uid(), m.gid(), m.mode() & 0o7777));
    match (me, file) {
        (Ok((uid, gid)), Ok((owner, group, mode))) => format!(
            "this process runs as uid {uid} gid {gid}; the file belongs to uid {owner} gid \
             {group} with mode {mode:04o}. Run the service as the file's owner (compose: \
             `user: \"{owner}:{group}\"`, which docker-compose.yml takes from ABI_UID and \
             ABI_GID in .env), or give the file to uid {uid} (`chown {uid}`, mode 0400), \
             or to group {gid} with mode 0640 (`chgrp {gid}`)"
        ),
        (Ok((uid, gid)), Err(_)) => format!(
            "this process runs as uid {uid} gid {gid} and cannot even see the file: make \
             every directory on the way searchable and the file readable by it"
        ),
        (Err(_), _) => "make the file readable by the user this process runs as".to_owned(),
    }
}

/// Who this process is against who owns `path`, and the ways to match them.
#[cfg(not(unix))]
fn unreadable_secret_hint(_path: &std::path::Path) -> String {
    "make the file readable by the user this process runs as".to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_secret_never_shows_and_files_lose_their_line_break() {
        assert_eq!(format!("{:?}", Secret::new("s3cret")), "Secret(<redacted>)");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "abc\r\n").unwrap();
        assert_eq!(read_secret_file(&path).unwrap(), "abc");
        let missing = read_secret_file(&dir.path().join("nope")).unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
    }
}
