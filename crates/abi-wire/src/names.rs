//! The reference's identifier patterns (module, agent, job, model and
//! capability names, instance, rollout and app ids), written as plain
//! character checks, so every crate checks a name the same way.
//!
//! Each pattern allows ASCII characters only, so counting bytes is the same
//! as counting characters once every byte matched.

/// Letters, digits and `_`: what every identifier may start with.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A word character, `-`: one NATS subject token or URL segment.
fn is_token(b: u8) -> bool {
    is_word(b) || b == b'-'
}

/// A word character, `.`, `:` or `-`: a dotted name.
fn is_name_char(b: u8) -> bool {
    is_word(b) || matches!(b, b'.' | b':' | b'-')
}

/// `[A-Za-z0-9_][A-Za-z0-9_.:-]{0,max-1}`.
fn dotted(value: &str, max: usize) -> bool {
    let bytes = value.as_bytes();
    match bytes.split_first() {
        Some((first, rest)) => {
            bytes.len() <= max && is_word(*first) && rest.iter().all(|b| is_name_char(*b))
        }
        None => false,
    }
}

/// `[A-Za-z0-9_-]{1,max}`.
pub fn token(value: &str, max: usize) -> bool {
    (1..=max).contains(&value.len()) && value.bytes().all(is_token)
}

/// A module, agent, job, model or capability name: 1 to 256 characters.
pub fn name(value: &str) -> bool {
    dotted(value, 256)
}

/// An instance id: one NATS subject token of 1 to 128 characters.
///
/// Subjects addressed to an instance carry its id as one token and tokens sent
/// to it are bound to that id, so a `.` or a wildcard would let an id stand
/// for another instance.
pub fn instance_id(value: &str) -> bool {
    token(value, 128)
}

/// What [`rollout_id`] accepts, for messages.
pub const ROLLOUT_ID_PATTERN: &str = "[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}";

/// A rollout id: empty (no rollout) or a dotted name of up to 128 characters.
pub fn rollout_id(value: &str) -> bool {
    value.is_empty() || dotted(value, 128)
}

/// An app name: one URL segment of 1 to 64 characters.
pub fn app_name(value: &str) -> bool {
    token(value, 64)
}

/// An app entry page: empty, or a relative path below the app root that
/// neither starts at `/`, climbs with `..` nor uses a backslash.
pub fn app_entry(value: &str) -> bool {
    value.is_empty()
        || (value.chars().count() <= 256
            && !value.starts_with('/')
            && !value.split('/').any(|segment| segment == "..")
            && !value.contains('\\'))
}

/// Length in characters (Unicode scalar values), as the reference counts.
pub fn chars(value: &str) -> usize {
    value.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "_x", "0", "acme.c", "a:b-c.d", &"n".repeat(256)] {
            assert!(name(ok), "{ok:?}");
        }
        for bad in [
            "",
            ".a",
            "-a",
            ":a",
            "a b",
            "bad.*",
            "a>",
            "é",
            "a\n",
            &"n".repeat(257),
        ] {
            assert!(!name(bad), "{bad:?}");
        }
    }

    #[test]
    fn instance_ids_are_one_subject_token() {
        for ok in ["a", "-", "a-b_c", "A9", &"i".repeat(128)] {
            assert!(instance_id(ok), "{ok:?}");
        }
        for bad in [
            "",
            "victim.x",
            "a.b.c",
            "*",
            ">",
            "x y",
            "a:b",
            &"i".repeat(129),
        ] {
            assert!(!instance_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn rollout_ids() {
        for ok in ["", "release-2", "r.1:b", &"r".repeat(128)] {
            assert!(rollout_id(ok), "{ok:?}");
        }
        for bad in ["not valid", "-r", ".r", &"r".repeat(129)] {
            assert!(!rollout_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn app_names_and_entries() {
        assert!(app_name("console-1_x"));
        for bad in ["", "a.b", "a/b", &"a".repeat(65)] {
            assert!(!app_name(bad), "{bad:?}");
        }
        for ok in [
            "",
            "index.html",
            "pages/index.html",
            "a..b/c",
            &"e".repeat(256),
        ] {
            assert!(app_entry(ok), "{ok:?}");
        }
        for bad in [
            "/index.html",
            "../secret.html",
            "a/../b",
            "a\\b",
            "..",
            &"e".repeat(257),
        ] {
            assert!(!app_entry(bad), "{bad:?}");
        }
    }

    #[test]
    fn lengths_count_characters_not_bytes() {
        assert_eq!(chars("été"), 3);
        assert_eq!(chars(""), 0);
    }
}
