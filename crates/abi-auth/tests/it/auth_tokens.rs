//! Token issue and verification against PyJWT's rules, in-process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use abi_auth::{
    AuthError, BOUND_TTL, DEFAULT_TTL, InvalidToken, issue_module_token, issue_service_token,
    module_key, verify, verify_at,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const SECRET: &str = "a-project-secret-with-enough-entropy-0123456789";

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn reason(result: Result<String, AuthError>) -> InvalidToken {
    match result {
        Err(AuthError::Invalid(reason)) => reason,
        other => panic!("expected an invalid token, got {other:?}"),
    }
}

/// Signs arbitrary header and claims JSON with `key`, to build tokens we never issue.
fn forge(header: &str, claims: &str, key: &str) -> String {
    let message = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let enc = jsonwebtoken::EncodingKey::from_secret(key.as_bytes()).unwrap();
    let sig = jsonwebtoken::crypto::sign(message.as_bytes(), &enc, jsonwebtoken::Algorithm::HS256)
        .unwrap();
    format!("{message}.{sig}")
}

#[test]
fn service_token_round_trip_and_layout() {
    let token = issue_service_token("api", SECRET, DEFAULT_TTL, at(1_000), None).unwrap();
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    let header = URL_SAFE_NO_PAD.decode(parts[0]).unwrap();
    assert_eq!(header, br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.decode(parts[1]).unwrap();
    assert_eq!(claims, br#"{"sub":"api","iat":1000,"exp":4600}"#);
    assert_eq!(
        verify_at(&token, SECRET, None, at(1_500)).unwrap(),
        "api".to_owned()
    );
}

#[test]
fn module_token_round_trip_and_kid() {
    let key = module_key(SECRET, "billing").unwrap();
    let token = issue_module_token("billing", &key, DEFAULT_TTL, at(10), None).unwrap();
    let header = URL_SAFE_NO_PAD
        .decode(token.split('.').next().unwrap())
        .unwrap();
    assert_eq!(header, br#"{"alg":"HS256","kid":"module","typ":"JWT"}"#);
    assert_eq!(verify_at(&token, SECRET, None, at(11)).unwrap(), "billing");
}

#[test]
fn expiry_boundary_matches_pyjwt() {
    let token =
        issue_service_token("engine", SECRET, Duration::from_secs(60), at(100), None).unwrap();
    // exp = 160: valid strictly before, expired at and after (no leeway).
    assert!(verify_at(&token, SECRET, None, at(159) + Duration::from_millis(999)).is_ok());
    assert_eq!(
        reason(verify_at(&token, SECRET, None, at(160))),
        InvalidToken::Expired
    );
    assert_eq!(
        reason(verify_at(&token, SECRET, None, at(10_000))),
        InvalidToken::Expired
    );
}

#[test]
fn issued_in_the_future_is_refused() {
    let token = issue_service_token("engine", SECRET, DEFAULT_TTL, at(100), None).unwrap();
    assert_eq!(
        reason(verify_at(&token, SECRET, None, at(99))),
        InvalidToken::Immature
    );
    assert!(verify_at(&token, SECRET, None, at(100)).is_ok());
}

#[test]
fn audience_rules() {
    let now = SystemTime::now();
    let bound = issue_service_token("api", SECRET, BOUND_TTL, now, Some("inst-1")).unwrap();
    assert_eq!(verify(&bound, SECRET, Some("inst-1")).unwrap(), "api");
    assert_eq!(reason(verify(&bound, SECRET, None)), InvalidToken::Audience);
    assert_eq!(
        reason(verify(&bound, SECRET, Some("inst-2"))),
        InvalidToken::Audience
    );
    let unbound = issue_service_token("api", SECRET, DEFAULT_TTL, now, None).unwrap();
    assert_eq!(
        reason(verify(&unbound, SECRET, Some("inst-1"))),
        InvalidToken::Audience
    );
    assert!(matches!(
        issue_service_token("api", SECRET, DEFAULT_TTL, now, Some("")),
        Err(AuthError::EmptyAudience)
    ));
}

#[test]
fn audience_list_and_falsy_values_follow_pyjwt() {
    let list = forge(
        r#"{"alg":"HS256","typ":"JWT"}"#,
        r#"{"sub":"api","aud":["x","inst-1"]}"#,
        SECRET,
    );
    assert_eq!(verify(&list, SECRET, Some("inst-1")).unwrap(), "api");
    // An empty audience claim counts as none at all.
    let empty = forge(
        r#"{"alg":"HS256","typ":"JWT"}"#,
        r#"{"sub":"api","aud":""}"#,
        SECRET,
    );
    assert_eq!(verify(&empty, SECRET, None).unwrap(), "api");
    assert_eq!(
        reason(verify(&empty, SECRET, Some("inst-1"))),
        InvalidToken::Audience
    );
}

#[test]
fn tokens_without_exp_are_accepted_as_pyjwt_does() {
    let token = forge(r#"{"alg":"HS256"}"#, r#"{"sub":"engine"}"#, SECRET);
    assert_eq!(verify(&token, SECRET, None).unwrap(), "engine");
}

#[test]
fn wrong_keys_are_refused() {
    let now = SystemTime::now();
    let token = issue_service_token("api", "another-secret", DEFAULT_TTL, now, None).unwrap();
    assert_eq!(
        reason(verify(&token, SECRET, None)),
        InvalidToken::BadSignature
    );
    // A module key used for another identity.
    let key = module_key(SECRET, "billing").unwrap();
    let token = issue_module_token("shipping", &key, DEFAULT_TTL, now, None).unwrap();
    assert_eq!(
        reason(verify(&token, SECRET, None)),
        InvalidToken::BadSignature
    );
    // A project-secret token wearing the module kid is checked with the module key.
    let token = forge(
        r#"{"alg":"HS256","kid":"module"}"#,
        r#"{"sub":"billing"}"#,
        SECRET,
    );
    assert_eq!(
        reason(verify(&token, SECRET, None)),
        InvalidToken::BadSignature
    );
}

#[test]
fn module_token_cannot_assert_first_party() {
    // Even signed with the real secret, the module kid forbids a first-party subject.
    let token = forge(
        r#"{"alg":"HS256","kid":"module","typ":"JWT"}"#,
        r#"{"sub":"api"}"#,
        SECRET,
    );
    assert_eq!(
        reason(verify(&token, SECRET, None)),
        InvalidToken::FirstPartyModuleToken
    );
}

#[test]
fn malformed_tokens_are_refused() {
    for token in ["", "abc", "a.b", "a.b.c", "..."] {
        assert!(verify(token, SECRET, None).unwrap_err().is_invalid_token());
    }
    let none_alg = forge(r#"{"alg":"none"}"#, r#"{"sub":"api"}"#, SECRET);
    assert!(verify(&none_alg, SECRET, None).is_err());
    let hs512 = forge(r#"{"alg":"HS512"}"#, r#"{"sub":"api"}"#, SECRET);
    assert!(verify(&hs512, SECRET, None).is_err());
    let array = forge(r#"{"alg":"HS256"}"#, r#"["api"]"#, SECRET);
    assert!(verify(&array, SECRET, None).is_err());
    let no_sub = forge(r#"{"alg":"HS256"}"#, r#"{"iat":1}"#, SECRET);
    assert_eq!(reason(verify(&no_sub, SECRET, None)), InvalidToken::Subject);
    let number_sub = forge(r#"{"alg":"HS256"}"#, r#"{"sub":5}"#, SECRET);
    assert_eq!(
        reason(verify(&number_sub, SECRET, None)),
        InvalidToken::Subject
    );
    let bad_exp = forge(r#"{"alg":"HS256"}"#, r#"{"sub":"a","exp":"soon"}"#, SECRET);
    assert_eq!(
        reason(verify(&bad_exp, SECRET, None)),
        InvalidToken::BadTimeClaim
    );
    // A difference kept on purpose (README): PyJWT's `int("4_000_000_000")`
    // takes the underscores; RFC 7519 makes `exp` a number, so we refuse it.
    let underscored = forge(
        r#"{"alg":"HS256"}"#,
        r#"{"sub":"a","exp":"4_000_000_000"}"#,
        SECRET,
    );
    assert_eq!(
        reason(verify(&underscored, SECRET, None)),
        InvalidToken::BadTimeClaim
    );
}

#[test]
fn empty_identity_is_refused_when_issuing() {
    let now = SystemTime::now();
    assert!(matches!(
        issue_service_token("", SECRET, DEFAULT_TTL, now, None),
        Err(AuthError::EmptyIdentity)
    ));
    assert!(matches!(
        issue_module_token("", "k", DEFAULT_TTL, now, None),
        Err(AuthError::EmptyIdentity)
    ));
}
