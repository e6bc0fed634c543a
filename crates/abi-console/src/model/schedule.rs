//! The next ticks of a job's schedules, as the broker will fire them: a cron
//! trigger's expression (seconds first, the broker's message schedules' form)
//! in its time zone, an `every` trigger's interval counted from when its
//! schedule message was stored. Pure: the clock and the stored time are
//! arguments.

use std::str::FromStr as _;

use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

/// How many next ticks a view shows.
pub const TICKS_SHOWN: usize = 3;

/// Why a schedule's next ticks cannot be told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The expression does not parse.
    #[error("cannot read the cron expression {0:?}")]
    Cron(String),
    /// The time zone is unknown to this machine's time zone database.
    #[error("unknown time zone {0:?}")]
    TimeZone(String),
    /// The interval does not parse.
    #[error("cannot read the interval {0:?}")]
    Every(String),
    /// The schedule message has not been stored yet (an `every` schedule
    /// counts from it).
    #[error("the schedule is not published")]
    NotPublished,
}

/// The next `count` ticks after `now` of the cron `expression` in `zone`
/// (empty: UTC).
///
/// # Errors
///
/// A bad expression or an unknown zone.
pub fn cron_ticks(
    expression: &str,
    zone: &str,
    now: Timestamp,
    count: usize,
) -> Result<Vec<Timestamp>, ScheduleError> {
    let tz = if zone.is_empty() {
        TimeZone::UTC
    } else {
        TimeZone::get(zone).map_err(|_| ScheduleError::TimeZone(zone.to_owned()))?
    };
    let schedule = jiff_cron::Schedule::from_str(&broker_to_cron(expression))
        .map_err(|_| ScheduleError::Cron(expression.to_owned()))?;
    let after = Zoned::new(now, tz);
    Ok(schedule
        .after(after)
        .take(count)
        .map(|z| z.timestamp())
        .collect())
}

/// The next `count` ticks after `now` of an `every` trigger of `interval`
/// (`30s`, `1h`, `1h30m`) whose schedule message was stored at `stored`.
///
/// # Errors
///
/// A bad interval, or no stored message.
pub fn every_ticks(
    interval: &str,
    stored: Option<Timestamp>,
    now: Timestamp,
    count: usize,
) -> Result<Vec<Timestamp>, ScheduleError> {
    let every =
        parse_interval(interval).ok_or_else(|| ScheduleError::Every(interval.to_owned()))?;
    let stored = stored.ok_or(ScheduleError::NotPublished)?;
    let step = i128::from(every);
    let elapsed = (now.as_nanosecond() - stored.as_nanosecond()).max(0);
    let next = elapsed / step + 1;
    (0..count)
        .map(|k| {
            let at = stored.as_nanosecond() + (next + k as i128) * step;
            Timestamp::from_nanosecond(at).map_err(|_| ScheduleError::Every(interval.to_owned()))
        })
        .collect()
}

/// An interval in nanoseconds: the trigger's Go duration (`90s`, `1h30m`),
/// read as the SDK reads it; positive.
fn parse_interval(text: &str) -> Option<i64> {
    let seconds = abi_sdk::jobs::go_duration_seconds(text.trim()).ok()?;
    let nanos = (seconds * 1e9).round();
    (nanos >= 1.0 && nanos < i64::MAX as f64).then_some(nanos as i64)
}

/// The broker's cron (seconds first; day of week 0-6 from Sunday, or names;
/// `@annually`, `@midnight`) in the form `jiff_cron` reads (day of week 1-7
/// from Sunday).
fn broker_to_cron(expression: &str) -> String {
    let expression = expression.trim();
    match expression {
        "@annually" => return "@yearly".to_owned(),
        "@midnight" => return "@daily".to_owned(),
        _ if expression.starts_with('@') => return expression.to_owned(),
        _ => {}
    }
    let mut fields: Vec<String> = expression.split_whitespace().map(str::to_owned).collect();
    if let Some(dow) = fields.get_mut(5) {
        *dow = shift_weekdays(dow);
    }
    fields.join(" ")
}

