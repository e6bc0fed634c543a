//! Exact comparison of decimal number texts (the `document_numeric`
//! collation), as Python's `Decimal` compares them.

use std::cmp::Ordering;

/// A finite decimal: sign, significant digits without leading or trailing
/// zeros, and the power of ten of the last digit.
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
}

fn parse(text: &str) -> Option<Decimal> {
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
    let mut digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
    let mut exponent = exponent.checked_sub(frac.len() as i64)?;
    let leading = digits.iter().take_while(|&&d| d == 0).count();
    digits.drain(..leading);
    while digits.last() == Some(&0) {
        digits.pop();
        exponent += 1;
    }
    Some(Decimal {
        negative: negative && !digits.is_empty(),
        digits,
        exponent,
    })
}

fn compare_magnitude(a: &Decimal, b: &Decimal) -> Ordering {
    match (a.digits.is_empty(), b.digits.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    // The position of the leading digit decides first, then the digits.
    let lead_a = a.exponent + a.digits.len() as i64;
    let lead_b = b.exponent + b.digits.len() as i64;
    lead_a.cmp(&lead_b).then_with(|| {
        let n = a.digits.len().max(b.digits.len());
        (0..n)
            .map(|i| (a.digits.get(i).unwrap_or(&0), b.digits.get(i).unwrap_or(&0)))
            .map(|(x, y)| x.cmp(y))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    })
}

/// Compares two decimal texts by value (`"1e+18"` equals
/// `"1000000000000000000"`, `"5e-324"` is above `"0"`). Texts that are not
/// decimals sort after decimals, by their bytes, so the order stays total.
pub fn compare_numeric_text(left: &str, right: &str) -> Ordering {
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
        ] {
            assert_eq!(compare_numeric_text(a, b), expected, "{a} vs {b}");
        }
    }
}
