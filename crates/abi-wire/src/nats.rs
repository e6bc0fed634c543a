//! `NATS_URL`: one server or a comma-separated seed list of a cluster.
//!
//! Every process (`abi-discovery`, `abictl`, modules through the SDK) reads
//! the same setting the same way: entries are split on commas, blanks around
//! them are ignored, an entry without a scheme means `nats://`, and each must
//! be a URL with scheme `nats`, `tls`, `ws` or `wss` and a host (the rules
//! async-nats applies to each entry, checked up front so that the error names
//! the entry at fault). The client connects to any entry and fails over to
//! the others, and to the servers the cluster announces, when one goes away.

use std::fmt;

/// The NATS server when `NATS_URL` is unset (the reference's default).
pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";

/// Schemes a NATS client accepts.
const SCHEMES: [&str; 4] = ["nats", "tls", "ws", "wss"];

/// Why a server list was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerListError {
    /// The setting holds no server at all.
    #[error("no NATS server given")]
    Empty,
    /// An entry between two commas is blank (`a,,b` or a trailing comma).
    #[error("entry {position} of the NATS server list is empty")]
    EmptyEntry {
        /// 1-based position of the entry.
        position: usize,
    },
    /// An entry is not a NATS server URL.
    #[error("entry {position} of the NATS server list ({entry}) is not a NATS URL: {reason}")]
    Invalid {
        /// 1-based position of the entry.
        position: usize,
        /// The entry, with any credentials replaced by `<redacted>`.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A checked list of NATS server URLs, in the order given.
///
/// `Display` shows the list without credentials (safe to log);
/// [`urls`](Self::urls) gives the entries, credentials included, to connect
/// with (`async_nats::connect(list.urls())`).
#[derive(Clone, PartialEq, Eq)]
pub struct ServerList {
    urls: Vec<String>,
}

impl ServerList {
    /// Parses a `NATS_URL` value: one URL or several separated by commas.
    ///
    /// # Errors
    ///
    /// [`ServerListError`] naming the first entry at fault.
    pub fn parse(value: &str) -> Result<Self, ServerListError> {
        if value.trim().is_empty() {
            return Err(ServerListError::Empty);
        }
        let urls = value
            .split(',')
            .enumerate()
            .map(|(index, entry)| check_entry(index + 1, entry.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { urls })
    }

    /// The entries as given (trimmed), credentials included: pass them to the
    /// NATS client, never to a log.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }
}

impl fmt::Display for ServerList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, url) in self.urls.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&redact(url))?;
        }
        Ok(())
    }
}

impl fmt::Debug for ServerList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerList({self})")
    }
}

impl std::str::FromStr for ServerList {
    type Err = ServerListError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::parse(value)
    }
}

/// Checks one trimmed entry as the NATS client will read it.
fn check_entry(position: usize, entry: &str) -> Result<String, ServerListError> {
    if entry.is_empty() {
        return Err(ServerListError::EmptyEntry { position });
    }
    let invalid = |reason: String| ServerListError::Invalid {
        position,
        entry: redact(entry),
        reason,
    };
    let parsed = if entry.contains("://") {
        url::Url::parse(entry)
    } else {
        url::Url::parse(&format!("nats://{entry}"))
    }
    .map_err(|e| invalid(e.to_string()))?;
    if !SCHEMES.contains(&parsed.scheme()) {
        return Err(invalid(format!(
            "scheme {} is not one of {}",
            parsed.scheme(),
            SCHEMES.join(", ")
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("no host".into()));
    }
    Ok(entry.to_owned())
}

/// `entry` with any `user:password@` (or `token@`) part replaced.
fn redact(entry: &str) -> String {
    let body_start = entry.find("://").map_or(0, |i| i + 3);
    match entry[body_start..].rfind('@') {
        Some(at) => format!(
            "{}<redacted>@{}",
            &entry[..body_start],
            &entry[body_start + at + 1..]
        ),
        None => entry.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn one_url_and_a_seed_list_parse() {
        let one = ServerList::parse(DEFAULT_NATS_URL).unwrap();
        assert_eq!(one.urls(), [DEFAULT_NATS_URL]);
        let list = ServerList::parse(" nats://a:4222, tls://b:4223 ,c:4224").unwrap();
        assert_eq!(list.urls(), ["nats://a:4222", "tls://b:4223", "c:4224"]);
        assert_eq!(list.to_string(), "nats://a:4222,tls://b:4223,c:4224");
    }

    #[test]
    fn bad_entries_are_named() {
        assert_eq!(ServerList::parse("  "), Err(ServerListError::Empty));
        assert_eq!(
            ServerList::parse("nats://a:1,,nats://b:2"),
            Err(ServerListError::EmptyEntry { position: 2 })
        );
        assert_eq!(
            ServerList::parse("nats://a:1,"),
            Err(ServerListError::EmptyEntry { position: 2 })
        );
        let err = ServerList::parse("nats://a:1,nats://b:notaport").unwrap_err();
        assert!(
            matches!(&err, ServerListError::Invalid { position: 2, entry, .. } if entry == "nats://b:notaport"),
            "{err:?}"
        );
        let err = ServerList::parse("http://a:1").unwrap_err();
        assert!(err.to_string().contains("scheme http"), "{err}");
    }

    #[test]
    fn credentials_never_show() {
        let list = ServerList::parse("nats://u:p@h:1,tls://tok@h2:2,x:y@h3").unwrap();
        assert_eq!(
            list.to_string(),
            "nats://<redacted>@h:1,tls://<redacted>@h2:2,<redacted>@h3"
        );
        assert!(!format!("{list:?}").contains("u:p"));
        assert_eq!(list.urls()[0], "nats://u:p@h:1");
        let err = ServerList::parse("nats://u:secret@h:bad").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}
