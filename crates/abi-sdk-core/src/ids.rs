//! Random identifiers in the reference's formats.

/// A random UUID version 4 in its hyphenated form, as Python's `uuid4()` prints it.
pub fn uuid4() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// 128 random bits as 32 lowercase hex digits, like `uuid4().hex`.
pub(crate) fn lease_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
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
