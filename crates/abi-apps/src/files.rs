//! An app folder's files (the reference's `AppHost._static`): which path
//! names a file (no `..`, no empty or `.` segment, no backslash or NUL, a
//! served suffix, inside the folder once links are resolved, never the
//! manifest), its content type, and an entity tag that changes with it.
//! Answers carry `cache-control: no-cache`, so a new version of the module
//! is seen at once, and `304` for a matching `if-none-match`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use abi_wire::apps as wire;
use sha2::{Digest as _, Sha256};

/// The file `path` names below `root` (`entry` for `/`), if it is one an
/// app serves; `None` for anything else (the service then answers).
pub fn resolve(root: &Path, entry: &str, path: &str) -> Option<PathBuf> {
    let relative = match path.trim_start_matches('/') {
        "" => entry,
        relative => relative,
    };
    if relative
        .split('/')
        .any(|part| matches!(part, "" | "." | ".."))
        || relative.contains('\\')
        || relative.contains('\0')
    {
        return None;
    }
    content_type(relative)?;
    let root = root.canonicalize().ok()?;
    let file = root.join(relative).canonicalize().ok()?;
    if !file.starts_with(&root) || !file.is_file() {
        return None;
    }
    if file.parent() == Some(root.as_path()) && file.file_name()? == wire::MANIFEST {
        return None;
    }
    Some(file)
}

/// The content type of a served suffix (case-insensitive); `None` for a
/// suffix an app does not serve.
pub fn content_type(name: &str) -> Option<&'static str> {
    let dot = name.rfind('.')?;
    let suffix = name[dot..].to_ascii_lowercase();
    wire::STATIC_TYPES
        .iter()
        .find(|(s, _)| *s == suffix)
        .map(|(_, t)| *t)
}

/// Entity tags by file, kept while the file's time and size stay.
#[derive(Debug, Default)]
pub struct Etags {
    known: Mutex<HashMap<PathBuf, (SystemTime, u64, String)>>,
}

impl Etags {
    /// The tag of `file` (modified at `mtime`, `size` bytes): a hash of its
    /// content up to [`wire::INLINE_BYTES`], else of its time and size.
    pub fn of(&self, file: &Path, mtime: SystemTime, size: u64, content: Option<&[u8]>) -> String {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((t, s, tag)) = known.get(file)
            && (*t, *s) == (mtime, size)
        {
            return tag.clone();
        }
        let digest = match content {
            Some(bytes) => Sha256::digest(bytes),
            None => {
                let stamp = mtime
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                Sha256::digest(format!("{stamp}:{size}"))
            }
        };
        let tag = format!("\"{}\"", &hex::encode(digest)[..32]);
        known.insert(file.to_owned(), (mtime, size, tag.clone()));
        tag
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_served_files_inside_the_folder_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ui");
        std::fs::create_dir_all(root.join("js")).unwrap();
        for (name, body) in [
            ("index.html", "<p>hi</p>"),
            ("js/app.js", "1"),
            ("manifest.json", "{}"),
            ("notes.txt", "x"),
        ] {
            std::fs::write(root.join(name), body).unwrap();
        }
        std::fs::write(dir.path().join("secret.html"), "no").unwrap();
        let found = |path: &str| {
            resolve(&root, "index.html", path).map(|p| p.file_name().unwrap().to_owned())
        };
        assert_eq!(found("/").as_deref(), Some("index.html".as_ref()));
        assert_eq!(found("/js/app.js").as_deref(), Some("app.js".as_ref()));
        for refused in [
            "/manifest.json",
            "/notes.txt",
            "/../secret.html",
            "/js/../index.html",
            "/js//app.js",
            "/./index.html",
            "/js\\app.js",
            "/missing.html",
            "/index.html\0",
            "/js",
        ] {
            assert_eq!(found(refused), None, "{refused:?}");
        }
        assert_eq!(content_type("A.PNG"), Some("image/png"));
        assert_eq!(content_type("noext"), None);
    }

    #[test]
    fn a_tag_follows_the_file() {
        let tags = Etags::default();
        let t0 = SystemTime::UNIX_EPOCH;
        let a = tags.of(Path::new("/a"), t0, 2, Some(b"hi"));
        assert_eq!(a.len(), 34);
        assert_eq!(
            tags.of(Path::new("/a"), t0, 2, Some(b"ho")),
            a,
            "kept while time and size stay"
        );
        let later = t0 + std::time::Duration::from_secs(1);
        assert_ne!(tags.of(Path::new("/a"), later, 2, Some(b"ho")), a);
        assert_ne!(tags.of(Path::new("/b"), t0, 9, None), a);
    }
}
