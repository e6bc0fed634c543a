//! A JSON tree with Python's number model, and a parser for it.
//!
//! The reference stores and compares documents through Python's `json`
//! module, whose integers are unbounded and whose floats are IEEE doubles
//! printed by `repr`. [`Json`] keeps exactly that distinction, so a value
//! read back and printed again with [`crate::dumps`] gives the text the
//! reference would give.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use crate::cursor::{Cursor, Next, Scalar};

/// A parsed JSON value, numbers kept as Python keeps them.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A larger integer, as its canonical decimal text (`-` and digits, no
    /// leading zero).
    BigInt(String),
    /// A number written with a fraction or an exponent.
    Float(f64),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Json>),
    /// An object; a repeated key keeps its last value, as Python's does.
    Object(BTreeMap<String, Json>),
}

/// Why a text is not JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at byte {offset}")]
pub struct JsonError {
    /// Where the parser stopped.
    pub offset: usize,
}

/// Parses `text` as Python's `json.loads` does for the JSON the reference
/// writes: whitespace around the value, strict strings (no raw control
/// characters), surrogate pairs in `\u` escapes.
///
/// Python's extensions `NaN` and `Infinity`, and lone surrogates, are
/// refused: no valid stored document or cursor holds them.
///
/// # Errors
///
/// [`JsonError`] when `text` is not one JSON value.
pub fn parse(text: &str) -> Result<Json, JsonError> {
    let mut cursor = Cursor::new(text);
    let value = tree(&mut cursor)?;
    cursor.finish()?;
    Ok(value)
}

/// The value at the cursor, as a tree.
fn tree(cursor: &mut Cursor<'_>) -> Result<Json, JsonError> {
    match cursor.next() {
        Next::Array => {
            let mut items = Vec::new();
            let mut more = cursor.enter_array()?;
            while more {
                items.push(tree(cursor)?);
                more = cursor.after_item()?;
            }
            Ok(Json::Array(items))
        }
        Next::Object => {
            let mut members = BTreeMap::new();
            let mut key = cursor.enter_object()?;
            while let Some(name) = key {
                let value = tree(cursor)?;
                members.insert(name.into_owned(), value);
                key = cursor.after_member()?;
            }
            Ok(Json::Object(members))
        }
        Next::Scalar => cursor.scalar().map(Json::from),
    }
}

impl From<Scalar<'_>> for Json {
    fn from(scalar: Scalar<'_>) -> Self {
        match scalar {
            Scalar::Null => Json::Null,
            Scalar::Bool(b) => Json::Bool(b),
            Scalar::Int(n) => Json::Int(n),
            Scalar::BigInt(text) => Json::BigInt(text.to_owned()),
            Scalar::Float(x) => Json::Float(x),
            Scalar::Str(s) => Json::Str(s.into_owned()),
        }
    }
}

/// One member of an object read by [`object_members`]: where its key and
/// its value lie in the text it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The key's text between its quotes, escapes not decoded.
    pub key: Range<usize>,
    /// Whether the key's text holds an escape (it is then not the key as is).
    pub escaped: bool,
    /// The value's text.
    pub value: Range<usize>,
}

impl Member {
    /// Whether this member's key, decoded, is `key`; `text` is the text the
    /// member was read from (any other text answers false or by chance).
    pub fn has_key(&self, text: &str, key: &str) -> bool {
        let Some(raw) = text.get(self.key.clone()) else {
            return false;
        };
        if !self.escaped {
            return raw == key;
        }
        // Rare: decode the key (it was checked when it was read).
        let mut parser = Parser::new(text);
        parser.pos = self.key.start.saturating_sub(1);
        parser.string().is_ok_and(|decoded| decoded == key)
    }
}

/// The members of the JSON object `text`, in order: where each key and
/// each value lie, without decoding keys or building values (nothing is
/// allocated but the list). The whole text is checked as [`parse`] checks
/// it. A repeated key appears each time; [`parse`] keeps the last.
///
/// # Errors
///
/// [`JsonError`] when `text` is not JSON, or is JSON but not an object (at
/// offset 0 then, after any whitespace).
pub fn object_members(text: &str) -> Result<Vec<Member>, JsonError> {
    let mut parser = Parser::new(text);
    parser.whitespace();
    if parser.bytes.get(parser.pos) != Some(&b'{') {
        return Err(parser.error());
    }
    let members = parser.members()?;
    parser.whitespace();
    if parser.pos != parser.bytes.len() {
        return Err(parser.error());
    }
    Ok(members)
}

