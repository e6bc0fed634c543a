//! Aware instants in the reference's ISO 8601 forms.
//!
//! The reference reads datetimes with Python's `datetime.fromisoformat`
//! (refusing naive ones), keeps them in UTC with microsecond precision, and
//! writes them with `isoformat()` (`2026-10-01T12:00:00.123456+00:00`, the
//! fraction left out when it is zero) or, in stored documents, with
//! `isoformat(timespec="microseconds")`. [`Datetime`] does the same.

use std::fmt;

use time::OffsetDateTime;

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
        if let Some(stored) = Self::parse_stored(text) {
            return Ok(stored);
        }
        let invalid = || {
            DocumentError::InvalidArgument(format!(
                "Invalid isoformat string: {}",
                python_str_repr(text)
            ))
        };
        let parsed = match parse(text) {
            Ok(parsed) => parsed,
            Err(Refused::Format) => return Err(invalid()),
            Err(Refused::Range(message)) => return Err(DocumentError::InvalidArgument(message)),
        };
        let Some(offset_micros) = parsed.offset_micros else {
            return Err(DocumentError::InvalidArgument(
                "Document datetimes must be timezone-aware".to_owned(),
            ));
        };
        let days = days_from_civil(parsed.year, parsed.month, parsed.day);
        let micros = i128::from(days) * 86_400_000_000 + i128::from(parsed.time_micros)
            - i128::from(offset_micros);
        i64::try_from(micros)
            .ok()
            .and_then(Self::from_unix_micros)
            .ok_or_else(|| DocumentError::InvalidArgument("date value out of range".to_owned()))
    }

    /// The stored form, `YYYY-MM-DDTHH:MM:SS.ffffff+00:00` (what
    /// [`Self::isoformat_micros`] writes and every read of a stored stamp
    /// meets), read field by field. `None` for any other text and for a
    /// field out of range: [`Self::parse_iso`]'s general path judges those,
    /// with its messages.
    fn parse_stored(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        let shaped = b.len() == 32
            && b[26..] == *b"+00:00"
            && [
                (4, b'-'),
                (7, b'-'),
                (10, b'T'),
                (13, b':'),
                (16, b':'),
                (19, b'.'),
            ]
            .iter()
            .all(|&(at, separator)| b[at] == separator);
        if !shaped {
            return None;
        }
        let number = |from: usize, to: usize| {
            b[from..to].iter().try_fold(0_i64, |n, digit| {
                digit
                    .is_ascii_digit()
                    .then(|| n * 10 + i64::from(digit - b'0'))
            })
        };
        let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
        let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
        let micros = number(20, 26)?;
        let in_range = (1..=9999).contains(&year)
            && (1..=12).contains(&month)
            && (1..=days_in_month(year, month)).contains(&day)
            && hour <= 23
            && minute <= 59
            && second <= 59;
        if !in_range {
            return None;
        }
        let clock = ((hour * 60 + minute) * 60 + second) * 1_000_000 + micros;
        Self::from_unix_micros(days_from_civil(year, month, day) * 86_400_000_000 + clock)
    }

    /// Python's `isoformat()` of the instant in UTC: the fraction only when
    /// it is not zero, and `+00:00`.
    pub fn isoformat(self) -> String {
        self.format(false)
    }

    /// The length of [`Self::isoformat`]'s text, without making it.
    pub fn isoformat_len(self) -> usize {
        // `YYYY-MM-DDTHH:MM:SS` and `+00:00`, and `.ffffff` unless whole.
        if self.unix_micros.rem_euclid(1_000_000) == 0 {
            25
        } else {
            32
        }
    }

    /// Python's `isoformat(timespec="microseconds")` in UTC: always six
    /// fraction digits (the stored form).
    pub fn isoformat_micros(self) -> String {
        self.format(true)
    }

    fn format(self, always_fraction: bool) -> String {
        let secs = self.unix_micros.div_euclid(1_000_000);
        let micros = self.unix_micros.rem_euclid(1_000_000);
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        let second_of_day = secs.rem_euclid(86_400);
        // Digits written into a fixed buffer: `format!` took a tenth of a
        // put's reply. Years are 1..=9999 by construction (from_unix_micros).
        let mut out = [0u8; 32];
        write_digits(&mut out[0..4], year);
        out[4] = b'-';
        write_digits(&mut out[5..7], month);
        out[7] = b'-';
        write_digits(&mut out[8..10], day);
        out[10] = b'T';
        write_digits(&mut out[11..13], second_of_day / 3600);
        out[13] = b':';
        write_digits(&mut out[14..16], second_of_day / 60 % 60);
        out[16] = b':';
        write_digits(&mut out[17..19], second_of_day % 60);
        let mut len = 19;
        if always_fraction || micros != 0 {
            out[19] = b'.';
            write_digits(&mut out[20..26], micros);
            len = 26;
        }
        out[len..len + 6].copy_from_slice(b"+00:00");
        len += 6;
        // Only ASCII digits and separators were written.
        String::from_utf8(out[..len].to_vec()).unwrap_or_default()
    }
}

