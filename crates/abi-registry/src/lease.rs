//! Lease ownership: who may renew, unregister or speak for a registration.

use abi_proto::discovery::v1 as pb;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::{Error, ErrorCode, require};

/// Hex SHA-256 of a lease token, as stored in `RegistryRecord.lease_hash`.
///
/// Only the hash is stored, so reading the snapshot never reveals a token.
///
/// ```
/// assert_eq!(
///     abi_registry::lease_hash("abc"),
///     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
/// );
/// ```
pub fn lease_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Fails with PERMISSION_DENIED unless `owner` registered the record with
/// `token`. The hashes are compared in constant time.
pub(crate) fn authorize(
    record: &pb::RegistryRecord,
    token: &str,
    owner: &str,
) -> Result<(), Error> {
    let same_hash = || {
        bool::from(
            record
                .lease_hash
                .as_bytes()
                .ct_eq(lease_hash(token).as_bytes()),
        )
    };
    require(
        record.owner == owner && same_hash(),
        ErrorCode::PermissionDenied,
        "Registration belongs to another lease or caller",
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn only_the_owner_with_the_token_is_authorized() {
        let record = pb::RegistryRecord {
            owner: "me".into(),
            lease_hash: lease_hash("t".repeat(32).as_str()),
            ..Default::default()
        };
        assert!(authorize(&record, &"t".repeat(32), "me").is_ok());
        for (token, owner) in [
            ("t".repeat(32), "you"),
            ("u".repeat(32), "me"),
            (String::new(), "me"),
        ] {
            let err = authorize(&record, &token, owner).unwrap_err();
            assert_eq!(err.code(), ErrorCode::PermissionDenied);
        }
    }
}
