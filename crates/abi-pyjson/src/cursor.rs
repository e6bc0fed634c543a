//! A pull reader over one JSON text, for callers that turn it into
//! something other than a [`crate::Json`] tree (a protobuf message, say)
//! without building the tree first.
//!
//! It reads exactly what [`crate::parse`] accepts, with the same error
//! offsets: `parse` itself is a walk with this cursor.

use std::borrow::Cow;

use crate::json::{JsonError, MAX_DEPTH, Parser};

/// A literal, string or number, numbers kept as Python keeps them (see
/// [`crate::Json`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer that fits in 64 bits.
    Int(i64),
    /// A larger integer, as its text.
    BigInt(&'a str),
    /// A number written with a fraction or an exponent.
    Float(f64),
    /// A string, borrowed from the text when it holds no escape.
    Str(Cow<'a, str>),
}

/// What the value at the cursor is, judged by its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// `[`: read it with [`Cursor::enter_array`].
    Array,
    /// `{`: read it with [`Cursor::enter_object`].
    Object,
    /// Anything else: read it with [`Cursor::scalar`], which refuses what
    /// is no value.
    Scalar,
}

/// Reads one JSON value from a text, a piece at a time.
///
/// The caller walks the value as it comes: [`Cursor::next`] says what the
/// value at the cursor is; a scalar is read whole, an array item by item
/// ([`Cursor::enter_array`], then [`Cursor::after_item`] after each), an
/// object member by member ([`Cursor::enter_object`] gives the first key,
/// [`Cursor::after_member`] each next one). [`Cursor::finish`] checks
/// that nothing but whitespace follows the value.
pub struct Cursor<'a> {
    parser: Parser<'a>,
    /// Containers entered and not yet closed.
    depth: usize,
}

