//! A trigger's payload as the reference reads it: the body, read back from
//! the claim-check object store when the trigger carries a reference, then
//! parsed (`{}` when empty, an object as is, another JSON value as
//! `{"value": v}`, anything else as `{"raw": text}`).

use abi_wire::jobs as wire;
use async_nats::jetstream::Message;

use super::Shared;

/// Why a payload could not be read (the delivery is deferred).
#[derive(Debug, thiserror::Error)]
#[error("claim check {name}: {reason}")]
pub(super) struct PayloadError {
    name: String,
    reason: String,
}

/// The trigger's payload.
pub(super) async fn read(
    shared: &Shared,
    msg: &Message,
) -> Result<serde_json::Value, PayloadError> {
    let name = msg
        .headers
        .as_ref()
        .and_then(|h| h.get(wire::CLAIM_CHECK_HEADER))
        .map(|v| v.as_str().to_owned())
        .filter(|v| !v.is_empty());
    let Some(name) = name else {
        return Ok(parse(&msg.payload));
    };
    // Boxed: the object store's read is several KiB of future, which every
    // delivery would otherwise carry (and copy) for a path few take.
    let body = Box::pin(crate::claim_check::fetch(&shared.js, &name))
        .await
        .map_err(|e| PayloadError {
            name: name.clone(),
            reason: e.to_string(),
        })?;
    Ok(parse(&body))
}

fn parse(body: &[u8]) -> serde_json::Value {
    if body.is_empty() {
        return serde_json::json!({});
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(v) => serde_json::json!({ "value": v }),
        Err(_) => serde_json::json!({ "raw": String::from_utf8_lossy(body) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_parse_as_the_references() {
        assert_eq!(parse(b""), serde_json::json!({}));
        assert_eq!(parse(b"[1]"), serde_json::json!({"value": [1]}));
        assert_eq!(parse(b"{\"a\":1}"), serde_json::json!({"a": 1}));
        assert_eq!(parse(b"not json"), serde_json::json!({"raw": "not json"}));
    }
}
