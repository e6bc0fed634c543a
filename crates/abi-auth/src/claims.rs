//! Signing and verifying tokens, with PyJWT's claim rules.
//!
//! Tokens are encoded the way PyJWT encodes them (sorted header keys, compact JSON,
//! claims in the order `sub`, `iat`, `exp`, `aud`), so for an ASCII identity and the
//! same inputs both sides produce the same bytes.

use std::borrow::Cow;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Validation};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::keys::{is_first_party, module_key};
use crate::{AuthError, InvalidToken, MODULE_KEY_ID};

/// The JOSE header, fields in PyJWT's (sorted) order.
#[derive(Serialize)]
struct JoseHeader<'a> {
    alg: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    kid: Option<&'a str>,
    typ: &'static str,
}

/// The claims we issue, in the reference's order.
#[derive(Serialize)]
struct IssuedClaims<'a> {
    sub: &'a str,
    iat: u64,
    exp: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<&'a str>,
}

pub(crate) fn sign(
    identity: &str,
    key: &str,
    kid: Option<&str>,
    ttl: Duration,
    now: SystemTime,
    audience: Option<&str>,
) -> Result<String, AuthError> {
    if identity.is_empty() {
        return Err(AuthError::EmptyIdentity);
    }
    if audience.is_some_and(str::is_empty) {
        return Err(AuthError::EmptyAudience);
    }
    let encoding = EncodingKey::from_secret(key.as_bytes()).map_err(|_| AuthError::EmptyKey)?;
    // PyJWT turns datetimes into whole seconds by truncation; a time before the epoch
    // cannot be expressed as a NumericDate we issue, so it saturates to the epoch.
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let claims = IssuedClaims {
        sub: identity,
        iat: since_epoch.as_secs(),
        exp: since_epoch.saturating_add(ttl).as_secs(),
        aud: audience,
    };
    let header = JoseHeader {
        alg: "HS256",
        kid,
        typ: "JWT",
    };
    let message = format!("{}.{}", encode_part(&header)?, encode_part(&claims)?);
    let signature = jsonwebtoken::crypto::sign(message.as_bytes(), &encoding, Algorithm::HS256)
        .map_err(AuthError::Signing)?;
    Ok(format!("{message}.{signature}"))
}

fn encode_part<T: Serialize>(part: &T) -> Result<String, AuthError> {
    let json = serde_json::to_vec(part)
        .map_err(|e| AuthError::Signing(jsonwebtoken::errors::Error::from(e)))?;
    Ok(URL_SAFE_NO_PAD.encode(json))
}

pub(crate) fn verify(
    token: &str,
    secret: &str,
    audience: Option<&str>,
    now: SystemTime,
) -> Result<String, AuthError> {
    TimedClaims::of(&verify_signature(token, secret)?).check(audience, now)
}

/// The claims of `token` once its signature checks (no claim checked yet).
pub(crate) fn verify_signature(token: &str, secret: &str) -> Result<Map<String, Value>, AuthError> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| InvalidToken::Malformed)?;
    let key: Cow<'_, str> = if header.kid.as_deref() == Some(MODULE_KEY_ID) {
        // Read unverified only to learn whose key checks the signature.
        let claims: Map<String, Value> = jsonwebtoken::dangerous::insecure_decode_claims(token)
            .map_err(|_| InvalidToken::Malformed)?;
        let claimed = match claims.get("sub") {
            Some(Value::String(sub)) if !sub.is_empty() => sub.as_str(),
            _ => return Err(InvalidToken::Subject.into()),
        };
        if is_first_party(claimed) {
            return Err(InvalidToken::FirstPartyModuleToken.into());
        }
        Cow::Owned(module_key(secret, claimed)?)
    } else {
        Cow::Borrowed(secret)
    };
    let decoding = DecodingKey::from_secret(key.as_bytes()).map_err(|_| AuthError::EmptyKey)?;
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &decoding, &signature_only())
        .map_err(|e| match e.kind() {
            ErrorKind::InvalidSignature | ErrorKind::InvalidAlgorithm => InvalidToken::BadSignature,
            _ => InvalidToken::Malformed,
        })?;
    Ok(data.claims)
}

/// What PyJWT's claim checks read of a token's claims, worked out once, so a
/// token remembered by a [`crate::Verifier`] is checked against the clock
/// without looking its claims up again.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimedClaims {
    /// `aud`, unless absent or null.
    audience: Option<Value>,
    /// `iat`, `nbf` and `exp` when present: Python's `int()` of each,
    /// `None` where it raises.
    issued_at: Option<Option<i128>>,
    not_before: Option<Option<i128>>,
    expires: Option<Option<i128>>,
    /// `sub` is present but not a string.
    subject_not_text: bool,
    /// `jti` is present but not a string.
    id_not_text: bool,
    /// `sub` when it is a non-empty string.
    subject: Option<String>,
}

impl TimedClaims {
    /// The claims' parts the checks read.
    pub(crate) fn of(claims: &Map<String, Value>) -> Self {
        Self {
            audience: claims.get("aud").filter(|v| !v.is_null()).cloned(),
            issued_at: claims.get("iat").map(python_int),
            not_before: claims.get("nbf").map(python_int),
            expires: claims.get("exp").map(python_int),
            subject_not_text: claims.get("sub").is_some_and(|v| !v.is_string()),
            id_not_text: claims.get("jti").is_some_and(|v| !v.is_string()),
            subject: match claims.get("sub") {
                Some(Value::String(sub)) if !sub.is_empty() => Some(sub.clone()),
                _ => None,
            },
        }
    }

