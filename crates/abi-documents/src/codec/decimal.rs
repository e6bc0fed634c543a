//! Exact comparison of decimal number texts (the `document_numeric`
//! collation), as Python's `Decimal` compares them.

use std::cmp::Ordering;

/// A finite decimal: sign, significant digits (ASCII, without leading or
/// trailing zeros; `head` then `tail`, slices of the text, so a comparison
/// allocates nothing: the collation runs on every index entry compared) and
/// the power of ten of the last digit.
struct Decimal<'a> {
    negative: bool,
    head: &'a [u8],
    tail: &'a [u8],
    exponent: i64,
}

impl Decimal<'_> {
    fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// The `i`th significant digit, `b'0'` past the last.
    fn digit(&self, i: usize) -> u8 {
        match self.head.get(i) {
            Some(&d) => d,
            None => self.tail.get(i - self.head.len()).copied().unwrap_or(b'0'),
        }
    }
}

fn parse(text: &str) -> Option<Decimal<'_>> {
    let trimmed = text.trim();
    let (negative, body) = match trimmed.as_bytes().first()? {
        b'-' => (true, &trimmed[1..]),
        b'+' => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], body[at + 1..].parse::<i64>().ok()?),
        None => (body, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut exponent = exponent.checked_sub(frac.len() as i64)?;
    let (mut head, mut tail) = (int.as_bytes(), frac.as_bytes());
    while let [b'0', rest @ ..] = head {
        head = rest;
    }
    if head.is_empty() {
        while let [b'0', rest @ ..] = tail {
            tail = rest;
        }
    }
    while let [rest @ .., b'0'] = tail {
        tail = rest;
        exponent += 1;
    }
    if tail.is_empty() {
        while let [rest @ .., b'0'] = head {
            head = rest;
            exponent += 1;
        }
    }
    Some(Decimal {
        negative: negative && !(head.is_empty() && tail.is_empty()),
        head,
        tail,
        exponent,
    })
}

