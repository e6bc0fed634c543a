//! Python's `repr` of a float, and the exact integer a float's text names.

/// The shortest decimal digits that read back as `x`, and where the decimal
/// point goes: `x == 0.d₁d₂… × 10^point`. `x` must be finite and not zero.
fn shortest_digits(x: f64) -> (String, i32) {
    // Rust's `{:e}` prints the shortest round-trip digits, as Python's repr
    // does (both pick the closest of the shortest candidates).
    let text = format!("{:e}", x.abs());
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    (digits, exponent + 1)
}

/// `repr(x)` in Python 3: shortest round-trip digits, positional notation
/// when the decimal exponent is in `-5..16`, else `1e+16` / `1.5e-05` style;
/// always a `.0` on integral positional values.
///
/// Non-finite values print as Python prints them (`inf`, `-inf`, `nan`);
/// the codec never stores them.
pub fn python_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    let (digits, point) = shortest_digits(x);
    let n = digits.len() as i32;
    let body = if -4 < point && point <= 16 {
        if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point >= n {
            format!("{digits}{}.0", "0".repeat((point - n) as usize))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{int}.{frac}")
        }
    } else {
        let exponent = point - 1;
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_owned()
        } else {
            format!("{first}.{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{exp_sign}{:02}", exponent.abs())
    };
    format!("{sign}{body}")
}

/// `int(Decimal(repr(x)))` for an integral finite `x`: the integer its
/// shortest decimal text names, which for large values differs from the
/// float's binary value (`1.0000000000000001e18` names
/// `1000000000000000100`, the double holds `…128`). As `-`/digits text.
pub fn repr_integer_text(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    let (digits, point) = shortest_digits(x);
    let keep = digits.len().min(point.max(0) as usize);
    let mut text = digits[..keep].to_owned();
    text.push_str(&"0".repeat((point.max(0) as usize).saturating_sub(keep)));
    if text.is_empty() {
        text.push('0');
    }
    if x < 0.0 && text != "0" {
        text.insert(0, '-');
    }
    text
}

/// `int(x)` for an integral finite `x`: the exact binary value, as
/// `-`/digits text (used by the legacy equality key).
pub fn exact_integer_text(x: f64) -> String {
    if x.abs() < 9.0e15 {
        return format!("{}", x as i64);
    }
    let bits = x.abs().to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32 - 1075;
    let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
    // Integral and at least 9e15, so the exponent is not negative. Multiply
    // the mantissa by 2^exponent on little-endian decimal digits.
    let mut digits: Vec<u8> = mantissa
        .to_string()
        .bytes()
        .rev()
        .map(|b| b - b'0')
        .collect();
    for _ in 0..exponent.max(0) {
        let mut carry = 0;
        for d in digits.iter_mut() {
            let v = *d * 2 + carry;
            *d = v % 10;
            carry = v / 10;
        }
        if carry > 0 {
            digits.push(carry);
        }
    }
    let mut text: String = digits.iter().rev().map(|d| char::from(b'0' + d)).collect();
    if x < 0.0 {
        text.insert(0, '-');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_texts() {
        assert_eq!(
            repr_integer_text(1.0000000000000001e18),
            "1000000000000000100"
        );
        assert_eq!(repr_integer_text(-1e20), "-100000000000000000000");
        assert_eq!(repr_integer_text(3.0), "3");
        assert_eq!(
            exact_integer_text(1.0000000000000001e18),
            "1000000000000000128"
        );
        assert_eq!(exact_integer_text(-2.0), "-2");
        assert_eq!(
            exact_integer_text(1e100),
            "10000000000000000159028911097599180468360808563945281389781327557747838772170381060813469985856815104"
        );
    }
}
