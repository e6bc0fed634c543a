//! Module keys: per-identity signing keys derived from the project secret.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit as _, Mac as _};
use sha2::Sha256;

use crate::{AuthError, FIRST_PARTY_IDENTITIES};

/// The domain-separation prefix of the key derivation; changing it would change every
/// module key, so it is versioned.
const KEY_CONTEXT: &str = "abi.module-key.v1:";

/// Whether `identity` belongs to the engine's own processes.
pub fn is_first_party(identity: &str) -> bool {
    FIRST_PARTY_IDENTITIES.contains(&identity)
}

/// The key a module signs its tokens with: base64url (no padding) of
/// HMAC-SHA256(secret, `"abi.module-key.v1:" + identity`).
///
/// It needs no storage of its own and changes when the secret does. Tokens are signed
/// with the key's UTF-8 text, not the raw digest, as the reference does.
///
/// # Errors
///
/// [`AuthError::EmptyIdentity`], or [`AuthError::FirstPartyIdentity`] for `api`,
/// `engine` and `dagster`.
///
/// # Example
///
/// ```
/// let key = abi_auth::module_key("secret", "billing").unwrap();
/// assert_eq!(key.len(), 43);
/// assert!(abi_auth::module_key("secret", "api").is_err());
/// ```
pub fn module_key(secret: &str, identity: &str) -> Result<String, AuthError> {
    if identity.is_empty() {
        return Err(AuthError::EmptyIdentity);
    }
    if is_first_party(identity) {
        return Err(AuthError::FirstPartyIdentity(identity.to_owned()));
    }
    // HMAC accepts a key of any length (including empty), so this cannot fail; the
    // fallback keeps the function total without a panic path.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return Err(AuthError::EmptyKey);
    };
    mac.update(KEY_CONTEXT.as_bytes());
    mac.update(identity.as_bytes());
    Ok(URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn key_is_deterministic_and_per_identity() {
        let a = module_key("s3cret", "billing").unwrap();
        assert_eq!(a, module_key("s3cret", "billing").unwrap());
        assert_ne!(a, module_key("s3cret", "billing2").unwrap());
        assert_ne!(a, module_key("other", "billing").unwrap());
        assert!(!a.contains('='));
    }

    #[test]
    fn refuses_first_party_and_empty() {
        for id in FIRST_PARTY_IDENTITIES {
            assert!(matches!(
                module_key("s", id),
                Err(AuthError::FirstPartyIdentity(_))
            ));
        }
        assert!(matches!(module_key("s", ""), Err(AuthError::EmptyIdentity)));
    }
}
