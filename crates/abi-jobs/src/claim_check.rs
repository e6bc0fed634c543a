//! Claim checks on outgoing triggers (the reference's
//! `claim_check.prepare`): a trigger whose message would not fit the
//! broker's `max_payload` stores its body in the object store
//! `abi_claim_checks` and travels as an empty body plus the headers
//! `Abi-Claim-Check: <object name>` and `Abi-Claim-Check-Size: <bytes>`.
//! Hosts (Python and Rust) read the body back before the handler runs.
//!
//! The object is the reference's: a uuid4 hex name, chunks of
//! `min(128 KiB, max_payload / 2)` (each chunk is a message and must fit the
//! broker too), kept for the bucket's 7-day TTL. Workflows store step
//! results above the journal's limit the same way, when a step opts in.

use std::pin::Pin;
use std::task::{Context, Poll};

use abi_wire::jobs as wire;
use async_nats::jetstream::{self, object_store};
use tokio::io::{AsyncRead, ReadBuf};

/// Why a payload could not be stored or read as a claim check.
#[derive(Debug, thiserror::Error)]
pub enum ClaimCheckError {
    /// Above [`wire::CLAIM_CHECK_MAX_BYTES`], even for the object store.
    #[error("{size} bytes exceeds the {max}-byte claim-check limit; send a storage reference")]
    TooLarge {
        /// The payload's size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// The store could not be opened or created, or the put or read failed.
    #[error("claim-check store {bucket}: {detail}")]
    Store {
        /// The bucket.
        bucket: &'static str,
        /// What failed.
        detail: String,
    },
}

/// The chunk size of a claim-checked object under `max_payload`.
pub fn chunk_size(max_payload: usize) -> usize {
    wire::CLAIM_CHECK_MAX_CHUNK_BYTES
        .min(max_payload / 2)
        .max(1)
}

/// Stores `body` in the claim-check store and returns the object's name
/// (for [`wire::CLAIM_CHECK_HEADER`]).
///
/// # Errors
///
/// `TooLarge` above the object-store limit; `Store` when the store cannot be
/// opened (nor created) or the put fails.
///
/// # Cancel safety
///
/// Not cancel-safe: a cancelled put may leave chunks behind (they expire
/// with the bucket's TTL).
pub async fn store(
    js: &jetstream::Context,
    body: &[u8],
    max_payload: usize,
) -> Result<String, ClaimCheckError> {
    if body.len() > wire::CLAIM_CHECK_MAX_BYTES {
        return Err(ClaimCheckError::TooLarge {
            size: body.len(),
            max: wire::CLAIM_CHECK_MAX_BYTES,
        });
    }
    let fail = |detail: String| ClaimCheckError::Store {
        bucket: wire::CLAIM_CHECK_BUCKET,
        detail,
    };
    let bucket = open(js).await.map_err(fail)?;
    let name = uuid::Uuid::new_v4().simple().to_string();
    let chunk = chunk_size(max_payload);
    let meta = object_store::ObjectMetadata {
        name: name.clone(),
        chunk_size: Some(chunk),
        ..Default::default()
    };
    let mut reader = Chunked { rest: body, chunk };
    bucket
        .put(meta, &mut reader)
        .await
        .map_err(|e| fail(e.to_string()))?;
    Ok(name)
}

/// The object `name` of the claim-check store, read whole.
///
/// # Errors
///
/// [`ClaimCheckError::Store`] when the store or the object cannot be read
/// (an object past the bucket's TTL is gone).
///
/// # Cancel safety
///
/// Cancel safe: it only reads.
pub async fn fetch(js: &jetstream::Context, name: &str) -> Result<Vec<u8>, ClaimCheckError> {
    let fail = |detail: String| ClaimCheckError::Store {
        bucket: wire::CLAIM_CHECK_BUCKET,
        detail,
    };
    let store = js
        .get_object_store(wire::CLAIM_CHECK_BUCKET)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut object = store.get(name).await.map_err(|e| fail(e.to_string()))?;
    let mut body = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut object, &mut body)
        .await
        .map_err(|e| fail(e.to_string()))?;
    Ok(body)
}

/// The claim-check store, created with the platform's config when missing
/// (as the reference's caller does; discovery normally created it first).
async fn open(js: &jetstream::Context) -> Result<object_store::ObjectStore, String> {
    if let Ok(bucket) = js.get_object_store(wire::CLAIM_CHECK_BUCKET).await {
        return Ok(bucket);
    }
    let created = js
        .create_object_store(object_store::Config {
            bucket: wire::CLAIM_CHECK_BUCKET.to_owned(),
            description: Some(wire::CLAIM_CHECK_DESCRIPTION.to_owned()),
            max_age: std::time::Duration::from_secs(wire::CLAIM_CHECK_TTL_SECS),
            ..Default::default()
        })
        .await;
    match created {
        Ok(bucket) => Ok(bucket),
        // Created concurrently, or this user may not create streams but the
        // store exists by now.
        Err(e) => js
            .get_object_store(wire::CLAIM_CHECK_BUCKET)
            .await
            .map_err(|_| e.to_string()),
    }
}

/// A reader over a byte slice that hands out at most `chunk` bytes per
/// read: the object store publishes one message per read, and each must
/// stay under the broker's limit.
struct Chunked<'a> {
    rest: &'a [u8],
    chunk: usize,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.rest.len().min(self.chunk).min(buf.remaining());
        let (head, tail) = self.rest.split_at(n);
        buf.put_slice(head);
        self.rest = tail;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[test]
    fn chunks_are_the_references() {
        assert_eq!(chunk_size(1024 * 1024), 128 * 1024);
        assert_eq!(chunk_size(64 * 1024), 32 * 1024);
    }

    #[tokio::test]
    async fn reads_never_exceed_a_chunk() {
        let body = vec![7u8; 1000];
        let mut reader = Chunked {
            rest: &body,
            chunk: 300,
        };
        let mut buf = vec![0u8; 4096];
        let mut sizes = Vec::new();
        loop {
            let n = reader.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            sizes.push(n);
        }
        assert_eq!(sizes, [300, 300, 300, 100]);
    }
}