/// Writes the last `slot.len()` decimal digits of `value` (non-negative)
/// into `slot`, zero-padded.
fn write_digits(slot: &mut [u8], mut value: i64) {
    for digit in slot.iter_mut().rev() {
        // 0..=9 for a non-negative value.
        *digit = b'0' + (value % 10).unsigned_abs() as u8;
        value /= 10;
    }
}

impl fmt::Display for Datetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.isoformat())
    }
}

/// Python's `repr()` of a string (its home is `abi-pyjson`).
pub use abi_pyjson::python_str_repr;

/// A checked datetime: its calendar date, the time of day in microseconds
/// and the offset east of UTC in microseconds (`None` when naive).
struct Parsed {
    year: i64,
    month: i64,
    day: i64,
    time_micros: i64,
    offset_micros: Option<i64>,
}

/// Why `fromisoformat` refused a text.
enum Refused {
    /// Not one of its formats: `Invalid isoformat string: ...`.
    Format,
    /// A component out of range, with the message Python gives.
    Range(String),
}

/// CPython 3.11's `datetime.fromisoformat` (`_datetimemodule.c`), step by
/// step: the separator replaced when it is not ASCII, the separator's place
/// found from the date's form, the date (calendar or ISO week), the time and
/// offset, then the offset's range and each component's range, in that order.
fn parse(text: &str) -> Result<Parsed, Refused> {
    // "All valid ISO 8601 strings are at least 7 characters long."
    if text.chars().count() < 7 {
        return Err(Refused::Format);
    }
    // The separator, the only place any character may stand, sits at
    // character 7, 8 or 10: the first non-ASCII one there is read as `T`.
    let mut chars: Vec<char> = text.chars().collect();
    if let Some(at) = [7, 8, 10]
        .into_iter()
        .take_while(|at| *at < chars.len())
        .find(|at| !chars[*at].is_ascii())
    {
        chars[at] = 'T';
    }
    let clean: String = chars.into_iter().collect();
    let b = Bytes(clean.as_bytes());
    let len = clean.len();
    let separator = separator_location(b, len).ok_or(Refused::Format)?;
    let (year, month, day) = parse_date(b, separator).ok_or(Refused::Format)?;
    let (mut clock, mut offset) = ((0, 0, 0, 0), None);
    if len > separator {
        (clock, offset) = parse_time(b, separator + 1, len).ok_or(Refused::Format)?;
    }
    if let Some(offset) = offset
        && offset.abs() >= 86_400_000_000
    {
        return Err(Refused::Range(format!(
            "offset must be a timedelta strictly between -timedelta(hours=24) and \
             timedelta(hours=24), not {}.",
            timedelta_repr(offset)
        )));
    }
    let range = |message: String| Err(Refused::Range(message));
    if !(1..=9999).contains(&year) {
        return range(format!("year {year} is out of range"));
    }
    if !(1..=12).contains(&month) {
        return range("month must be in 1..12".into());
    }
    if day < 1 || day > days_in_month(year, month) {
        return range("day is out of range for month".into());
    }
    let (hour, minute, second, micros) = clock;
    if !(0..=23).contains(&hour) {
        return range("hour must be in 0..23".into());
    }
    if !(0..=59).contains(&minute) {
        return range("minute must be in 0..59".into());
    }
    if !(0..=59).contains(&second) {
        return range("second must be in 0..59".into());
    }
    Ok(Parsed {
        year,
        month,
        day,
        time_micros: ((hour * 60 + minute) * 60 + second) * 1_000_000 + micros,
        offset_micros: offset,
    })
}