    /// The identity of a token whose signature checked, once its claims
    /// hold at `now` for `audience`: PyJWT's default claim validation with
    /// leeway 0, in its order, then a non-empty subject.
    pub(crate) fn check(
        &self,
        audience: Option<&str>,
        now: SystemTime,
    ) -> Result<String, AuthError> {
        self.check_claims(audience, now)?;
        self.subject
            .clone()
            .ok_or_else(|| InvalidToken::Subject.into())
    }

    fn check_claims(&self, audience: Option<&str>, now: SystemTime) -> Result<(), InvalidToken> {
        let now = match now.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        };
        if audience.is_some() && self.audience.is_none() {
            return Err(InvalidToken::Audience);
        }
        if let Some(iat) = self.issued_at {
            let iat = iat.ok_or(InvalidToken::BadTimeClaim)?;
            if iat as f64 > now {
                return Err(InvalidToken::Immature);
            }
        }
        if let Some(nbf) = self.not_before {
            let nbf = nbf.ok_or(InvalidToken::BadTimeClaim)?;
            if nbf as f64 > now {
                return Err(InvalidToken::Immature);
            }
        }
        if let Some(exp) = self.expires {
            let exp = exp.ok_or(InvalidToken::BadTimeClaim)?;
            if exp as f64 <= now {
                return Err(InvalidToken::Expired);
            }
        }
        check_audience(self.audience.as_ref().filter(|v| truthy(v)), audience)?;
        if self.subject_not_text {
            return Err(InvalidToken::Subject);
        }
        if self.id_not_text {
            return Err(InvalidToken::Malformed);
        }
        Ok(())
    }
}

/// HS256 signature checking only: the claims are checked by [`check_claims`] with
/// PyJWT's rules, which differ from the library's (leeway, `iat`, `exp` boundary).
fn signature_only() -> Validation {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.leeway = 0;
    validation
}

/// PyJWT's non-strict audience check: the claim is a string or a list of strings and
/// must contain the expected audience; without one expected, any audience is refused.
fn check_audience(claim: Option<&Value>, expected: Option<&str>) -> Result<(), InvalidToken> {
    let (claim, expected) = match (claim, expected) {
        (None, None) => return Ok(()),
        (Some(_), None) | (None, Some(_)) => return Err(InvalidToken::Audience),
        (Some(claim), Some(expected)) => (claim, expected),
    };
    let matches = match claim {
        Value::String(single) => single == expected,
        Value::Array(items) => {
            let mut found = false;
            for item in items {
                match item {
                    Value::String(s) => found |= s == expected,
                    _ => return Err(InvalidToken::Audience),
                }
            }
            found
        }
        _ => return Err(InvalidToken::Audience),
    };
    if matches {
        Ok(())
    } else {
        Err(InvalidToken::Audience)
    }
}

/// Python's `int(value)` for a JSON value: integers, truncated floats, booleans and
/// integer strings; `None` where Python raises.
fn python_int(value: &Value) -> Option<i128> {
    match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i128::from(i))
            } else if let Some(u) = n.as_u64() {
                Some(i128::from(u))
            } else {
                // Truncation toward zero is what Python's int() does to a float; the
                // cast saturates, which only matters for absurd values.
                n.as_f64()
                    .filter(|f| f.is_finite())
                    .map(|f| f.trunc() as i128)
            }
        }
        Value::Bool(b) => Some(i128::from(*b)),
        Value::String(s) => s.trim().parse().ok(),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// Python truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use serde_json::json;

    use super::*;

    /// PyJWT's order: a missing audience first when one is expected, then
    /// `iat`, `nbf`, `exp` (each its type, then its time), the audience,
    /// `sub`'s type, `jti`'s type, and last a non-empty subject.
    #[test]
    fn claims_are_checked_in_pyjwts_order() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        for (claims, audience, expected) in [
            (
                json!({"sub": "a", "iat": "x"}),
                Some("svc"),
                Err(InvalidToken::Audience),
            ),
            (
                json!({"sub": "a", "iat": "x", "exp": 1}),
                None,
                Err(InvalidToken::BadTimeClaim),
            ),
            (
                json!({"sub": "a", "iat": 2000, "nbf": "x"}),
                None,
                Err(InvalidToken::Immature),
            ),
            (
                json!({"sub": "a", "nbf": 2000, "exp": 1}),
                None,
                Err(InvalidToken::Immature),
            ),
            (
                json!({"sub": "a", "exp": 1000, "aud": "svc"}),
                None,
                Err(InvalidToken::Expired),
            ),
            (
                json!({"sub": "a", "exp": 1001, "aud": "svc"}),
                None,
                Err(InvalidToken::Audience),
            ),
            (json!({"sub": "a", "aud": ""}), None, Ok("a")),
            (
                json!({"sub": "a", "aud": ["x", "svc"]}),
                Some("svc"),
                Ok("a"),
            ),
            (
                json!({"sub": 5, "jti": 5}),
                None,
                Err(InvalidToken::Subject),
            ),
            (
                json!({"sub": "a", "jti": 5}),
                None,
                Err(InvalidToken::Malformed),
            ),
            (json!({"sub": ""}), None, Err(InvalidToken::Subject)),
            (
                json!({"iat": true, "exp": "1001"}),
                None,
                Err(InvalidToken::Subject),
            ),
            (
                json!({"sub": "a", "iat": 999.9, "exp": " 1001 "}),
                None,
                Ok("a"),
            ),
        ] {
            let Value::Object(map) = &claims else {
                unreachable!("every case is an object")
            };
            let got = TimedClaims::of(map).check(audience, now);
            match (&got, expected) {
                (Ok(sub), Ok(want)) => assert_eq!(sub, want, "{claims}"),
                (Err(AuthError::Invalid(reason)), Err(want)) => {
                    assert_eq!(*reason, want, "{claims}");
                }
                _ => panic!("{claims}: got {got:?}, expected {expected:?}"),
            }
        }
    }
}
