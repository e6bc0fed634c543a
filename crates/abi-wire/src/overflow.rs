//! RPC overflow: requests and replies above the broker's max payload travel
//! as `abi.transfer.v1` chunks through a per-process overflow host on
//! `abi.rpc.overflow.*` (the reference's `naas_abi_sdk.overflow` and
//! `naas_abi_core.engine.nats_overflow`).
//!
//! A caller that can read a parked reply sends [`ACCEPT_HEADER`]` = 1`; a
//! service whose reply does not fit parks it with its process's host and
//! answers an empty body with [`REPLY_HEADER`] (the transfer id) and
//! [`SIZE_HEADER`]. A request that does not fit is uploaded first and sent
//! as an empty body with [`REQUEST_HEADER`]; the service reads the upload
//! before decoding.

/// The subject root of every overflow host.
pub const PREFIX: &str = "abi.rpc.overflow";
/// The queue group of `abi.rpc.overflow.open`: any host may open a session.
pub const OPEN_QUEUE_GROUP: &str = "abi.rpc.overflow.owners";
/// Sent by a caller that can download a parked reply (value `1`).
pub const ACCEPT_HEADER: &str = "Abi-Overflow";
/// The value of [`ACCEPT_HEADER`].
pub const ACCEPT_VALUE: &str = "1";
/// The transfer id of a parked reply.
pub const REPLY_HEADER: &str = "Abi-Overflow-Reply";
/// The byte size of a parked reply.
pub const SIZE_HEADER: &str = "Abi-Overflow-Size";
/// The transfer id of an uploaded request.
pub const REQUEST_HEADER: &str = "Abi-Overflow-Request";
/// The `OpenRequest.operation` of a request upload.
pub const UPLOAD_OPERATION: &str = "request";
/// The largest value (request or reply) that may overflow: 256 MiB.
pub const MAX_VALUE_BYTES: usize = 256 * 1024 * 1024;
/// The largest chunk: 1 MiB (and never more than half a broker packet).
pub const CHUNK_BYTES: usize = 1024 * 1024;
/// The smallest chunk a host accepts.
pub const MIN_CHUNK_BYTES: usize = 1024;
/// Sessions a host keeps open at once.
pub const MAX_SESSIONS: usize = 64;
/// Seconds a session may sit untouched before the host drops it.
pub const IDLE_SECONDS: u64 = 60;
/// Bytes of parked replies a host holds at once: 1 GiB.
pub const MAX_PARKED_BYTES: usize = 1024 * 1024 * 1024;
/// Bytes of uploads a host holds at once: 1 GiB.
pub const MAX_UPLOADED_BYTES: usize = 1024 * 1024 * 1024;
/// The largest `OpenRequest.metadata`.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// How long a service waits for each chunk of an upload it reads.
pub const FETCH_TIMEOUT_SECONDS: u64 = 10;

/// The five transfer operations, each a subject's last token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransferOp {
    /// Open a session (any host, through the queue group).
    Open,
    /// Append one chunk to an upload.
    Write,
    /// End the upload; reads may begin.
    Start,
    /// Read the next chunk.
    Read,
    /// Release the session.
    Close,
}

impl TransferOp {
    /// Every operation, `open` first.
    pub const ALL: [TransferOp; 5] = [
        TransferOp::Open,
        TransferOp::Write,
        TransferOp::Start,
        TransferOp::Read,
        TransferOp::Close,
    ];

    /// The subject token, e.g. `read`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferOp::Open => "open",
            TransferOp::Write => "write",
            TransferOp::Start => "start",
            TransferOp::Read => "read",
            TransferOp::Close => "close",
        }
    }
}

/// The chunk size for a broker limit: at most half a packet, at most 1 MiB.
pub fn chunk_size(max_payload: usize) -> usize {
    CHUNK_BYTES.min(max_payload / 2)
}

/// Whether a broker limit leaves room for transfer chunks at all.
pub fn possible(max_payload: usize) -> bool {
    chunk_size(max_payload) >= MIN_CHUNK_BYTES
}

/// Whether `owner` is a host id: 32 lowercase hex digits.
pub fn is_owner(owner: &str) -> bool {
    owner.len() == 32
        && owner
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The owner part of a session id `<owner>:<key>`, if it has one.
pub fn owner_of(transfer_id: &str) -> Option<&str> {
    transfer_id.split_once(':').map(|(owner, _)| owner)
}

/// The subject of `op` for session `transfer_id`: the owning host's
/// (`abi.rpc.overflow.<owner>.<op>`) when the id names one, else the shared
/// one every host hears. `None` for an id whose owner is not a host id.
pub fn subject(op: TransferOp, transfer_id: &str) -> Option<String> {
    match owner_of(transfer_id) {
        Some(owner) if !is_owner(owner) => None,
        Some(owner) if op != TransferOp::Open => Some(format!("{PREFIX}.{owner}.{}", op.as_str())),
        _ => Some(format!("{PREFIX}.{}", op.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_name_the_owner_when_the_id_does() {
        let owner = "0123456789abcdef0123456789abcdef";
        let id = format!("{owner}:feed");
        assert_eq!(
            subject(TransferOp::Read, &id).as_deref(),
            Some("abi.rpc.overflow.0123456789abcdef0123456789abcdef.read")
        );
        assert_eq!(
            subject(TransferOp::Close, "legacy").as_deref(),
            Some("abi.rpc.overflow.close")
        );
        assert_eq!(
            subject(TransferOp::Open, "").as_deref(),
            Some("abi.rpc.overflow.open")
        );
        assert_eq!(subject(TransferOp::Read, "NOT-HEX:x"), None);
        assert_eq!(subject(TransferOp::Read, "0123:x"), None);
    }

    #[test]
    fn chunks_fit_half_a_packet_and_at_most_a_mebibyte() {
        assert_eq!(chunk_size(1024 * 1024), 512 * 1024);
        assert_eq!(chunk_size(8 * 1024 * 1024), CHUNK_BYTES);
        assert!(possible(2048));
        assert!(!possible(2047));
    }
}