/// The text as C reads it: a NUL past the end.
#[derive(Clone, Copy)]
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn at(self, i: usize) -> u8 {
        self.0.get(i).copied().unwrap_or(0)
    }

    /// `n` digits from `p` as a number, and the position after them.
    fn digits(self, p: usize, n: usize) -> Option<(i64, usize)> {
        let mut value = 0i64;
        for i in p..p + n {
            let c = self.at(i);
            if !c.is_ascii_digit() {
                return None;
            }
            value = value * 10 + i64::from(c - b'0');
        }
        Some((value, p + n))
    }
}

/// `_find_isoformat_datetime_separator`: where the date ends.
fn separator_location(b: Bytes<'_>, len: usize) -> Option<usize> {
    if len == 7 {
        return Some(7);
    }
    if b.at(4) == b'-' {
        if b.at(5) != b'W' {
            return Some(10);
        }
        if len < 8 {
            return None;
        }
        if len > 8 && b.at(8) == b'-' {
            if len == 9 {
                return None;
            }
            if len > 10 && b.at(10).is_ascii_digit() {
                return Some(8);
            }
            return Some(10);
        }
        return Some(8);
    }
    if b.at(4) == b'W' {
        let mut idx = 7;
        while idx < len && b.at(idx).is_ascii_digit() {
            idx += 1;
        }
        if idx < 9 {
            return Some(idx);
        }
        return Some(if idx % 2 == 0 { 7 } else { 8 });
    }
    Some(8)
}

/// `parse_isoformat_date` over the first `len` bytes: `YYYY-MM-DD`,
/// `YYYYMMDD`, or an ISO week date (`YYYY-Www[-D]`, `YYYYWww[D]`); the
/// components unchecked.
fn parse_date(b: Bytes<'_>, len: usize) -> Option<(i64, i64, i64)> {
    let (year, mut p) = b.digits(0, 4)?;
    let uses_separator = b.at(p) == b'-';
    if uses_separator {
        p += 1;
    }
    if b.at(p) == b'W' {
        let (week, after) = b.digits(p + 1, 2)?;
        p = after;
        let mut weekday = 1;
        if p < len {
            if uses_separator {
                if b.at(p) != b'-' {
                    return None;
                }
                p += 1;
            }
            weekday = b.digits(p, 1)?.0;
        }
        return iso_to_ymd(year, week, weekday);
    }
    let (month, mut p) = b.digits(p, 2)?;
    if uses_separator {
        if b.at(p) != b'-' {
            return None;
        }
        p += 1;
    }
    let (day, _) = b.digits(p, 2)?;
    Some((year, month, day))
}

/// `iso_to_ymd`: the calendar date of an ISO week date.
fn iso_to_ymd(year: i64, week: i64, weekday: i64) -> Option<(i64, i64, i64)> {
    if week <= 0 || week >= 53 {
        // A year has a week 53 when it starts on a Thursday, or on a
        // Wednesday in a leap year.
        let first = weekday_monday0(days_from_civil(year, 1, 1));
        if !(week == 53 && (first == 3 || (first == 2 && is_leap(year)))) {
            return None;
        }
    }
    if !(1..=7).contains(&weekday) {
        return None;
    }
    let jan4 = days_from_civil(year, 1, 4);
    let week1_monday = jan4 - weekday_monday0(jan4);
    Some(civil_from_days(week1_monday + (week - 1) * 7 + weekday - 1))
}

/// `parse_isoformat_time` from `start` to `end`: the clock (hours, minutes,
/// seconds, microseconds, unchecked) and the offset in microseconds.
type Clock = (i64, i64, i64, i64);

fn parse_time(b: Bytes<'_>, start: usize, end: usize) -> Option<(Clock, Option<i64>)> {
    let mut tz = start;
    loop {
        if matches!(b.at(tz), b'Z' | b'+' | b'-') {
            break;
        }
        tz += 1;
        if tz >= end {
            break;
        }
    }
    let (clock, rv) = parse_hh_mm_ss_ff(b, start, tz)?;
    if tz == end {
        // Nothing may follow a time without an offset.
        return (!rv).then_some((clock, None));
    }
    if b.at(tz) == b'Z' {
        return (b.at(tz + 1) == 0).then_some((clock, Some(0)));
    }
    let sign = if b.at(tz) == b'-' { -1 } else { 1 };
    let ((h, m, s, us), rv) = parse_hh_mm_ss_ff(b, tz + 1, end)?;
    if rv {
        return None;
    }
    let whole_seconds = (h * 60 + m) * 60 + s;
    // CPython's `tzinfo_from_isoformat_results`: an offset whose whole
    // seconds are zero is UTC, its fraction dropped (`+00:00:00.5` is UTC).
    if whole_seconds == 0 {
        return Some((clock, Some(0)));
    }
    Some((clock, Some(sign * (whole_seconds * 1_000_000 + us))))
}

