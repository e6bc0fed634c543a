//! Errors of token issue and verification.

/// Why a token could not be issued or was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// The identity to assert or derive a key for is empty.
    #[error("identity must be a non-empty string")]
    EmptyIdentity,
    /// An audience was given but is empty.
    #[error("audience must be a non-empty string")]
    EmptyAudience,
    /// No module key exists for a first-party identity.
    #[error("{0:?} is a first-party identity: no module key exists for it")]
    FirstPartyIdentity(String),
    /// The signing or verifying key is empty.
    #[error("the signing key must not be empty")]
    EmptyKey,
    /// Signing failed in the JWT library.
    #[error("could not sign the token")]
    Signing(#[source] jsonwebtoken::errors::Error),
    /// The token was refused.
    #[error("invalid service token: {0}")]
    Invalid(InvalidToken),
}

impl AuthError {
    /// Whether the token itself was refused (as opposed to a problem issuing one).
    pub fn is_invalid_token(&self) -> bool {
        matches!(self, Self::Invalid(_))
    }
}

/// Why a token was refused. Callers should not act differently on these: they exist
/// for tests and debug logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidToken {
    /// Not three base64url JSON parts, a bad header, or a non-object payload.
    #[error("malformed token")]
    Malformed,
    /// The signature does not match, or the algorithm is not HS256.
    #[error("signature verification failed")]
    BadSignature,
    /// `exp` is in the past.
    #[error("signature has expired")]
    Expired,
    /// `iat` or `nbf` is in the future.
    #[error("the token is not yet valid")]
    Immature,
    /// A time claim is not an integer.
    #[error("a time claim is not an integer")]
    BadTimeClaim,
    /// The audience is missing, unexpected or different.
    #[error("invalid audience")]
    Audience,
    /// `sub` is missing, empty or not a string (or another claim has the wrong type).
    #[error("token is missing a valid 'sub' claim")]
    Subject,
    /// A module token asserts a first-party identity.
    #[error("a module token cannot assert a first-party identity")]
    FirstPartyModuleToken,
}

impl From<InvalidToken> for AuthError {
    fn from(reason: InvalidToken) -> Self {
        Self::Invalid(reason)
    }
}
