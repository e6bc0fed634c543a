//! The reference's canonical JSON text: `json.dumps(value, ensure_ascii=True,
//! sort_keys=True, separators=(",", ":"), allow_nan=False)`.

use std::fmt::Write;

use crate::float::python_repr;
use crate::json::Json;

/// Canonical text of `value`: keys sorted (by code point, which is UTF-8
/// byte order), no spaces, every non-ASCII character escaped as `\uXXXX`
/// (astral ones as surrogate pairs), floats as Python's `repr`.
///
/// Equality keys, index expressions, stored documents and cursors all rely
/// on this text being byte-identical to the reference's.
pub fn dumps(value: &Json) -> String {
    let mut out = String::new();
    write_json(&mut out, value, COMPACT);
    out
}

/// `json.dumps(value, sort_keys=True)` with Python's default separators
/// (`", "` between items, `": "` after keys) and `ensure_ascii`: the text the
/// reference hashes for job and agent names (`_hash`) and stores as event
/// filters. Objects come out with sorted keys ([`Json::Object`] is ordered).
pub fn dumps_default(value: &Json) -> String {
    let mut out = String::new();
    write_json(&mut out, value, DEFAULT);
    out
}

/// Item and key separators.
#[derive(Clone, Copy)]
struct Separators(&'static str, &'static str);

const COMPACT: Separators = Separators(",", ":");
const DEFAULT: Separators = Separators(", ", ": ");

fn write_json(out: &mut String, value: &Json, seps: Separators) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Json::BigInt(text) => out.push_str(text),
        Json::Float(x) => out.push_str(&python_repr(*x)),
        Json::Str(s) => write_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(seps.0);
                }
                write_json(out, item, seps);
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            // BTreeMap<String, _> iterates in byte order of the UTF-8 keys,
            // the same order as Python's sorted() on code points.
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(seps.0);
                }
                write_string(out, key);
                out.push_str(seps.1);
                write_json(out, item, seps);
            }
            out.push('}');
        }
    }
}

/// `json.dumps(s)`: a JSON string literal with Python's `ensure_ascii`
/// escapes.
pub fn json_string(s: &str) -> String {
    let mut out = String::new();
    write_string(&mut out, s);
    out
}

/// Writes `s` as [`json_string`] does, onto the end of `out`.
pub fn write_json_string(out: &mut String, s: &str) {
    write_string(out, s);
}

/// Whether `byte` stands for itself in a JSON string literal: printable
/// ASCII other than the quote and the backslash.
fn verbatim(byte: u8) -> bool {
    matches!(byte, b' '..=b'~') && byte != b'"' && byte != b'\\'
}

fn write_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut rest = s;
    while !rest.is_empty() {
        // Most text is plain ASCII: copied a run at a time, not a character
        // at a time.
        let run = rest
            .bytes()
            .position(|b| !verbatim(b))
            .unwrap_or(rest.len());
        out.push_str(&rest[..run]);
        rest = &rest[run..];
        let Some(c) = rest.chars().next() else {
            break;
        };
        rest = &rest[c.len_utf8()..];
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Strings as CPython 3.11's `json.dumps` prints them: runs of plain
    /// ASCII copied whole, everything else escaped as before.
    #[test]
    fn strings_are_escaped_as_python_does() {
        for (text, expected) in [
            ("", r#""""#),
            ("plain", r#""plain""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("tab\there\nnl\r\u{8}\u{c}", r#""tab\there\nnl\r\b\f""#),
            ("caf\u{e9} au lait", r#""caf\u00e9 au lait""#),
            ("\u{1F600} smile", r#""\ud83d\ude00 smile""#),
            ("\u{0}\u{1f}\u{7f}~ end", r#""\u0000\u001f\u007f~ end""#),
            ("ends with quote\"", r#""ends with quote\"""#),
        ] {
            assert_eq!(json_string(text), expected, "{text:?}");
            let mut appended = "x".to_owned();
            write_json_string(&mut appended, text);
            assert_eq!(appended, format!("x{expected}"));
        }
    }

    /// Expected texts printed by CPython 3.11's `json.dumps`.
    #[test]
    fn separators_are_pythons() {
        let value = Json::Array(vec![
            Json::Str("acme.billing".into()),
            Json::Str("ingest é".into()),
            Json::Float(0.5),
        ]);
        assert_eq!(
            dumps_default(&value),
            r#"["acme.billing", "ingest \u00e9", 0.5]"#
        );
        assert_eq!(dumps(&value), r#"["acme.billing","ingest \u00e9",0.5]"#);
        let object =
            Json::Object([("b".to_owned(), Json::Int(1)), ("a".to_owned(), Json::Null)].into());
        assert_eq!(dumps_default(&object), r#"{"a": null, "b": 1}"#);
    }
}