/// `parse_hh_mm_ss_ff`: `HH[:MM[:SS]]` or `HH[MM[SS]]`, then an optional
/// fraction (`.` or `,`, digits past the sixth skipped); also whether
/// something other than the end of the text follows.
fn parse_hh_mm_ss_ff(b: Bytes<'_>, start: usize, end: usize) -> Option<(Clock, bool)> {
    let mut vals = [0i64; 3];
    let mut p = start;
    let mut has_separator = true;
    for (i, val) in vals.iter_mut().enumerate() {
        let (v, after) = b.digits(p, 2)?;
        *val = v;
        let c = b.at(after);
        p = after + 1;
        if i == 0 {
            has_separator = c == b':';
        }
        if p >= end {
            return Some(((vals[0], vals[1], vals[2], 0), c != 0));
        } else if has_separator && c == b':' {
            continue;
        } else if c == b'.' || c == b',' {
            break;
        } else if !has_separator {
            p -= 1;
        } else {
            return None;
        }
    }
    let to_parse = end.saturating_sub(p).min(6);
    let (mut micros, mut p) = b.digits(p, to_parse)?;
    if to_parse > 0 && to_parse < 6 {
        micros *= 10i64.pow(6 - to_parse as u32);
    }
    while b.at(p).is_ascii_digit() {
        p += 1;
    }
    Some(((vals[0], vals[1], vals[2], micros), b.at(p) != 0))
}

