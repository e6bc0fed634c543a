//! When a message overflows, and the headers that say so: pure helpers both
//! sides share.

use abi_wire::overflow as wire;
use async_nats::HeaderMap;

/// The size of `headers` as the broker counts it (`NATS/1.0\r\n`, each
/// `name: value\r\n`, a closing `\r\n`); 0 without headers.
pub fn header_block_len(headers: &HeaderMap) -> usize {
    if headers.is_empty() {
        return 0;
    }
    let mut len = "NATS/1.0\r\n".len() + "\r\n".len();
    for (name, values) in headers.iter() {
        for value in values {
            len += AsRef::<[u8]>::as_ref(name).len()
                + ": ".len()
                + value.as_str().len()
                + "\r\n".len();
        }
    }
    len
}

/// Whether a message of `payload_len` bytes with `headers` fits a broker of
/// `max_payload` (the limit counts the header block).
pub fn fits(payload_len: usize, headers: &HeaderMap, max_payload: usize) -> bool {
    payload_len + header_block_len(headers) <= max_payload
}

/// The first value of the header `name`, as [`HeaderMap::get`] finds it,
/// but by walking the few headers a message carries: `get` builds, checks
/// and hashes a header name on every call, which cost a request more than
/// its three lookups are worth.
pub fn header_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| AsRef::<str>::as_ref(*key) == name)
        .and_then(|(_, values)| values.first())
        .map(|value| value.as_str())
}

/// Whether the request's caller can download a parked reply.
pub fn accepts_overflow(headers: Option<&HeaderMap>) -> bool {
    headers
        .and_then(|h| header_value(h, wire::ACCEPT_HEADER))
        .is_some_and(|v| v == wire::ACCEPT_VALUE)
}

/// The transfer id of the request's uploaded body, when it has one.
pub fn uploaded_request(headers: Option<&HeaderMap>) -> Option<&str> {
    headers
        .and_then(|h| header_value(h, wire::REQUEST_HEADER))
        .filter(|id| !id.is_empty())
}

/// A reply's parked body: its transfer id and announced size (`None` for a
/// size that is not a number).
pub fn parked_reply(headers: Option<&HeaderMap>) -> Option<(&str, Option<usize>)> {
    let headers = headers?;
    let id = headers.get(wire::REPLY_HEADER)?.as_str();
    let size = headers
        .get(wire::SIZE_HEADER)
        .and_then(|v| v.as_str().trim().parse().ok());
    Some((id, size))
}

/// The headers of the empty reply that stands for a parked one.
pub fn parked_headers(transfer_id: &str, size: usize) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(wire::REPLY_HEADER, transfer_id);
    headers.insert(wire::SIZE_HEADER, size.to_string().as_str());
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walking the headers finds what a lookup by name finds: custom and
    /// standard names, the first of several values, nothing for a name in
    /// another case or absent.
    #[test]
    fn a_header_is_found_as_a_lookup_finds_it() {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Auth-Token", "abc");
        headers.insert("Nats-Msg-Id", "m1");
        headers.append("Abi-Many", "first");
        headers.append("Abi-Many", "second");
        headers.insert("Abi-Empty", "");
        for name in [
            "Nats-Auth-Token",
            "Nats-Msg-Id",
            "Abi-Many",
            "Abi-Empty",
            "nats-auth-token",
            "Absent",
        ] {
            assert_eq!(
                header_value(&headers, name),
                headers.get(name).map(|v| v.as_str()),
                "{name}"
            );
        }
        assert_eq!(header_value(&headers, "Abi-Many"), Some("first"));
        assert_eq!(header_value(&HeaderMap::new(), "Nats-Auth-Token"), None);
    }

    #[test]
    fn the_header_block_is_counted_as_the_broker_counts_it() {
        let mut headers = HeaderMap::new();
        assert_eq!(header_block_len(&headers), 0);
        headers.insert("Nats-Auth-Token", "abc");
        // "NATS/1.0\r\n" + "Nats-Auth-Token: abc\r\n" + "\r\n"
        assert_eq!(header_block_len(&headers), 10 + 22 + 2);
        assert!(fits(100 - 34, &headers, 100));
        assert!(!fits(100 - 33, &headers, 100));
    }

    #[test]
    fn overflow_headers_are_read_strictly() {
        let mut headers = HeaderMap::new();
        assert!(!accepts_overflow(Some(&headers)));
        headers.insert(wire::ACCEPT_HEADER, "true");
        assert!(!accepts_overflow(Some(&headers)), "only 1 accepts");
        headers.insert(wire::ACCEPT_HEADER, "1");
        assert!(accepts_overflow(Some(&headers)));
        headers.insert(wire::REQUEST_HEADER, "");
        assert_eq!(uploaded_request(Some(&headers)), None);
        let parked = parked_headers("o:k", 42);
        assert_eq!(parked_reply(Some(&parked)), Some(("o:k", Some(42))));
        let mut bad = parked_headers("o:k", 1);
        bad.insert(wire::SIZE_HEADER, "lots");
        assert_eq!(parked_reply(Some(&bad)), Some(("o:k", None)));
        assert_eq!(parked_reply(None), None);
    }
}