impl std::fmt::Debug for Cursor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("pos", &self.parser.pos)
            .field("depth", &self.depth)
            .finish()
    }
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `text` (leading whitespace skipped).
    pub fn new(text: &'a str) -> Self {
        let mut parser = Parser::new(text);
        parser.whitespace();
        Self { parser, depth: 0 }
    }

    /// What the value at the cursor is.
    pub fn next(&self) -> Next {
        match self.parser.peek() {
            Some(b'[') => Next::Array,
            Some(b'{') => Next::Object,
            _ => Next::Scalar,
        }
    }

    /// Refuses a value nested deeper than [`crate::parse`] reads.
    fn check_depth(&self) -> Result<(), JsonError> {
        if self.depth > MAX_DEPTH {
            Err(self.parser.error())
        } else {
            Ok(())
        }
    }

    /// Reads the scalar at the cursor.
    ///
    /// # Errors
    ///
    /// When the text there is no literal, string or number (a container
    /// included).
    pub fn scalar(&mut self) -> Result<Scalar<'a>, JsonError> {
        self.check_depth()?;
        self.parser.scalar()
    }

    /// Steps into the array at the cursor: `true` when an item follows (the
    /// cursor is then at it), `false` when the array is empty (and read).
    ///
    /// # Errors
    ///
    /// When the cursor is not at `[`, or the array nests too deep.
    pub fn enter_array(&mut self) -> Result<bool, JsonError> {
        self.check_depth()?;
        if self.parser.peek() != Some(b'[') {
            return Err(self.parser.error());
        }
        self.parser.pos += 1;
        self.parser.whitespace();
        if self.parser.peek() == Some(b']') {
            self.parser.pos += 1;
            return Ok(false);
        }
        self.depth += 1;
        Ok(true)
    }

    /// After an item: `true` when another follows (the cursor is then at
    /// it), `false` when the array ended (and was read).
    ///
    /// # Errors
    ///
    /// When neither `,` nor `]` follows the item.
    pub fn after_item(&mut self) -> Result<bool, JsonError> {
        self.parser.whitespace();
        match self.parser.peek() {
            Some(b',') => {
                self.parser.pos += 1;
                self.parser.whitespace();
                Ok(true)
            }
            Some(b']') => {
                self.parser.pos += 1;
                self.depth -= 1;
                Ok(false)
            }
            _ => Err(self.parser.error()),
        }
    }

    /// Steps into the object at the cursor: its first key (the cursor is
    /// then at that member's value), or `None` when the object is empty
    /// (and read).
    ///
    /// # Errors
    ///
    /// When the cursor is not at `{`, the object nests too deep, or its
    /// first member is malformed.
    pub fn enter_object(&mut self) -> Result<Option<Cow<'a, str>>, JsonError> {
        self.check_depth()?;
        if self.parser.peek() != Some(b'{') {
            return Err(self.parser.error());
        }
        self.parser.pos += 1;
        self.parser.whitespace();
        if self.parser.peek() == Some(b'}') {
            self.parser.pos += 1;
            return Ok(None);
        }
        self.depth += 1;
        self.key().map(Some)
    }

    /// After a member's value: the next key (the cursor is then at its
    /// value), or `None` when the object ended (and was read).
    ///
    /// # Errors
    ///
    /// When neither `,` and a key nor `}` follows the value.
    pub fn after_member(&mut self) -> Result<Option<Cow<'a, str>>, JsonError> {
        self.parser.whitespace();
        match self.parser.peek() {
            Some(b',') => {
                self.parser.pos += 1;
                self.parser.whitespace();
                self.key().map(Some)
            }
            Some(b'}') => {
                self.parser.pos += 1;
                self.depth -= 1;
                Ok(None)
            }
            _ => Err(self.parser.error()),
        }
    }

    /// A member's key and its `:`, leaving the cursor at the value.
    fn key(&mut self) -> Result<Cow<'a, str>, JsonError> {
        if self.parser.peek() != Some(b'"') {
            return Err(self.parser.error());
        }
        let key = self.parser.string()?;
        self.parser.whitespace();
        if self.parser.peek() != Some(b':') {
            return Err(self.parser.error());
        }
        self.parser.pos += 1;
        self.parser.whitespace();
        Ok(key)
    }

    /// Checks that only whitespace follows the value read.
    ///
    /// # Errors
    ///
    /// When anything else does.
    pub fn finish(mut self) -> Result<(), JsonError> {
        self.parser.whitespace();
        if self.parser.peek().is_some() {
            return Err(self.parser.error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces of `text`, read with the cursor, as one line each.
    fn pieces(text: &str) -> Result<Vec<String>, JsonError> {
        fn walk(cursor: &mut Cursor<'_>, out: &mut Vec<String>) -> Result<(), JsonError> {
            match cursor.next() {
                Next::Array => {
                    out.push("[".into());
                    let mut more = cursor.enter_array()?;
                    while more {
                        walk(cursor, out)?;
                        more = cursor.after_item()?;
                    }
                    out.push("]".into());
                }
                Next::Object => {
                    out.push("{".into());
                    let mut key = cursor.enter_object()?;
                    while let Some(name) = key {
                        let kind = if matches!(name, Cow::Borrowed(_)) {
                            "borrowed"
                        } else {
                            "owned"
                        };
                        out.push(format!("key {name:?} {kind}"));
                        walk(cursor, out)?;
                        key = cursor.after_member()?;
                    }
                    out.push("}".into());
                }
                Next::Scalar => out.push(format!("{:?}", cursor.scalar()?)),
            }
            Ok(())
        }
        let mut cursor = Cursor::new(text);
        let mut out = Vec::new();
        walk(&mut cursor, &mut out)?;
        cursor.finish()?;
        Ok(out)
    }

    #[test]
    fn reads_pieces_in_order_and_borrows_plain_strings() {
        assert_eq!(
            pieces(r#" {"a": [1, -2.5e0, 1e400, 100000000000000000000], "b\n": {"c": "x\"y", "d": []}, "e": null} "#)
                .unwrap_or_default(),
            [
                "{",
                "key \"a\" borrowed",
                "[",
                "Int(1)",
                "Float(-2.5)",
                "Float(inf)",
                "BigInt(\"100000000000000000000\")",
                "]",
                "key \"b\\n\" owned",
                "{",
                "key \"c\" borrowed",
                "Str(\"x\\\"y\")",
                "key \"d\" borrowed",
                "[",
                "]",
                "}",
                "key \"e\" borrowed",
                "Null",
                "}",
            ]
        );
    }

    /// Offsets as the tree parser gave them before it became a walk with
    /// this cursor (recorded from that build).
    #[test]
    fn refuses_what_parse_refused_at_the_same_offsets() {
        let nested = |open: &str, inner: &str, close: &str, n: usize| {
            format!("{}{inner}{}", open.repeat(n), close.repeat(n))
        };
        let too_deep = nested("[", "", "]", MAX_DEPTH + 2);
        let deepest = nested("[", "", "]", MAX_DEPTH + 1);
        let too_deep_object = nested("{\"a\":", "1", "}", MAX_DEPTH + 1);
        let table: [(&str, Result<(), usize>); 26] = [
            ("", Err(0)),
            ("x", Err(0)),
            ("[1,]", Err(3)),
            ("{\"a\" 1}", Err(5)),
            ("{\"a\":1,}", Err(7)),
            ("{1:2}", Err(1)),
            ("[1 2]", Err(3)),
            ("{} x", Err(3)),
            ("\"\u{1}\"", Err(1)),
            (r#""\ud800""#, Err(7)),
            ("01", Err(1)),
            ("1.", Err(1)),
            ("-", Err(1)),
            ("nul", Err(0)),
            ("[", Err(1)),
            ("{\"a\":", Err(5)),
            ("[1]", Ok(())),
            ("{\"a\":[{}]}", Ok(())),
            (" [ 1 , { \"k\" : \"v\\n\" } ] ", Ok(())),
            ("[\"a\\q\"]", Err(5)),
            ("{\"a\":1 \"b\":2}", Err(7)),
            ("1e", Err(1)),
            ("[-]", Err(2)),
            (&too_deep, Err(901)),
            (&deepest, Ok(())),
            (&too_deep_object, Err(4505)),
        ];
        for (text, want) in table {
            let offset = |result: Result<(), JsonError>| result.map_err(|e| e.offset);
            assert_eq!(offset(pieces(text).map(drop)), want, "{text:.40}");
            assert_eq!(offset(crate::parse(text).map(drop)), want, "{text:.40}");
        }
    }
}
