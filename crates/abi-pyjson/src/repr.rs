//! Python's `repr()` of a string, which the reference's messages embed
//! (`f"{name!r}"`), so a refusal's message reads the same from either side.

use std::fmt::Write as _;

/// `repr(s)`: single quotes unless `s` holds one and no double quote; the
/// backslash, the quote and `\n`, `\r`, `\t` escaped; other control
/// characters (C0, DEL, C1, the soft hyphen) as `\xNN`.
pub fn python_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa1).contains(&(c as u32)) || c == '\u{ad}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::python_str_repr as repr;

    /// Expected texts printed by CPython 3.11's `repr`.
    #[test]
    fn repr_like_python() {
        assert_eq!(repr("api"), "'api'");
        assert_eq!(repr(""), "''");
        assert_eq!(repr("it's"), "\"it's\"");
        assert_eq!(repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(repr("a\\b\n\x01"), "'a\\\\b\\n\\x01'");
        assert_eq!(repr("é"), "'é'");
        assert_eq!(repr("x\u{7f}\u{ad}"), "'x\\x7f\\xad'");
    }
}
