//! Trace context on the wire, as the reference carries and names it
//! (`naas_abi_sdk.telemetry`): W3C `traceparent`/`tracestate` in NATS
//! message headers; a span per call named `<service>/<method>` of the
//! subject, with the reference's attribute names, so one trace mixes
//! Python and Rust spans.

/// The W3C trace context header.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C vendor state header.
pub const TRACESTATE: &str = "tracestate";
/// Both headers a hop carries on.
pub const HEADERS: [&str; 2] = [TRACEPARENT, TRACESTATE];

/// The reference's tracer (instrumentation scope) name.
pub const TRACER_NAME: &str = "naas_abi";

/// Span attribute names, the reference's.
pub mod attribute {
    /// Always `nats`.
    pub const RPC_SYSTEM: &str = "rpc.system";
    /// The subject's service ([`super::describe_subject`]).
    pub const RPC_SERVICE: &str = "rpc.service";
    /// The subject's method.
    pub const RPC_METHOD: &str = "rpc.method";
    /// Always `nats`.
    pub const MESSAGING_SYSTEM: &str = "messaging.system";
    /// The subject.
    pub const MESSAGING_DESTINATION: &str = "messaging.destination.name";
    /// Request payload bytes.
    pub const BODY_SIZE: &str = "messaging.message.body.size";
    /// Reply payload bytes.
    pub const REPLY_SIZE: &str = "abi.reply.body.size";
    /// The wire error code of a failed call.
    pub const ERROR_CODE: &str = "abi.error_code";
}

/// `nats`, the value of [`attribute::RPC_SYSTEM`] and
/// [`attribute::MESSAGING_SYSTEM`].
pub const SYSTEM: &str = "nats";

/// The (service, method) of a subject, as the reference names a span
/// (`describe_subject`): `abi.svc.<service>.<version>...<method>`,
/// `abi.discovery.<project>.<version>.<operation>`,
/// `abi.agent.<project>.<instance>.<digest>.v1.<operation>`,
/// `abi.jobs.<project>.<kind>...`; any other subject is `nats` and itself.
pub fn describe_subject(subject: &str) -> (&str, &str) {
    let parts: Vec<&str> = subject.split('.').collect();
    let last = parts.last().copied().unwrap_or(subject);
    match parts.as_slice() {
        ["abi", "svc", service, _, _, ..] => (service, last),
        ["abi", "discovery", _, _, operation] => ("discovery", operation),
        ["abi", "agent", _, _, _, _, operation] => ("agent", operation),
        ["abi", "jobs", _, kind, ..] => ("jobs", kind),
        _ => (SYSTEM, subject),
    }
}

/// A span's name for `subject`: `<service>/<method>`.
pub fn span_name(subject: &str) -> String {
    let (service, method) = describe_subject(subject);
    format!("{service}/{method}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden values from the reference's `describe_subject`.
    #[test]
    fn subjects_are_named_as_the_reference_names_them() {
        let cases = [
            ("abi.svc.document.v1.put", ("document", "put")),
            (
                "abi.svc.object_storage.v1.transfer.open",
                ("object_storage", "open"),
            ),
            (
                "abi.discovery.default.v1.register",
                ("discovery", "register"),
            ),
            (
                "abi.agent.default.inst-1.092c79e8f80e559e.v1.submit",
                ("agent", "submit"),
            ),
            (
                "abi.jobs.default.trigger.e017bc4baa74ce0d.fc1d1c045bbba645",
                ("jobs", "trigger"),
            ),
            (
                "abi.mod.default.i-1.model.echo.chat",
                (SYSTEM, "abi.mod.default.i-1.model.echo.chat"),
            ),
            ("abi.svc.document", (SYSTEM, "abi.svc.document")),
        ];
        for (subject, want) in cases {
            assert_eq!(describe_subject(subject), want, "{subject}");
        }
        assert_eq!(span_name("abi.svc.document.v1.get"), "document/get");
    }
}
