//! Credentials taken out of text before it leaves the process in a span
//! (an error's message may quote a key, a DSN, a token): the reference's
//! `scrub_secrets` (`naas_abi_sdk.redaction`), pattern for pattern, each
//! credential replaced by `[REDACTED]` and the rest kept readable.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// What a credential becomes.
pub const REDACTED: &str = "[REDACTED]";

/// Names whose value is a credential, as words (`api_key`, `access_token`,
/// `client_secret`, `X-Amz-Signature`, `password`, ...).
const SECRET_NAME: &str = r"(?:[a-z0-9]+[_-])*(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|token|secret|password|passwd|pwd|signature|credential)";
/// A value of `name=value` or `name: value`.
const VALUE: &str = r#"[^\s&,;"'}\]]+"#;

/// The patterns in the reference's order: (pattern, whether the first
/// group is kept before `[REDACTED]`, what follows it).
static PATTERNS: LazyLock<Vec<(Regex, bool, &'static str)>> = LazyLock::new(|| {
    let keep = |pattern: String| (compile(&pattern), true, "");
    let whole = |pattern: &str| (compile(pattern), false, "");
    vec![
        // scheme://user:password@host
        (
            compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://)[^\s/@:]+:[^\s/@]+@"),
            true,
            "@",
        ),
        // Authorization: [scheme] <credentials>
        keep(format!(
            r#"(?i)(\bauthorization["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token|digest)\s+)?){VALUE}"#
        )),
        (compile(r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]+=*"), true, ""),
        // JSON web tokens (service tokens are JWTs).
        whole(r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
        // Provider key shapes: OpenAI and the like, Stripe, GitHub, AWS,
        // Slack, Google.
        whole(r"\bsk-[A-Za-z0-9_\-]{16,}"),
        whole(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{10,}"),
        whole(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
        whole(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
        whole(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
        whole(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
        whole(r"\bAIza[0-9A-Za-z_\-]{30,}"),
        // key=value (query strings, forms); a bare "key" only with "=".
        keep(format!(
            r#"(?i)(\b(?:{SECRET_NAME}|key)\s*=\s*["']?){VALUE}"#
        )),
        // name: value and "name": "value" (headers, JSON, YAML).
        keep(format!(
            r#"(?i)(["']?\b{SECRET_NAME}["']?\s*:\s*["']?){VALUE}"#
        )),
    ]
});

fn compile(pattern: &str) -> Regex {
    // The patterns are constants of this file; a test compiles them all.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("a redaction pattern compiles")
}

/// `text` with credentials replaced by [`REDACTED`].
pub fn scrub_secrets(text: &str) -> String {
    let mut text = text.to_owned();
    for (pattern, keep_prefix, suffix) in PATTERNS.iter() {
        text = pattern
            .replace_all(&text, |caps: &Captures<'_>| {
                let whole = &caps[0];
                let prefix = if *keep_prefix {
                    caps.get(1).map_or("", |m| m.as_str())
                } else {
                    ""
                };
                // A value already redacted stays as it is (the reference's
                // look-ahead).
                if whole[prefix.len()..].starts_with('[') {
                    return whole.to_owned();
                }
                if *keep_prefix && prefix.eq_ignore_ascii_case("bearer") {
                    return format!("{prefix} {REDACTED}");
                }
                format!("{prefix}{REDACTED}{suffix}")
            })
            .into_owned();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden values from the reference's `scrub_secrets`.
    #[test]
    fn credentials_are_redacted_as_the_reference_redacts_them() {
        let cases = [
            (
                "connect to postgres://abi:hunter2@db:5432/x failed",
                "connect to postgres://[REDACTED]@db:5432/x failed",
            ),
            (
                "Authorization: Bearer abc.def.ghi",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "401 bearer sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX rejected",
                "401 bearer [REDACTED] rejected",
            ),
            (
                "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhcGkifQ.c2lnbmF0dXJl expired",
                "token [REDACTED] expired",
            ),
            (
                "GET /v1?api_key=s3cr3t&x=1",
                "GET /v1?api_key=[REDACTED]&x=1",
            ),
            (
                r#"{"client_secret": "abc123", "name": "x"}"#,
                r#"{"client_secret": "[REDACTED]", "name": "x"}"#,
            ),
            ("password=[REDACTED] already", "password=[REDACTED] already"),
            ("aws AKIAABCDEFGHIJKLMNOP key", "aws [REDACTED] key"),
            (
                "plain ingest:42 failed: boom",
                "plain ingest:42 failed: boom",
            ),
            ("x-amz-signature: deadbeef", "x-amz-signature: [REDACTED]"),
        ];
        for (text, want) in cases {
            assert_eq!(scrub_secrets(text), want, "{text}");
        }
    }
}
