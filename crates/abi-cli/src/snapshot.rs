//! The registry snapshot: read from its KV key, decoded, and turned into
//! JSON without the lease hashes (they are credentials' fingerprints, of no
//! use to an operator).

use std::time::{SystemTime, UNIX_EPOCH};

use abi_sdk::pb;
use futures::FutureExt as _;
use prost::Message as _;
use serde_json::Value;

use crate::cli::Global;
use crate::error::Failure;

use abi_wire::discovery::{REGISTRY_KEY, registry_bucket};

/// A snapshot as stored.
#[derive(Debug, Default)]
pub struct Stored {
    /// The KV revision (0 when the key does not exist yet).
    pub revision: u64,
    /// Encoded size in bytes.
    pub size: usize,
    /// The decoded snapshot.
    pub state: pb::RegistryState,
}

/// Reads the snapshot of the configured project.
///
/// # Errors
///
/// The bucket does not exist (exit 1, with a hint), the read timed out
/// (exit 3), or the bytes do not decode.
///
/// # Cancel safety
///
/// Cancel safe: it only reads the KV key; dropping it abandons the read.
pub async fn read(nats: async_nats::Client, global: &Global) -> anyhow::Result<Stored> {
    let name = registry_bucket(&global.project);
    let js = async_nats::jetstream::new(nats);
    let read = async {
        let store = js.get_key_value(name.clone()).await.map_err(|e| {
            Failure {
                exit: crate::error::EXIT_SERVICE,
                message: format!("no KV bucket {name}: {e}"),
                hint: None,
            }
            .hint("abi-discovery creates it when it starts: is it running for this project?")
        })?;
        let entry = store
            .entry(REGISTRY_KEY)
            .await
            .map_err(|e| anyhow::anyhow!("cannot read {name}/{REGISTRY_KEY}: {e}"))?;
        anyhow::Ok(entry)
    };
    let timeout = std::time::Duration::from_secs(global.timeout_secs.max(1));
    let entry = tokio::time::timeout(timeout, read.boxed())
        .await
        .map_err(|_| {
            Failure::unreachable(
                format!("reading {name} timed out"),
                "check that JetStream is enabled on the server",
            )
        })??;
    let Some(entry) = entry else {
        return Ok(Stored::default());
    };
    Ok(Stored {
        revision: entry.revision,
        size: entry.value.len(),
        state: decode(&entry.value)?,
    })
}

/// Decodes snapshot bytes.
///
/// # Errors
///
/// The bytes are not a `RegistryState` (exit 2).
pub fn decode(bytes: &[u8]) -> Result<pb::RegistryState, Failure> {
    pb::RegistryState::decode(bytes).map_err(|e| {
        Failure::usage(format!("not a registry snapshot: {e}"))
            .hint("pipe the raw value: nats kv get ABI_DISCOVERY_<project> registry --raw")
    })
}

/// The records as JSON, lease hashes left out.
pub fn records_json(state: &pb::RegistryState) -> Value {
    let records = state
        .records
        .iter()
        .map(|record| {
            let mut value = serde_json::to_value(record).unwrap_or(Value::Null);
            if let Some(object) = value.as_object_mut() {
                object.remove("lease_hash");
            }
            value
        })
        .collect();
    Value::Array(records)
}

/// Seconds since the Unix epoch, as the registry counts time.
pub fn now_epoch() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn json_leaves_lease_hashes_out() {
        let state = pb::RegistryState {
            records: vec![pb::RegistryRecord {
                lease_hash: "abc".into(),
                owner: "m".into(),
                ..Default::default()
            }],
        };
        let json = records_json(&state);
        assert_eq!(json[0]["owner"], "m");
        assert!(json[0].get("lease_hash").is_none());
        let bytes = state.encode_to_vec();
        assert_eq!(decode(&bytes).unwrap(), state);
        assert_eq!(decode(b"\xff\xff").unwrap_err().exit, 2);
    }
}