/// Python's `repr()` of a `timedelta` of `micros` microseconds.
fn timedelta_repr(micros: i64) -> String {
    let days = micros.div_euclid(86_400_000_000);
    let rest = micros.rem_euclid(86_400_000_000);
    let (seconds, microseconds) = (rest / 1_000_000, rest % 1_000_000);
    let parts: Vec<String> = [
        ("days", days),
        ("seconds", seconds),
        ("microseconds", microseconds),
    ]
    .into_iter()
    .filter(|(_, v)| *v != 0)
    .map(|(name, v)| format!("{name}={v}"))
    .collect();
    if parts.is_empty() {
        return "datetime.timedelta(0)".into();
    }
    format!("datetime.timedelta({})", parts.join(", "))
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (any year).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date `days` after 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Monday 0 ... Sunday 6 (1970-01-01 was a Thursday).
fn weekday_monday0(days: i64) -> i64 {
    (days + 3).rem_euclid(7)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The stored form read field by field gives the general parser's
    /// instant, across years, leap days and the ends of the range; texts
    /// off the form, or with a field out of range, are left to the general
    /// path (and its errors).
    #[test]
    fn stored_stamps_read_as_the_general_parser_reads_them() {
        let general = |text: &str| {
            let parsed = parse(text).ok()?;
            let days = days_from_civil(parsed.year, parsed.month, parsed.day);
            Datetime::from_unix_micros(
                days * 86_400_000_000 + parsed.time_micros - parsed.offset_micros?,
            )
        };
        let mut micros = MIN_MICROS;
        let step = (MAX_MICROS - MIN_MICROS) / 997;
        let mut stamps = vec![MAX_MICROS, 0, 951_782_400_000_000, 1_709_164_800_123_456];
        while micros < MAX_MICROS {
            stamps.push(micros);
            micros += step;
        }
        for unix_micros in stamps {
            let at = Datetime::from_unix_micros(unix_micros).unwrap();
            let text = at.isoformat_micros();
            assert_eq!(Datetime::parse_stored(&text), Some(at), "{text}");
            assert_eq!(general(&text), Some(at), "{text}");
        }
        for other in [
            "2026-12-07T11:00:00+00:00",
            "2026-12-07T11:00:00.000000+01:00",
            "2026-12-07 11:00:00.000000+00:00",
            "2026-02-30T11:00:00.000000+00:00",
            "2026-13-01T11:00:00.000000+00:00",
            "0000-01-01T00:00:00.000000+00:00",
            "2026-12-07T24:00:00.000000+00:00",
            "2026-12-07T11:60:00.000000+00:00",
            "2026-12-07T11:00:60.000000+00:00",
            "2026-12-07T11:00:0x.000000+00:00",
            "+026-12-07T11:00:00.000000+00:00",
        ] {
            assert_eq!(Datetime::parse_stored(other), None, "{other}");
        }
        assert_eq!(
            Datetime::parse_iso("2026-02-30T11:00:00.000000+00:00").map_err(|e| e.to_string()),
            Datetime::parse_iso("2026-02-30T11:00:00+00:00").map_err(|e| e.to_string()),
        );
    }

    fn iso(text: &str) -> String {
        match Datetime::parse_iso(text) {
            Ok(d) => d.isoformat(),
            Err(e) => format!("ERR {e}"),
        }
    }

    /// The digits written by hand agree with `time`'s calendar over the
    /// whole range, both forms.
    #[test]
    fn formats_as_the_calendar_does() {
        let oracle = |micros: i64, always: bool| {
            let at = OffsetDateTime::from_unix_timestamp(micros.div_euclid(1_000_000)).unwrap();
            let fraction = micros.rem_euclid(1_000_000);
            let mut text = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
                at.year(),
                u8::from(at.month()),
                at.day(),
                at.hour(),
                at.minute(),
                at.second()
            );
            if always || fraction != 0 {
                text.push_str(&format!(".{fraction:06}"));
            }
            text + "+00:00"
        };
        let mut micros = vec![MIN_MICROS, MAX_MICROS, 0, -1, 1, 951_782_400_000_000];
        // A spread over the range, odd steps so every field moves.
        let mut at = MIN_MICROS;
        while at < MAX_MICROS - 7_777_777_777_777_777 {
            at += 7_777_777_777_777_777 / 997 * 31 + 123_457;
            micros.push(at);
        }
        for m in micros {
            let d = Datetime::from_unix_micros(m).unwrap();
            assert_eq!(d.isoformat(), oracle(m, false), "{m}");
            assert_eq!(d.isoformat_len(), d.isoformat().len(), "{m}");
            assert_eq!(d.isoformat_micros(), oracle(m, true), "{m}");
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
        assert_eq!(iso("2026-01-02T24:00:00Z"), "ERR hour must be in 0..23");
        assert_eq!(iso("nope"), "ERR Invalid isoformat string: 'nope'");
    }

    /// Each text with what CPython 3.11 answers (`fromisoformat`, then
    /// the naive check and `astimezone(timezone.utc).isoformat()`): week
    /// dates, every range error in Python's order, its separator and
    /// fraction quirks.
    #[test]
    fn refuses_and_reads_as_cpython_3_11() {
        let cases: &[(&str, &str)] = &[
            ("2026-W40-4T00:00:00Z", "2026-10-01T00:00:00+00:00"),
            ("2026W404T00:00Z", "2026-10-01T00:00:00+00:00"),
            ("2026-W40T01Z", "2026-09-28T01:00:00+00:00"),
            ("2026W40T01Z", "2026-09-28T01:00:00+00:00"),
            ("2026-W53-1T00Z", "2026-12-28T00:00:00+00:00"),
            (
                "2026-W54-1T00Z",
                "ERR Invalid isoformat string: '2026-W54-1T00Z'",
            ),
            (
                "2026-W40-8T00Z",
                "ERR Invalid isoformat string: '2026-W40-8T00Z'",
            ),
            (
                "2026-W00-1T00Z",
                "ERR Invalid isoformat string: '2026-W00-1T00Z'",
            ),
            ("2020-W53-7T00Z", "2021-01-03T00:00:00+00:00"),
            (
                "2026-W40-4",
                "ERR Document datetimes must be timezone-aware",
            ),
            // An offset of zero whole seconds is UTC; its fraction is dropped.
            (
                "2026-01-01T12:00:00+00:00:00.5",
                "2026-01-01T12:00:00+00:00",
            ),
            (
                "2026-01-01T12:00:00-00:00:00.000001",
                "2026-01-01T12:00:00+00:00",
            ),
            (
                "2026-01-01T12:00:00+00:00:01.5",
                "2026-01-01T11:59:58.500000+00:00",
            ),
            (
                "2026-01-01T12:00:00+01:00:00.5",
                "2026-01-01T10:59:59.500000+00:00",
            ),
            ("0000-01-01T00:00Z", "ERR year 0 is out of range"),
            ("00000101T00Z", "ERR year 0 is out of range"),
            // A difference kept on purpose (README): CPython's week
            // arithmetic runs below year 1 and answers "month must be in 1..12".
            ("0000W217 23:00:45+000000", "ERR year 0 is out of range"),
            ("2026-13-01T00Z", "ERR month must be in 1..12"),
            ("2026-00-01T00Z", "ERR month must be in 1..12"),
            ("2026-02-30T00Z", "ERR day is out of range for month"),
            ("2026-01-01T25:00Z", "ERR hour must be in 0..23"),
            ("2026-01-01T23:60Z", "ERR minute must be in 0..59"),
            ("2026-01-01T23:59:60Z", "ERR second must be in 0..59"),
            (
                "2026-01-01T23:59:59.9999999Z",
                "2026-01-01T23:59:59.999999+00:00",
            ),
            (
                "2026-01-01T00:00+24:00",
                "ERR offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=1).",
            ),
            (
                "2026-01-01T00:00-24:00",
                "ERR offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=-1).",
            ),
            (
                "2026-01-01T00:00+24:00:01",
                "ERR offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=1, seconds=1).",
            ),
            (
                "2026-01-01T00:00-24:00:01",
                "ERR offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=-2, seconds=86399).",
            ),
            (
                "2026-01-01T00:00+99:99",
                "ERR offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=4, seconds=16740).",
            ),
            (
                "2026-01-01T00:00+23:60",
                "ERR offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=1).",
            ),
            (
                "2026-01-01T00:00-25:00:00.5",
                "ERR offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=-2, seconds=82799, microseconds=500000).",
            ),
            (
                "2026-13-40T25:00+24:00",
                "ERR offset must be a timedelta strictly between -timedelta(hours=24) and timedelta(hours=24), not datetime.timedelta(days=1).",
            ),
            ("2026-13-01T25:00Z", "ERR month must be in 1..12"),
            ("2026-02-30T25:00Z", "ERR day is out of range for month"),
            (
                "2026-001T00Z",
                "ERR Invalid isoformat string: '2026-001T00Z'",
            ),
            ("2026001T00Z", "ERR Invalid isoformat string: '2026001T00Z'"),
            ("9999-W52-7T00Z", "ERR year 10000 is out of range"),
            ("2026-W40-4T24:00Z", "ERR hour must be in 0..23"),
            ("2026-W40-4X00:00Z", "2026-10-01T00:00:00+00:00"),
            ("2026-10-01T00:00:00+00:00:60", "2026-09-30T23:59:00+00:00"),
            ("2026-10-01T00:00+01:60", "2026-09-30T22:00:00+00:00"),
            ("2026-10-01é12:00Z", "2026-10-01T12:00:00+00:00"),
            ("2026-10-01\u{a0}12:00Z", "2026-10-01T12:00:00+00:00"),
            (
                "2026-10-01T12:00Zé",
                "ERR Invalid isoformat string: '2026-10-01T12:00Zé'",
            ),
            ("20261001é12Z", "2026-10-01T12:00:00+00:00"),
            (
                "2026-W404T00Z",
                "ERR Invalid isoformat string: '2026-W404T00Z'",
            ),
            ("2026-W40-4-12Z", "2026-10-01T12:00:00+00:00"),
            ("2026-W40-412Z", "ERR hour must be in 0..23"),
            ("2026-W4", "ERR Invalid isoformat string: '2026-W4'"),
            (
                "2026W4011T00Z",
                "ERR Invalid isoformat string: '2026W4011T00Z'",
            ),
            ("2026-10-01T12:00:00.+00:00", "2026-10-01T12:00:00+00:00"),
            (
                "2026-10-01T1:00Z",
                "ERR Invalid isoformat string: '2026-10-01T1:00Z'",
            ),
            (
                "2026-10-01T12:00:00+01:00Z",
                "ERR Invalid isoformat string: '2026-10-01T12:00:00+01:00Z'",
            ),
            (
                "2026-10-01T12:00:00+01:00.5",
                "2026-10-01T10:59:59.500000+00:00",
            ),
            (
                "2026-10-01T12:0000Z",
                "ERR Invalid isoformat string: '2026-10-01T12:0000Z'",
            ),
            (
                "2026-10-01T1200:00Z",
                "ERR Invalid isoformat string: '2026-10-01T1200:00Z'",
            ),
            ("2026-10-01T12.5Z", "2026-10-01T12:00:00.500000+00:00"),
            ("2026-10-01T12:30.25+01", "2026-10-01T11:30:00.250000+00:00"),
            ("2026-10-01T120000123Z", "2026-10-01T12:00:00.123000+00:00"),
            ("2026-10-01T12:00:00:5Z", "2026-10-01T12:00:00.500000+00:00"),
            ("2026-10-01T", "ERR Invalid isoformat string: '2026-10-01T'"),
            (
                "2026-10-01T12:00:00.123x+00:00",
                "ERR Invalid isoformat string: '2026-10-01T12:00:00.123x+00:00'",
            ),
            ("2026W40é", "ERR Invalid isoformat string: '2026W40é'"),
            ("2026-W40é1Z", "ERR Invalid isoformat string: '2026-W40é1Z'"),
            (
                "2026-10-01T12:00:00Z ",
                "ERR Invalid isoformat string: '2026-10-01T12:00:00Z '",
            ),
            (
                "2026-10-01T12:00:00+01:00:00.000001",
                "2026-10-01T10:59:59.999999+00:00",
            ),
            ("2026-10-01T12:00:00-00:00", "2026-10-01T12:00:00+00:00"),
            (
                "2026-10-01",
                "ERR Document datetimes must be timezone-aware",
            ),
            (
                "2026-10-01T12:00:00",
                "ERR Document datetimes must be timezone-aware",
            ),
            ("nope", "ERR Invalid isoformat string: 'nope'"),
            ("", "ERR Invalid isoformat string: ''"),
            ("0001-01-01T00:00:00+01:00", "ERR date value out of range"),
            (
                "2026-10-01T12:00:00,25+00:00:30",
                "2026-10-01T11:59:30.250000+00:00",
            ),
            ("2000-02-29T23:59:59-23:59", "2000-03-01T23:58:59+00:00"),
            ("2026-10-01 10:00:00Z", "2026-10-01T10:00:00+00:00"),
            ("20261001T100000+0100", "2026-10-01T09:00:00+00:00"),
            ("2026-10-01T12+05", "2026-10-01T07:00:00+00:00"),
            (
                "2026-10-01T12:00:00.1234567+00:00",
                "2026-10-01T12:00:00.123456+00:00",
            ),
            (
                "2026-10-01T12:00:00.5+02:00",
                "2026-10-01T10:00:00.500000+00:00",
            ),
            ("1900-02-29T00:00Z", "ERR day is out of range for month"),
            ("2000-02-29T00:00Z", "2000-02-29T00:00:00+00:00"),
            (
                "2026-1-01T00:00Z",
                "ERR Invalid isoformat string: '2026-1-01T00:00Z'",
            ),
            (
                "2026-10-01T12:00:00+1:00",
                "ERR Invalid isoformat string: '2026-10-01T12:00:00+1:00'",
            ),
            (
                "2026-10-01T12:00:00+01:0",
                "ERR Invalid isoformat string: '2026-10-01T12:00:00+01:0'",
            ),
            ("2026-10-01T12:00:00+0130", "2026-10-01T10:30:00+00:00"),
            (
                "2026-10-01T12:00:00+013045.5",
                "2026-10-01T10:29:14.500000+00:00",
            ),
            ("2026-W01-1T00:00Z", "2025-12-29T00:00:00+00:00"),
            ("2027-W01-1T00:00Z", "2027-01-04T00:00:00+00:00"),
            (
                "2026-W52-7T23:59:59.999999-12:00",
                "2026-12-28T11:59:59.999999+00:00",
            ),
            (
                "2026éW40-4T00Z",
                "ERR Invalid isoformat string: '2026éW40-4T00Z'",
            ),
            ("20261001T12:00Z", "2026-10-01T12:00:00+00:00"),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter(|(text, want)| iso(text) != *want)
            .map(|(text, want)| format!("{text:?}: {} (Python: {want})", iso(text)))
            .collect();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
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
