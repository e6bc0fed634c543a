//! Web apps served over NATS (`abi.app.v1`): the instance subject, the
//! reference's limits (`naas_abi_sdk.app_host`, `app_streams`, `apps`) and
//! the names a request's checks use.

/// The subject of app `name` of one instance:
/// `abi.mod.<project>.<instance_id>.app.<name>.http`.
pub fn http_subject(project: &str, instance_id: &str, name: &str) -> String {
    format!("abi.mod.{project}.{instance_id}.app.{name}.http")
}

/// The largest request body that travels inline in an `HttpRequest`.
pub const MAX_INLINE_REQUEST_BODY: usize = 1024 * 1024;
/// The largest `HttpRequest` message a host reads.
pub const MAX_REQUEST_BYTES: usize = MAX_INLINE_REQUEST_BODY + 64 * 1024;
/// A body up to this travels inline; a larger one streams.
pub const INLINE_BYTES: usize = 256 * 1024;
/// The largest chunk of a streamed body.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Seconds an app may neither read its body nor answer before it is
/// stopped (504).
pub const IDLE_SECONDS: u64 = 60;
/// Responses streaming at once in one process.
pub const MAX_STREAMS: usize = 256;
/// Uploads streaming into one process's apps at once.
pub const MAX_UPLOADS: usize = 16;
/// Seconds a granted `authorize_app` is reused (per caller token and app).
pub const AUTHORIZATION_SECONDS: u64 = 5;
/// A pull is retried this many times after a lost reply.
pub const PULL_RETRIES: usize = 3;
/// Seconds a reader waits for one chunk (the holder's keepalive is 15 s).
pub const PULL_TIMEOUT_SECONDS: u64 = 30;
/// The callers an app trusts to name a user: Nexus's API.
pub const USER_CALLERS: [&str; 1] = ["api"];
/// The files an app folder serves, by suffix, and their content types (as
/// Python's `mimetypes` names them).
pub const STATIC_TYPES: [(&str, &str); 14] = [
    (".css", "text/css"),
    (".gif", "image/gif"),
    (".html", "text/html"),
    (".ico", "image/vnd.microsoft.icon"),
    (".jpeg", "image/jpeg"),
    (".jpg", "image/jpeg"),
    (".js", "text/javascript"),
    (".json", "application/json"),
    (".mjs", "text/javascript"),
    (".png", "image/png"),
    (".svg", "image/svg+xml"),
    (".webp", "image/webp"),
    (".woff", "font/woff"),
    (".woff2", "font/woff2"),
];
/// Connection-level request headers that never cross the hop (RFC 9110
/// section 7.6.1); a response keeps its `content-length`.
pub const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
];
/// An app's entry page when its manifest names none.
pub const DEFAULT_ENTRY: &str = "index.html";
/// The largest request body an app takes when its manifest sets none: 1 GiB.
pub const DEFAULT_MAX_UPLOAD_BYTES: u64 = 1024 * 1024 * 1024;
/// The manifest of an app folder (`apps/<name>/manifest.json`).
pub const MANIFEST: &str = "manifest.json";
/// The folder of a module's apps.
pub const APPS_DIR: &str = "apps";

/// Whether `subject` is an inbox a body may be pulled from
/// (`_INBOX.` or `_INBOX_MODULES.`).
pub fn is_inbox(subject: &str) -> bool {
    subject.starts_with("_INBOX.") || subject.starts_with("_INBOX_MODULES.")
}

/// The chunk size of a streamed body for a broker of `max_payload`: room
/// for the envelope, between 16 KiB and [`CHUNK_BYTES`].
pub fn chunk_bytes(max_payload: usize) -> usize {
    (16 * 1024).max(CHUNK_BYTES.min(max_payload.saturating_sub(16 * 1024)))
}

/// Whether `header` (lower case) is a request header that does not cross.
pub fn is_hop_by_hop(header: &str) -> bool {
    HOP_BY_HOP.contains(&header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_inboxes_and_chunks() {
        assert_eq!(
            http_subject("demo", "i-1", "ui"),
            "abi.mod.demo.i-1.app.ui.http"
        );
        assert!(is_inbox("_INBOX.x") && is_inbox("_INBOX_MODULES.m.x"));
        assert!(!is_inbox("_INBOXES.x") && !is_inbox("abi.x"));
        assert_eq!(chunk_bytes(1024 * 1024), CHUNK_BYTES);
        assert_eq!(chunk_bytes(20 * 1024), 16 * 1024);
    }
}
