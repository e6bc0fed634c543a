//! What the core makes of the store's answers: the stored bytes decoded into
//! a cacheable snapshot, and a store error as one log line.

use abi_proto::discovery::v1 as pb;
use bytes::Bytes;
use prost::Message as _;

use super::cache::Decoded;

/// Decodes stored bytes (empty: an empty registry).
pub(crate) fn decode(
    bytes: Bytes,
    revision: u64,
    token: u64,
    epoch: u64,
) -> Result<Decoded, prost::DecodeError> {
    let state = pb::RegistryState::decode(bytes)?;
    Ok(Decoded::new(state, revision, token, epoch))
}

/// `error` and its sources, for one log line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