/// Nesting deeper than this is refused rather than risk the stack; Python's
/// own recursion limit is of the same order.
pub(crate) const MAX_DEPTH: usize = 900;

/// The grammar's pieces, shared by [`Cursor`] and the walks that build
/// nothing ([`object_members`]).
pub(crate) struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pub(crate) pos: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            bytes: text.as_bytes(),
            text,
            pos: 0,
        }
    }

    /// The byte at the current position, if any.
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    pub(crate) fn error(&self) -> JsonError {
        JsonError { offset: self.pos }
    }

    pub(crate) fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, word: &str, value: Scalar<'a>) -> Result<Scalar<'a>, JsonError> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error())
        }
    }

    /// The literal, string or number at `pos` (an error for anything else,
    /// a container included).
    pub(crate) fn scalar(&mut self) -> Result<Scalar<'a>, JsonError> {
        match self.bytes.get(self.pos) {
            Some(b'n') => self.literal("null", Scalar::Null),
            Some(b't') => self.literal("true", Scalar::Bool(true)),
            Some(b'f') => self.literal("false", Scalar::Bool(false)),
            Some(b'"') => self.string().map(Scalar::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.error()),
        }
    }

    /// [`object_members`]'s walk of the object at `pos`.
    fn members(&mut self) -> Result<Vec<Member>, JsonError> {
        self.pos += 1;
        // A stored document has a few dozen members at most.
        let mut found = Vec::with_capacity(16);
        self.whitespace();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Ok(found);
        }
        loop {
            self.whitespace();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.error());
            }
            let key_at = self.pos;
            self.skip_string()?;
            let key = key_at + 1..self.pos - 1;
            let escaped = self.bytes[key.clone()].contains(&b'\\');
            self.whitespace();
            if self.bytes.get(self.pos) != Some(&b':') {
                return Err(self.error());
            }
            self.pos += 1;
            self.whitespace();
            let value_at = self.pos;
            self.skip_value(1)?;
            found.push(Member {
                key,
                escaped,
                value: value_at..self.pos,
            });
            self.whitespace();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(found);
                }
                _ => return Err(self.error()),
            }
        }
    }

    /// Checks the value at `pos` as [`Parser::value`] does and steps over
    /// it, building nothing.
    fn skip_value(&mut self, depth: usize) -> Result<(), JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.error());
        }
        let close = match self.bytes.get(self.pos) {
            Some(b'"') => return self.skip_string(),
            Some(b'[') => b']',
            Some(b'{') => b'}',
            _ => return self.scalar().map(drop),
        };
        self.pos += 1;
        self.whitespace();
        if self.bytes.get(self.pos) == Some(&close) {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.whitespace();
            if close == b'}' {
                if self.bytes.get(self.pos) != Some(&b'"') {
                    return Err(self.error());
                }
                self.skip_string()?;
                self.whitespace();
                if self.bytes.get(self.pos) != Some(&b':') {
                    return Err(self.error());
                }
                self.pos += 1;
                self.whitespace();
            }
            self.skip_value(depth + 1)?;
            self.whitespace();
            match self.bytes.get(self.pos) {
                Some(b',') => self.pos += 1,
                Some(&b) if b == close => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.error()),
            }
        }
    }

    /// Checks the string at `pos` as [`Parser::string`] does and steps over
    /// it, building nothing.
    fn skip_string(&mut self) -> Result<(), JsonError> {
        self.pos += 1;
        loop {
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            match self.bytes.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let escape = *self.bytes.get(self.pos).ok_or_else(|| self.error())?;
                    self.pos += 1;
                    match escape {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            self.unicode_escape()?;
                        }
                        _ => return Err(self.error()),
                    }
                }
                _ => return Err(self.error()),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Result<Scalar<'a>, JsonError> {
        let start = self.pos;
        if self.bytes.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        // JSON integers have no leading zero: "0" alone, or 1-9 then digits.
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(self.error()),
        }
        let mut integral = true;
        if self.bytes.get(self.pos) == Some(&b'.') {
            let dot = self.pos;
            self.pos += 1;
            if self.digits() == 0 {
                // Python's scanner stops before a dot without digits, which
                // then fails as extra data; so does this.
                self.pos = dot;
                return Err(self.error());
            }
            integral = false;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.pos) {
            let mark = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                self.pos = mark;
                return Err(self.error());
            }
            integral = false;
        }
        let text = &self.text[start..self.pos];
        if integral {
            return Ok(match text.parse::<i64>() {
                Ok(n) => Scalar::Int(n),
                Err(_) => Scalar::BigInt(text),
            });
        }
        text.parse::<f64>()
            .map(Scalar::Float)
            .map_err(|_| JsonError { offset: start })
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.error())?;
        let code = u32::from_str_radix(digits, 16).map_err(|_| self.error())?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.error());
        }
        self.pos += 4;
        Ok(code)
    }

    /// The string at `pos`, borrowed from the text when it holds no escape.
    pub(crate) fn string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        self.pos += 1;
        let start = self.pos;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            match self.bytes.get(self.pos) {
                Some(b'"') if run_start == start => {
                    self.pos += 1;
                    return Ok(Cow::Borrowed(&self.text[start..self.pos - 1]));
                }
                Some(b'"') => {
                    out.push_str(&self.text[run_start..self.pos]);
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    out.push_str(&self.text[run_start..self.pos]);
                    self.pos += 1;
                    let escape = *self.bytes.get(self.pos).ok_or_else(|| self.error())?;
                    self.pos += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return Err(self.error()),
                    }
                }
                _ => return Err(self.error()),
            }
        }
    }

    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.bytes[self.pos..].starts_with(b"\\u") {
            let mark = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return char::from_u32(code).ok_or_else(|| self.error());
            }
            self.pos = mark;
        }
        // A lone surrogate is no Rust char: refused.
        char::from_u32(first).ok_or_else(|| self.error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_as_python_does() {
        assert_eq!(parse("1"), Ok(Json::Int(1)));
        assert_eq!(parse("-0"), Ok(Json::Int(0)));
        assert_eq!(parse("1.0"), Ok(Json::Float(1.0)));
        assert_eq!(parse("1e2"), Ok(Json::Float(100.0)));
        assert_eq!(
            parse("100000000000000000000"),
            Ok(Json::BigInt("100000000000000000000".into()))
        );
        assert!(parse("01").is_err());
        assert!(parse("1.").is_err());
        assert!(parse("NaN").is_err());
    }

    #[test]
    fn finds_a_member_as_parse_reads_it() {
        type Row = (&'static str, &'static str, Result<Option<&'static str>, ()>);
        let table: [Row; 12] = [
            (r#"{"a": 1, "b": [1, {"a": 2}]}"#, "a", Ok(Some("1"))),
            (
                r#"{"a": 1, "b": [1, {"a": 2}]}"#,
                "b",
                Ok(Some(r#"[1, {"a": 2}]"#)),
            ),
            (r#"{"a": 1}"#, "z", Ok(None)),
            (r#"{}"#, "a", Ok(None)),
            (r#" {"a": 1, "a": "x\"y"} "#, "a", Ok(Some(r#""x\"y""#))),
            (r#"{"\u00e9": true}"#, "é", Ok(Some("true"))),
            (r#"{"a\"b": null}"#, "a\"b", Ok(Some("null"))),
            (r#"{"a": -1.5e3}"#, "a", Ok(Some("-1.5e3"))),
            ("[1]", "a", Err(())),
            (r#"{"a": 1,}"#, "a", Err(())),
            (r#"{"a": "\ud800"}"#, "b", Err(())),
            (r#"{"a": 1} x"#, "a", Err(())),
        ];
        let member = |text: &'static str, key: &str| {
            object_members(text).map(|members| {
                let last = members.into_iter().rev().find(|m| m.has_key(text, key));
                last.map(|m| &text[m.value])
            })
        };
        // A member asked about another text never panics.
        let stray = Member {
            key: 10..20,
            escaped: false,
            value: 22..23,
        };
        assert!(!stray.has_key("{}", "a"));
        for (text, key, want) in table {
            let got = member(text, key).map_err(drop);
            assert_eq!(got, want, "{text} / {key}");
            assert_eq!(
                got.is_ok(),
                matches!(parse(text), Ok(Json::Object(_))),
                "{text}"
            );
            if let (Ok(Json::Object(members)), Ok(found)) = (parse(text), got) {
                assert_eq!(found.map(parse), members.get(key).cloned().map(Ok));
            }
        }
    }

    #[test]
    fn reads_strings_and_containers() {
        assert_eq!(
            parse(r#" {"a": ["\ud83d\ude00", "\u00e9\n"], "a": 2} "#),
            Ok(Json::Object(BTreeMap::from([("a".into(), Json::Int(2))])))
        );
        assert_eq!(
            parse(r#""\ud83d\ude00\u00e9""#),
            Ok(Json::Str("😀é".into()))
        );
        assert!(parse("\"\u{1}\"").is_err());
        assert!(parse(r#""\ud800""#).is_err());
        assert!(parse("[1,]").is_err());
        assert!(parse("{} x").is_err());
    }
}
