//! Aware instants in the reference's ISO 8601 forms.
//!
//! The reference reads datetimes with Python's `datetime.fromisoformat`
//! (refusing naive ones), keeps them in UTC with microsecond precision, and
//! writes them with `isoformat()` (`2026-10-01T12:00:00.123456+00:00`, the
//! fraction left out when it is zero) or, in stored documents, with
//! `isoformat(timespec="microseconds")`. [`Datetime`] does the same.

use std::fmt;

use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time};

use crate::DocumentError;

/// An aware instant, in UTC, with microsecond precision (Python's `datetime`
/// range: years 1 to 9999).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Datetime {
    unix_micros: i64,
}

/// Microseconds of the first and last instants Python's `datetime` holds
/// (0001-01-01T00:00:00 and 9999-12-31T23:59:59.999999, UTC).
const MIN_MICROS: i64 = -62_135_596_800_000_000;
const MAX_MICROS: i64 = 253_402_300_799_999_999;

impl Datetime {
    /// The instant `unix_micros` microseconds after the Unix epoch, if Python's
    /// `datetime` can hold it.
    pub fn from_unix_micros(unix_micros: i64) -> Option<Self> {
        (MIN_MICROS..=MAX_MICROS)
            .contains(&unix_micros)
            .then_some(Self { unix_micros })
    }

    /// Microseconds since the Unix epoch.
    pub fn unix_micros(self) -> i64 {
        self.unix_micros
    }

    /// Now, truncated to the microsecond.
    pub fn now() -> Self {
        let nanos = OffsetDateTime::now_utc().unix_timestamp_nanos();
        // The clock reads well inside Python's range for the next 7,000 years.
        Self {
            unix_micros: (nanos / 1_000) as i64,
        }
    }

    /// Reads `text` as Python's `datetime.fromisoformat` does, and refuses a
    /// naive datetime as the reference does.
    ///
    /// Accepted: a date `YYYY-MM-DD` or `YYYYMMDD`, then optionally any one
    /// separator character and a time `HH`, `HH:MM`, `HH:MM:SS`, `HHMM` or
    /// `HHMMSS` with an optional fraction (`.` or `,`, digits beyond the sixth
    /// dropped), then an offset `Z` or `±HH[:MM[:SS[.ffffff]]]`.
    ///
    /// # Errors
    ///
    /// [`DocumentError::InvalidArgument`] with the reference's message:
    /// `Invalid isoformat string: '<text>'`, or `Document datetimes must be
    /// timezone-aware` when no offset is given.
    pub fn parse_iso(text: &str) -> Result<Self, DocumentError> {
        let invalid = || {
            DocumentError::InvalidArgument(format!(
                "Invalid isoformat string: {}",
                python_str_repr(text)
            ))
        };
        let parsed = parse(text).ok_or_else(invalid)?;
        let Some(offset_secs_micros) = parsed.offset_micros else {
            return Err(DocumentError::InvalidArgument(
                "Document datetimes must be timezone-aware".to_owned(),
            ));
        };
        let local = parsed.local.assume_utc();
        let micros = local.unix_timestamp_nanos() / 1_000 - i128::from(offset_secs_micros);
        i64::try_from(micros)
            .ok()
            .and_then(Self::from_unix_micros)
            .ok_or_else(|| DocumentError::InvalidArgument("date value out of range".to_owned()))
    }

    /// Python's `isoformat()` of the instant in UTC: the fraction only when
    /// it is not zero, and `+00:00`.
    pub fn isoformat(self) -> String {
        self.format(false)
    }

    /// Python's `isoformat(timespec="microseconds")` in UTC: always six
    /// fraction digits (the stored form).
    pub fn isoformat_micros(self) -> String {
        self.format(true)
    }

    fn format(self, always_fraction: bool) -> String {
        let secs = self.unix_micros.div_euclid(1_000_000);
        let micros = self.unix_micros.rem_euclid(1_000_000);
        // In range by construction: from_unix_micros keeps years 1..=9999.
        let Ok(at) = OffsetDateTime::from_unix_timestamp(secs) else {
            return String::new();
        };
        let mut out = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute(),
            at.second()
        );
        if always_fraction || micros != 0 {
            out.push_str(&format!(".{micros:06}"));
        }
        out.push_str("+00:00");
        out
    }
}

