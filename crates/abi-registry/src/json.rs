//! "Empty, or a JSON object of at most N bytes", judged as Python's `json`
//! module judges it.
//!
//! The reference validates schema and trigger-input fields with
//! `json.loads`, which differs from strict JSON in ways a drop-in peer must
//! share: it accepts the bare constants `NaN`, `Infinity` and `-Infinity`,
//! accepts escaped lone surrogates (`"\ud800"`), and refuses integers of more
//! than 4300 digits (Python's integer conversion limit). This is a small
//! recognizer (nothing is built) with exactly that grammar.
//!
//! Python gives up on documents nested about a thousand levels deep with a
//! `RecursionError` (not a validation failure: the reference then answers
//! `UNAVAILABLE`, and the exact depth depends on its call stack); we refuse
//! anything nested deeper than [`MAX_DEPTH`] as invalid instead.

/// Deepest nesting of arrays and objects we accept.
pub(crate) const MAX_DEPTH: usize = 1000;

/// Most digits of an integer Python converts from text by default.
const MAX_INT_DIGITS: usize = 4300;

/// True for an empty string, or a JSON object of at most `max_bytes` UTF-8
/// bytes (surrounding whitespace allowed, as `json.loads` allows it).
pub(crate) fn object_or_empty(value: &str, max_bytes: usize) -> bool {
    if value.is_empty() {
        return true;
    }
    if value.len() > max_bytes {
        return false;
    }
    let mut scan = Scanner {
        bytes: value.as_bytes(),
        at: 0,
    };
    scan.skip_whitespace();
    if scan.peek() != Some(b'{') {
        return false;
    }
    if scan.value(0).is_none() {
        return false;
    }
    scan.skip_whitespace();
    scan.at == scan.bytes.len()
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Python's JSON whitespace: space, tab, newline, carriage return only.
    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    fn literal(&mut self, word: &str) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end) == Some(word.as_bytes())).then(|| self.at = end)
    }

    /// One value starting at the cursor, inside `depth` containers.
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'n' => self.literal("null"),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'N' => self.literal("NaN"),
            b'I' => self.literal("Infinity"),
            b'-' if self.bytes[self.at..].starts_with(b"-Infinity") => self.literal("-Infinity"),
            _ => self.number(),
        }
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'{')?;
        self.skip_whitespace();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            // A key is always a string: no trailing comma, no bare names.
            if self.peek()? != b'"' {
                return None;
            }
            self.string()?;
            self.skip_whitespace();
            self.eat(b':')?;
            self.skip_whitespace();
            self.value(depth)?;
            self.skip_whitespace();
            if self.eat(b'}').is_some() {
                return Some(());
            }
            self.eat(b',')?;
            self.skip_whitespace();
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.eat(b'[')?;
        self.skip_whitespace();
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            self.value(depth)?;
            self.skip_whitespace();
            if self.eat(b']').is_some() {
                return Some(());
            }
            self.eat(b',')?;
            self.skip_whitespace();
        }
    }

    /// A string in strict mode: no raw control characters, known escapes only,
    /// `\u` with four hex digits (a lone surrogate is fine, as in Python).
    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let byte = self.peek()?;
            self.at += 1;
            match byte {
                b'"' => return Some(()),
                b'\\' => {
                    let escape = self.peek()?;
                    self.at += 1;
                    match escape {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = self.bytes.get(self.at..self.at + 4)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.at += 4;
                        }
                        _ => return None,
                    }
                }
                0x00..=0x1f => return None,
                _ => {}
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`. A dangling `.` or
    /// exponent is left unread, so the caller fails on it, as Python does.
    fn number(&mut self) -> Option<()> {
        let _ = self.eat(b'-');
        let int_start = self.at;
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let int_digits = self.at - int_start;
        let mut integer = true;
        if self.peek() == Some(b'.') && self.bytes.get(self.at + 1).is_some_and(u8::is_ascii_digit)
        {
            self.at += 1;
            self.digits();
            integer = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            let mark = self.at;
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.digits();
                integer = false;
            } else {
                self.at = mark;
            }
        }
        // Python converts an integer literal with `int()`, which refuses more
        // than 4300 digits; floats have no such limit.
        (!integer || int_digits <= MAX_INT_DIGITS).then_some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> bool {
        object_or_empty(s, 1 << 20)
    }

    #[test]
    fn accepts_objects_as_python_does() {
        for good in [
            "",
            "{}",
            " \t\n{ } \r\n",
            r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#,
            r#"{"a": [1, -0, 0.5, 1e9, 2E-3, -1.5e+7, true, false, null, "x"]}"#,
            r#"{"nan": NaN, "inf": Infinity, "ninf": -Infinity}"#,
            r#"{"lone": "\ud800", "esc": "\"\\\/\b\f\n\r\t\u00e9"}"#,
            r#"{"a": 1, "a": 2, "": {}}"#,
            "{\"unicode\": \"été ☃ \u{7f}\"}",
            "{\"deep\": [[[[[]]]]]}",
        ] {
            assert!(ok(good), "{good:?}");
        }
    }

    #[test]
    fn refuses_what_python_refuses() {
        for bad in [
            "not json",
            "[1, 2]",
            "\"{}\"",
            "1",
            "null",
            "{",
            "{}}",
            "{} {}",
            "{,}",
            r#"{"a": 1,}"#,
            r#"{"a" 1}"#,
            r#"{a: 1}"#,
            r#"{'a': 1}"#,
            r#"{"a": [1, ]}"#,
            r#"{"a": 01}"#,
            r#"{"a": 1.}"#,
            r#"{"a": .5}"#,
            r#"{"a": 1e}"#,
            r#"{"a": +1}"#,
            r#"{"a": -}"#,
            r#"{"a": nan}"#,
            r#"{"a": -NaN}"#,
            r#"{"a": "\x"}"#,
            r#"{"a": "\u12g4"}"#,
            r#"{"a": "\u12"}"#,
            "{\"a\": \"tab\there\"}",
            "{\"a\": \"unterminated}",
            "\u{feff}{}",
            "\u{a0}{}",
        ] {
            assert!(!ok(bad), "{bad:?}");
        }
    }

    #[test]
    fn integers_are_limited_to_4300_digits_but_floats_are_not() {
        let number = |text: String| format!("{{\"n\": {text}}}");
        assert!(ok(&number("9".repeat(4300))));
        assert!(ok(&number(format!("-{}", "9".repeat(4300)))));
        assert!(!ok(&number("9".repeat(4301))));
        assert!(!ok(&number(format!("-{}", "9".repeat(4301)))));
        assert!(ok(&number(format!("{}.5", "9".repeat(5000)))));
        assert!(ok(&number(format!("{}e2", "9".repeat(5000)))));
    }

    #[test]
    fn the_byte_cap_counts_utf8_bytes() {
        let value = format!("{{\"x\": \"{}\"}}", "é".repeat(10));
        assert_eq!(value.len(), 29);
        assert!(object_or_empty(&value, 29));
        assert!(!object_or_empty(&value, 28));
    }

    #[test]
    fn nesting_is_bounded() {
        let nested = |depth: usize| {
            format!(
                "{{\"a\": {}{}}}",
                "[".repeat(depth - 1),
                "]".repeat(depth - 1)
            )
        };
        assert!(ok(&nested(MAX_DEPTH)));
        assert!(!ok(&nested(MAX_DEPTH + 1)));
    }
}
