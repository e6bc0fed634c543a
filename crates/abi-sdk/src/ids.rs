//! Random identifiers in the reference's formats.

use rand::RngCore;

/// A random UUID version 4 in its hyphenated form, as Python's `uuid4()` prints it.
pub(crate) fn uuid4() -> String {
    let mut b = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex = hex32(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// 128 random bits as 32 lowercase hex digits, like `uuid4().hex`.
pub(crate) fn lease_token() -> String {
    let mut b = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut b);
    hex32(&b)
}

fn hex32(bytes: &[u8; 16]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(32);
    for b in bytes {
        // Writing into a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_reference_shapes() {
        let id = uuid4();
        assert_eq!(id.len(), 36);
        assert_eq!(id.as_bytes()[14], b'4');
        assert!(id.chars().all(|c| c.is_ascii_hexdigit() || c == '-'));
        let token = lease_token();
        assert_eq!(token.len(), 32);
        assert_ne!(token, lease_token());
    }
}
