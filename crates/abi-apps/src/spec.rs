//! An app's declaration: what discovery announces (`AppDescriptor`), the
//! folder whose files it serves, and the service that answers every other
//! path. [`AppSpec::read`] reads an app folder as the reference's `read_app`
//! does (`apps/<name>/manifest.json`).

use std::path::{Path, PathBuf};

use abi_proto::discovery::v1 as pb;
use abi_wire::apps as wire;

use crate::service::AppService;

/// Why an app folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The manifest is missing, unreadable or not JSON.
    #[error("Unreadable app manifest in {folder}: {reason}")]
    Unreadable {
        /// The app folder.
        folder: PathBuf,
        /// What failed.
        reason: String,
    },
    /// The manifest is JSON but not an object, or `max_upload_bytes` is not
    /// a non-negative integer.
    #[error("App manifest in {folder}: {reason}")]
    Invalid {
        /// The app folder.
        folder: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
}

/// One app: its descriptor, its files, its service.
#[derive(Clone, Debug)]
pub struct AppSpec {
    descriptor: pb::AppDescriptor,
    root: Option<PathBuf>,
    service: Option<AppService>,
}

impl AppSpec {
    /// An app named `name` (a URL segment: the runner refuses a bad one as
    /// the reference does), category `module`, entry `index.html`, contract
    /// major 1, no files and no service yet.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            descriptor: pb::AppDescriptor {
                name: name.into(),
                category: "module".to_owned(),
                entry: wire::DEFAULT_ENTRY.to_owned(),
                contract_major: 1,
                ..Default::default()
            },
            root: None,
            service: None,
        }
    }

    /// The app in `folder`, described by its `manifest.json` (`name`,
    /// `description`, `category`, `icon_emoji`, `url: "html:<entry>"`,
    /// `max_upload_bytes`), serving the folder's files.
    ///
    /// # Errors
    ///
    /// [`ReadError`] for a missing or malformed manifest.
    pub fn read(folder: impl AsRef<Path>) -> Result<Self, ReadError> {
        let folder = folder.as_ref();
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(folder.join(wire::MANIFEST)).map_err(|e| {
            ReadError::Unreadable {
                folder: folder.to_owned(),
                reason: e.to_string(),
            }
        })?;
        let manifest: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| ReadError::Unreadable {
                folder: folder.to_owned(),
                reason: e.to_string(),
            })?;
        let Some(manifest) = manifest.as_object() else {
            return Err(ReadError::Invalid {
                folder: folder.to_owned(),
                reason: "must be a JSON object",
            });
        };
        let text = |key: &str, default: &str| {
            manifest
                .get(key)
                .and_then(|v| v.as_str())
                .unwrap_or(default)
                .to_owned()
        };
        let entry = manifest
            .get("url")
            .and_then(|v| v.as_str())
            .and_then(|url| url.strip_prefix("html:"))
            .filter(|entry| !entry.is_empty())
            .unwrap_or(wire::DEFAULT_ENTRY)
            .to_owned();
        let max_upload_bytes = match manifest.get("max_upload_bytes") {
            None | Some(serde_json::Value::Null) => 0,
            Some(value) => value.as_u64().ok_or_else(|| ReadError::Invalid {
                folder: folder.to_owned(),
                reason: "max_upload_bytes must be a non-negative integer",
            })?,
        };
        Ok(Self {
            descriptor: pb::AppDescriptor {
                title: text("name", &name),
                description: text("description", ""),
                category: text("category", "module"),
                icon_emoji: text("icon_emoji", ""),
                entry,
                contract_major: 1,
                max_upload_bytes,
                name,
            },
            root: Some(folder.to_owned()),
            service: None,
        })
    }

    /// The title shown to people.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.descriptor.title = title.into();
        self
    }

    /// A one-line description.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.descriptor.description = description.into();
        self
    }

    /// The entry page, relative to the app's root.
    #[must_use]
    pub fn entry(mut self, entry: impl Into<String>) -> Self {
        self.descriptor.entry = entry.into();
        self
    }

    /// The largest request body the app takes (0: 1 GiB).
    #[must_use]
    pub fn max_upload_bytes(mut self, bytes: u64) -> Self {
        self.descriptor.max_upload_bytes = bytes;
        self
    }

    /// Serves the files of `folder` (suffixes of [`wire::STATIC_TYPES`]).
    #[must_use]
    pub fn folder(mut self, folder: impl Into<PathBuf>) -> Self {
        self.root = Some(folder.into());
        self
    }

    /// Answers every path the folder does not with `service`.
    #[must_use]
    pub fn service(mut self, service: AppService) -> Self {
        self.service = Some(service);
        self
    }

    /// The app's name.
    pub fn name(&self) -> &str {
        &self.descriptor.name
    }

    /// The descriptor discovery announces.
    pub fn descriptor(&self) -> &pb::AppDescriptor {
        &self.descriptor
    }

    /// The folder served, if any.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// The service, if any.
    pub fn app_service(&self) -> Option<&AppService> {
        self.service.as_ref()
    }

    /// The largest request body the app takes.
    pub fn upload_limit(&self) -> u64 {
        match self.descriptor.max_upload_bytes {
            0 => wire::DEFAULT_MAX_UPLOAD_BYTES,
            bytes => bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_folder_is_read_as_the_reference_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("board");
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(
            folder.join("manifest.json"),
            r#"{"name": "Board", "url": "html:main.html", "max_upload_bytes": 10, "category": 3}"#,
        )
        .unwrap();
        let app = AppSpec::read(&folder).unwrap();
        let d = app.descriptor();
        assert_eq!(
            (d.name.as_str(), d.title.as_str(), d.entry.as_str()),
            ("board", "Board", "main.html")
        );
        assert_eq!(d.category, "module", "a non-string falls back");
        assert_eq!((d.max_upload_bytes, app.upload_limit()), (10, 10));
        assert_eq!(app.root(), Some(folder.as_path()));

        std::fs::write(folder.join("manifest.json"), r#"{"max_upload_bytes": -1}"#).unwrap();
        assert!(matches!(
            AppSpec::read(&folder),
            Err(ReadError::Invalid { .. })
        ));
        std::fs::write(folder.join("manifest.json"), "[]").unwrap();
        assert!(matches!(
            AppSpec::read(&folder),
            Err(ReadError::Invalid { .. })
        ));
        assert!(matches!(
            AppSpec::read(dir.path().join("none")),
            Err(ReadError::Unreadable { .. })
        ));
        assert_eq!(
            AppSpec::new("x").upload_limit(),
            wire::DEFAULT_MAX_UPLOAD_BYTES
        );
    }
}
