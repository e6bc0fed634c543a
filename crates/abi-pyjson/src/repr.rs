//! Python's `repr()` of a string, which the reference's messages embed
//! (`f"{name!r}"`), so a refusal's message reads the same from either side.

use std::fmt::Write as _;

use crate::unprintable::UNPRINTABLE;

/// Whether Python's `repr` escapes `c` (above U+00FF).
fn unprintable(c: char) -> bool {
    let code = c as u32;
    code >= 0x100
        && UNPRINTABLE
            .binary_search_by(|&(start, end)| {
                if end < code {
                    std::cmp::Ordering::Less
                } else if start > code {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
}

/// `repr(s)`: single quotes unless `s` holds one and no double quote; the
/// backslash, the quote and `\n`, `\r`, `\t` escaped; other control
/// characters (C0, DEL, C1, the soft hyphen) as `\xNN`; the characters
/// above U+00FF that Python does not print (format, private use, line and
/// paragraph separators, spaces other than U+0020, unassigned: Unicode 14,
/// as CPython 3.11) as `\uXXXX` or `\UXXXXXXXX`.
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
            c if unprintable(c) && (c as u32) < 0x1_0000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if unprintable(c) => {
                let _ = write!(out, "\\U{:08x}", c as u32);
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
        // Above U+00FF: format, spaces, separators, private use, unassigned.
        assert_eq!(repr("\u{200b}ŐRɬsW"), "'\\u200bŐRɬsW'");
        assert_eq!(
            repr("\u{1680}\u{2000}\u{200a}\u{2028}\u{2029}\u{3000}\u{feff}"),
            "'\\u1680\\u2000\\u200a\\u2028\\u2029\\u3000\\ufeff'"
        );
        assert_eq!(repr("\u{e000}\u{378}"), "'\\ue000\\u0378'");
        assert_eq!(repr("\u{e0001}\u{10ffff}"), "'\\U000e0001\\U0010ffff'");
        assert_eq!(repr("日本 ǅ €"), "'日本 ǅ €'");
    }

    /// The table is what CPython 3.11 prints (`tests/golden/make_unprintable.py`).
    #[test]
    fn the_table_is_cpythons() {
        let python = std::env::var("ABI_PYTHON").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/python").to_owned()
        });
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/golden/make_unprintable.py"
        );
        let out = std::process::Command::new(&python)
            .arg(script)
            .output()
            .unwrap_or_else(|e| panic!("{python}: {e} (run scripts/setup.sh)"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap_or_default();
        let printed: Vec<(u32, u32)> = text
            .lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| {
                let mut hex = line
                    .split(' ')
                    .map(|h| u32::from_str_radix(h, 16).unwrap_or(u32::MAX));
                (hex.next().unwrap_or(0), hex.next().unwrap_or(0))
            })
            .collect();
        assert_eq!(printed, super::UNPRINTABLE);
    }
}