fn compare_magnitude(a: &Decimal<'_>, b: &Decimal<'_>) -> Ordering {
    match (a.len() == 0, b.len() == 0) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    // The position of the leading digit decides first, then the digits.
    let lead_a = a.exponent + a.len() as i64;
    let lead_b = b.exponent + b.len() as i64;
    lead_a.cmp(&lead_b).then_with(|| {
        (0..a.len().max(b.len()))
            .map(|i| a.digit(i).cmp(&b.digit(i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    })
}

/// A plain integer text, as `document_numeric_text` writes every int
/// (`"0"`, `"42"`, `"-7"`: digits without a leading zero, an optional
/// minus, never `"-0"`): its sign and digits.
fn plain_integer(text: &[u8]) -> Option<(bool, &[u8])> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    let plain = match digits {
        [] => false,
        [b'0'] => !negative,
        [b'0', ..] => false,
        _ => digits.iter().all(u8::is_ascii_digit),
    };
    plain.then_some((negative, digits))
}

/// Compares two decimal texts by value (`"1e+18"` equals
/// `"1000000000000000000"`, `"5e-324"` is above `"0"`). Texts that are not
/// decimals sort after decimals, by their bytes, so the order stays total.
/// It takes the texts' bytes, as the `document_numeric` collation gets them
/// from SQLite: UTF-8 that SQLite does not check, so a sequence that is not
/// UTF-8 reads as U+FFFD (as `rusqlite` handed such texts over before).
pub fn compare_numeric_text(left: &[u8], right: &[u8]) -> Ordering {
    // Two plain integers (an indexed int field's every entry) compare by
    // length, then digits: the general parse below is for the rest.
    if let (Some((left_negative, a)), Some((right_negative, b))) =
        (plain_integer(left), plain_integer(right))
    {
        let magnitude = a.len().cmp(&b.len()).then_with(|| a.cmp(b));
        return match (left_negative, right_negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (true, true) => magnitude.reverse(),
            (false, false) => magnitude,
        };
    }
    match (std::str::from_utf8(left), std::str::from_utf8(right)) {
        (Ok(left), Ok(right)) => compare_decimals(left, right),
        _ => compare_decimals(
            &String::from_utf8_lossy(left),
            &String::from_utf8_lossy(right),
        ),
    }
}

/// [`compare_numeric_text`] by the general parse.
fn compare_decimals(left: &str, right: &str) -> Ordering {
    match (parse(left), parse(right)) {
        (Some(a), Some(b)) => match (a.negative, b.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (true, true) => compare_magnitude(&b, &a),
            _ => compare_magnitude(&a, &b),
        },
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => left.as_bytes().cmp(right.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_by_value() {
        use Ordering::*;
        for (a, b, expected) in [
            ("1.0000000000000001e+18", "1000000000000000100", Equal),
            ("1.0000000000000001e+18", "1000000000000000128", Less),
            ("5e-324", "0", Greater),
            ("-1", "0", Less),
            ("-0.0", "0", Equal),
            ("-2", "-10", Greater),
            ("10", "9", Greater),
            ("1e+100", "-1.7976931348623157e+308", Greater),
            ("0.5", "0.25", Greater),
            ("1", "1.0", Equal),
            ("007", "7", Equal),
            ("0.0100", "0.01", Equal),
            ("100", "1e2", Equal),
            ("100.5", "1005e-1", Equal),
            ("0.000", "-0", Equal),
            (" 5 ", "4.999", Greater),
            ("120", "12", Greater),
            ("0.012", "0.0119", Greater),
            ("-0.012", "-0.0119", Less),
            ("1.20e1", "12", Equal),
            ("abc", "1e999", Greater),
            ("abc", "abd", Less),
            ("", "0", Greater),
            ("-7", "-10", Greater),
            ("-10", "7", Less),
            ("0", "-1", Greater),
            ("99", "100", Less),
            ("9223372036854775807", "-9223372036854775808", Greater),
            ("-0", "0", Equal),
            ("08", "8", Equal),
        ] {
            assert_eq!(
                compare_numeric_text(a.as_bytes(), b.as_bytes()),
                expected,
                "{a} vs {b}"
            );
        }
    }

    /// The plain-integer shortcut orders every pair as the general parse
    /// does, texts it takes and texts it leaves alike.
    #[test]
    fn the_integer_shortcut_agrees_with_the_general_parse() {
        let mut texts: Vec<String> = [
            "0", "-0", "00", "007", "7", "-7", "10", "-10", "99", "100", "-100", "1e2", "1.5", "",
            "-", "+5", "abc", " 5",
        ]
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
        for n in [1_i64, 9, 42, 1000, 123_456_789, i64::MAX, i64::MIN + 1] {
            texts.push(n.to_string());
            texts.push((-n).to_string());
        }
        texts.push(i64::MIN.to_string());
        for a in &texts {
            for b in &texts {
                assert_eq!(
                    compare_numeric_text(a.as_bytes(), b.as_bytes()),
                    compare_decimals(a, b),
                    "{a:?} vs {b:?}"
                );
            }
        }
        assert!(plain_integer(b"42").is_some() && plain_integer(b"-42").is_some());
        assert!(plain_integer(b"-0").is_none() && plain_integer(b"042").is_none());
    }

    /// Bytes that are not UTF-8 compare as their lossy reading, as the
    /// collation compared them when `rusqlite` converted them.
    #[test]
    fn bytes_that_are_not_utf8_compare_as_their_lossy_text() {
        for (a, b) in [
            (&b"\xff"[..], &b"\xfe"[..]),
            (b"1\xff", b"1\xfe"),
            (b"\xff", b"5"),
            (b"12", b"1\xc3"),
        ] {
            assert_eq!(
                compare_numeric_text(a, b),
                compare_decimals(&String::from_utf8_lossy(a), &String::from_utf8_lossy(b)),
                "{a:?} vs {b:?}"
            );
        }
        assert_eq!(compare_numeric_text(b"\xff", b"\xfe"), Ordering::Equal);
    }
}