/// Every number of a day-of-week field plus one, except a step's (`1-5/2`
/// becomes `2-6/2`); names and wildcards as they are.
fn shift_weekdays(field: &str) -> String {
    field
        .split(',')
        .map(|part| {
            let (range, step) = match part.split_once('/') {
                Some((range, step)) => (range, Some(step)),
                None => (part, None),
            };
            let shifted: Vec<String> = range
                .split('-')
                .map(|bound| match bound.parse::<u8>() {
                    // Sunday may be written 7 as well as 0.
                    Ok(7) => "1".to_owned(),
                    Ok(day) => (day + 1).to_string(),
                    Err(_) => bound.to_owned(),
                })
                .collect();
            let shifted = shifted.join("-");
            match step {
                Some(step) => format!("{shifted}/{step}"),
                None => shifted,
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn texts(ticks: &[Timestamp]) -> Vec<String> {
        ticks.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn cron_ticks_follow_the_broker_form_in_the_zone() {
        // Saturday 2026-12-05.
        let now = at("2026-12-05T10:00:00Z");
        type Case<'a> = (&'a str, &'a str, [&'a str; 2]);
        let cases: [Case; 5] = [
            (
                "0 0 6 * * *",
                "",
                ["2026-12-06T06:00:00Z", "2026-12-07T06:00:00Z"],
            ),
            // 06:00 in Paris is 05:00 UTC in winter.
            (
                "0 0 6 * * *",
                "Europe/Paris",
                ["2026-12-06T05:00:00Z", "2026-12-07T05:00:00Z"],
            ),
            // Day 1 is Monday for the broker.
            (
                "0 30 9 * * 1",
                "UTC",
                ["2026-12-07T09:30:00Z", "2026-12-14T09:30:00Z"],
            ),
            (
                "0 0 12 * * 0,6",
                "",
                ["2026-12-05T12:00:00Z", "2026-12-06T12:00:00Z"],
            ),
            (
                "@daily",
                "",
                ["2026-12-06T00:00:00Z", "2026-12-07T00:00:00Z"],
            ),
        ];
        for (expression, zone, want) in cases {
            let got = cron_ticks(expression, zone, now, 2).unwrap();
            assert_eq!(texts(&got), want, "{expression} in {zone:?}");
        }
        assert_eq!(
            cron_ticks("0 0 6 * *", "", now, 1).unwrap_err(),
            ScheduleError::Cron("0 0 6 * *".into())
        );
        assert_eq!(
            cron_ticks("@daily", "Mars/Olympus", now, 1).unwrap_err(),
            ScheduleError::TimeZone("Mars/Olympus".into())
        );
    }

    #[test]
    fn every_ticks_count_from_the_stored_schedule() {
        let stored = at("2026-12-05T10:00:00Z");
        let now = at("2026-12-05T10:02:30Z");
        let got = every_ticks("1m", Some(stored), now, 2).unwrap();
        assert_eq!(
            texts(&got),
            ["2026-12-05T10:03:00Z", "2026-12-05T10:04:00Z"]
        );
        let got = every_ticks("1h30m", Some(stored), now, 1).unwrap();
        assert_eq!(texts(&got), ["2026-12-05T11:30:00Z"]);
        assert_eq!(
            every_ticks("1m", None, now, 1).unwrap_err(),
            ScheduleError::NotPublished
        );
        assert_eq!(
            every_ticks("soon", Some(stored), now, 1).unwrap_err(),
            ScheduleError::Every("soon".into())
        );
    }

    #[test]
    fn weekdays_shift_to_the_parser_form() {
        for (broker, parser) in [
            ("*", "*"),
            ("0", "1"),
            ("7", "1"),
            ("1-5", "2-6"),
            ("1-5/2", "2-6/2"),
            ("0,6", "1,7"),
            ("MON-FRI", "MON-FRI"),
            ("?", "?"),
        ] {
            assert_eq!(shift_weekdays(broker), parser, "{broker}");
        }
    }
}
