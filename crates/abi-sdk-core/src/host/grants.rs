//! [`Authorizations`]: discovery's answer to an `authorize_*` call, reused
//! for a (caller token, served name) pair for a few seconds and never past
//! the token's own expiry, bounded in size (the oldest answer goes first).
//! The agent and app hosts share it; a refusal is never remembered.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One remembered answer: reuse until, the answer, its insertion order.
type Entry<V> = (Instant, V, u64);
/// The answers by (token, name), and the next insertion order.
type Entries<V> = (HashMap<(String, String), Entry<V>>, u64);

/// Discovery's answers by (caller token, name), each reused for at most
/// `lifetime` seconds, at most `capacity` of them.
#[derive(Debug)]
pub struct Authorizations<V> {
    entries: Mutex<Entries<V>>,
    lifetime: f64,
    capacity: usize,
}

impl<V: Clone> Authorizations<V> {
    /// An empty cache reusing answers `lifetime` seconds, holding `capacity`.
    pub fn new(lifetime: f64, capacity: usize) -> Self {
        Self {
            entries: Mutex::new((HashMap::new(), 0)),
            lifetime,
            capacity: capacity.max(1),
        }
    }

    /// The answer for (`token`, `name`) still good at `now`.
    pub fn cached(&self, token: &str, name: &str, now: Instant) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        let (until, answer, _) = entries.0.get(&(token.to_owned(), name.to_owned()))?;
        (now < *until).then(|| answer.clone())
    }

    /// Remembers `answer` for (`token`, `name`) from `now`, for the lifetime
    /// or until the token expires, whichever is first (a token without a
    /// readable expiry is not remembered).
    pub fn remember(&self, token: &str, name: &str, answer: &V, now: Instant) {
        let lifetime = self.lifetime.min(token_expiry(token) - unix_now());
        if lifetime <= 0.0 {
            return;
        }
        let Ok(mut guard) = self.entries.lock() else {
            return;
        };
        let (entries, counter) = &mut *guard;
        let key = (token.to_owned(), name.to_owned());
        entries.remove(&key);
        if entries.len() >= self.capacity {
            entries.retain(|_, (until, _, _)| *until > now);
        }
        while entries.len() >= self.capacity {
            let oldest = entries
                .iter()
                .min_by_key(|(_, (_, _, order))| *order)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => entries.remove(&k),
                None => break,
            };
        }
        *counter += 1;
        let until = now + Duration::from_secs_f64(lifetime);
        entries.insert(key, (until, answer.clone(), *counter));
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The `exp` claim of a JWT, unverified (it only bounds the reuse of
/// discovery's answer for this very token), or 0 without a readable one.
fn token_expiry(token: &str) -> f64 {
    let Some(part) = token.split('.').nth(1) else {
        return 0.0;
    };
    let Some(bytes) = base64url(part) else {
        return 0.0;
    };
    let Ok(claims) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return 0.0;
    };
    match claims.get("exp") {
        Some(serde_json::Value::Number(n)) => n.as_f64().filter(|f| f.is_finite()).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// Unpadded (or padded) URL-safe base64.
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_token_bounds_its_cached_answer() {
        let token = abi_auth::issue_module_token(
            "caller",
            &abi_auth::module_key("secret-secret-secret-secret-secret!", "caller").unwrap(),
            Duration::from_secs(300),
            SystemTime::now(),
            Some("inst"),
        )
        .unwrap();
        let exp = token_expiry(&token);
        assert!((exp - unix_now() - 300.0).abs() < 5.0, "{exp}");
        assert_eq!(token_expiry("not-a-jwt"), 0.0);

        let cache = Authorizations::new(5.0, 2);
        let now = Instant::now();
        cache.remember(&token, "echo", &"caller".to_owned(), now);
        assert_eq!(cache.cached(&token, "echo", now).as_deref(), Some("caller"));
        assert_eq!(cache.cached(&token, "other", now), None);
        assert_eq!(
            cache.cached(&token, "echo", now + Duration::from_secs(6)),
            None
        );
        // An unreadable token is never cached.
        cache.remember("x.y.z", "echo", &"caller".to_owned(), now);
        assert_eq!(cache.cached("x.y.z", "echo", now), None);
        // Full: the oldest answer goes first.
        cache.remember(&token, "b", &"b".to_owned(), now);
        cache.remember(&token, "c", &"c".to_owned(), now);
        assert_eq!(cache.cached(&token, "echo", now), None);
        assert_eq!(cache.cached(&token, "c", now).as_deref(), Some("c"));
    }
}
