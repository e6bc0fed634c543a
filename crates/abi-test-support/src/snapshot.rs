//! Reading a project's registry snapshot straight from its KV bucket.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;

/// How long [`stored_snapshot`] may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the stored snapshot could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotReadError(pub String);

impl fmt::Display for SnapshotReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SnapshotReadError {}

/// The encoded `RegistryState` of `project` as stored under its KV key;
/// `None` when the bucket exists but nothing was written yet.
///
/// # Errors
///
/// The bucket does not exist, the read fails or takes longer than 30 s.
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn stored_snapshot(
    client: &async_nats::Client,
    project: &str,
) -> Result<Option<Bytes>, SnapshotReadError> {
    let bucket = abi_wire::discovery::registry_bucket(project);
    let js = async_nats::jetstream::new(client.clone());
    let read = async {
        let kv = js
            .get_key_value(bucket.clone())
            .await
            .map_err(|e| SnapshotReadError(format!("no KV bucket {bucket}: {e}")))?;
        kv.get(abi_wire::discovery::REGISTRY_KEY)
            .await
            .map_err(|e| {
                SnapshotReadError(format!(
                    "cannot read {bucket}/{}: {e}",
                    abi_wire::discovery::REGISTRY_KEY
                ))
            })
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .map_err(|_| SnapshotReadError(format!("reading {bucket} took over {READ_TIMEOUT:?}")))?
}