impl fmt::Display for Datetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.isoformat())
    }
}

/// Python's `repr()` of a string, as the reference's messages quote values:
/// single quotes unless the text holds one and no double quote.
pub fn python_str_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

struct Parsed {
    local: PrimitiveDateTime,
    /// The offset east of UTC in microseconds, `None` for a naive datetime.
    offset_micros: Option<i64>,
}

fn parse(text: &str) -> Option<Parsed> {
    if !text.is_ascii() {
        // Only the separator after the date may be any character: read the
        // rest with a plain `T` there.
        let date_len = if text.as_bytes().get(4) == Some(&b'-') {
            10
        } else {
            8
        };
        let rest = text.get(date_len..)?;
        let mut chars = rest.chars();
        chars.next()?;
        let ascii = format!("{}T{}", &text[..date_len], chars.as_str());
        return if ascii.is_ascii() {
            parse(&ascii)
        } else {
            None
        };
    }
    let bytes = text.as_bytes();
    let (date, rest) = parse_date(bytes)?;
    if rest.is_empty() {
        return Some(Parsed {
            local: PrimitiveDateTime::new(date, Time::MIDNIGHT),
            offset_micros: None,
        });
    }
    // Any single separator character between the date and the time.
    let rest = &rest[1..];
    let (time, rest) = parse_time(rest)?;
    let offset_micros = if rest.is_empty() {
        None
    } else {
        Some(parse_offset(rest)?)
    };
    Some(Parsed {
        local: PrimitiveDateTime::new(date, time),
        offset_micros,
    })
}

fn digits(bytes: &[u8], n: usize) -> Option<u32> {
    let part = bytes.get(..n)?;
    part.iter().try_fold(0u32, |acc, b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

fn parse_date(bytes: &[u8]) -> Option<(Date, &[u8])> {
    let year = digits(bytes, 4)?;
    let (month, day, rest) = if bytes.get(4) == Some(&b'-') {
        if bytes.get(7) != Some(&b'-') {
            return None;
        }
        (
            digits(&bytes[5..], 2)?,
            digits(&bytes[8..], 2)?,
            &bytes[10..],
        )
    } else {
        (
            digits(&bytes[4..], 2)?,
            digits(&bytes[6..], 2)?,
            &bytes[8..],
        )
    };
    if year == 0 {
        return None;
    }
    let month = Month::try_from(u8::try_from(month).ok()?).ok()?;
    let date =
        Date::from_calendar_date(i32::try_from(year).ok()?, month, u8::try_from(day).ok()?).ok()?;
    Some((date, rest))
}

/// `HH[:MM[:SS[.f+]]]` or `HH[MM[SS[.f+]]]`, then whatever follows (the offset).
fn parse_time(bytes: &[u8]) -> Option<(Time, &[u8])> {
    let end = bytes
        .iter()
        .position(|b| matches!(b, b'Z' | b'+' | b'-'))
        .unwrap_or(bytes.len());
    let (clock, rest) = bytes.split_at(end);
    let (hms, fraction) = match clock.iter().position(|b| matches!(b, b'.' | b',')) {
        Some(at) => (&clock[..at], Some(&clock[at + 1..])),
        None => (clock, None),
    };
    let parts: Vec<u32> = if hms.contains(&b':') {
        hms.split(|b| *b == b':')
            .map(|p| if p.len() == 2 { digits(p, 2) } else { None })
            .collect::<Option<_>>()?
    } else {
        if hms.len() % 2 != 0 || hms.is_empty() {
            return None;
        }
        hms.chunks(2).map(|p| digits(p, 2)).collect::<Option<_>>()?
    };
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    // A fraction needs seconds before it.
    if fraction.is_some() && parts.len() != 3 {
        return None;
    }
    let micros = match fraction {
        Some(f) => fraction_micros(f)?,
        None => 0,
    };
    let get = |i: usize| parts.get(i).copied().unwrap_or(0);
    let time = Time::from_hms_micro(
        u8::try_from(get(0)).ok()?,
        u8::try_from(get(1)).ok()?,
        u8::try_from(get(2)).ok()?,
        micros,
    )
    .ok()?;
    Some((time, rest))
}

/// One or more digits, kept to microseconds (the rest dropped, as Python does).
fn fraction_micros(fraction: &[u8]) -> Option<u32> {
    if fraction.is_empty() || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let kept = &fraction[..fraction.len().min(6)];
    let value = digits(kept, kept.len())?;
    Some(value * 10u32.pow(6 - kept.len() as u32))
}

fn parse_offset(bytes: &[u8]) -> Option<i64> {
    if bytes == b"Z" {
        return Some(0);
    }
    let sign: i64 = match bytes.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (time, rest) = parse_time(&bytes[1..])?;
    if !rest.is_empty() {
        return None;
    }
    let (h, m, s, us) = time.as_hms_micro();
    let micros =
        ((i64::from(h) * 60 + i64::from(m)) * 60 + i64::from(s)) * 1_000_000 + i64::from(us);
    if micros >= 86_400_000_000 {
        return None;
    }
    Some(sign * micros)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn iso(text: &str) -> String {
        match Datetime::parse_iso(text) {
            Ok(d) => d.isoformat(),
            Err(e) => format!("ERR {e}"),
        }
    }

    /// Expected values printed by CPython 3.11's `datetime.fromisoformat(s)
    /// .astimezone(timezone.utc).isoformat()`.
    #[test]
    fn reads_what_python_reads() {
        assert_eq!(
            iso("2026-01-02T03:04:05.1234567+00:00"),
            "2026-01-02T03:04:05.123456+00:00"
        );
        assert_eq!(
            iso("2026-01-02T03:04:05.1+01:00"),
            "2026-01-02T02:04:05.100000+00:00"
        );
        assert_eq!(iso("2026-01-02 03:04Z"), "2026-01-02T03:04:00+00:00");
        assert_eq!(iso("20260102T030405Z"), "2026-01-02T03:04:05+00:00");
        assert_eq!(iso("2026-01-02T03+05"), "2026-01-01T22:00:00+00:00");
        assert_eq!(
            iso("2026-01-02T03:04:05,5Z"),
            "2026-01-02T03:04:05.500000+00:00"
        );
        assert_eq!(
            iso("2026-01-02T03:04:05-05:30"),
            "2026-01-02T08:34:05+00:00"
        );
        assert_eq!(
            iso("2026-01-02"),
            "ERR Document datetimes must be timezone-aware"
        );
        assert_eq!(
            iso("2026-01-02T24:00:00Z"),
            "ERR Invalid isoformat string: '2026-01-02T24:00:00Z'"
        );
        assert_eq!(iso("nope"), "ERR Invalid isoformat string: 'nope'");
    }

    #[test]
    fn writes_what_python_writes() {
        let d = Datetime::from_unix_micros(1_790_000_000_000_000).unwrap();
        assert_eq!(d.isoformat(), "2026-09-21T14:13:20+00:00");
        assert_eq!(d.isoformat_micros(), "2026-09-21T14:13:20.000000+00:00");
        let d = Datetime::from_unix_micros(-1).unwrap();
        assert_eq!(d.isoformat(), "1969-12-31T23:59:59.999999+00:00");
        assert!(Datetime::from_unix_micros(MAX_MICROS + 1).is_none());
        assert_eq!(
            Datetime::from_unix_micros(MIN_MICROS).unwrap().isoformat(),
            "0001-01-01T00:00:00+00:00"
        );
    }

    #[test]
    fn quotes_like_python_repr() {
        assert_eq!(python_str_repr("a'b"), "\"a'b\"");
        assert_eq!(python_str_repr("a'b\""), "'a\\'b\"'");
        assert_eq!(python_str_repr("x\ny"), "'x\\ny'");
    }
}
