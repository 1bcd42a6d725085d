//! Iceberg's temporal values (days, microseconds, nanoseconds from the epoch) as calendar
//! values, where a calendar holds them: `None` otherwise.
//!
//! iceberg-rust's own conversions `unwrap` there and so panic on a date or instant past
//! chrono's range (about ±262,000 years) or a time outside a day, and get every
//! `timestamptz` before 1970 with a fraction of a second wrong (a negative remainder cast
//! to `u32`). The scan's filters, its answers and the schema checks take their ranges
//! from here, so that they agree on what a value is. Pure.

use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta, Utc};

const MICROS_PER_SECOND: i64 = 1_000_000;

/// The date `days` after 1970-01-01.
pub fn date(days: i32) -> Option<NaiveDate> {
    TimeDelta::try_days(i64::from(days))
        .and_then(|delta| DateTime::UNIX_EPOCH.checked_add_signed(delta))
        .map(|at| at.date_naive())
}

/// The time of day `micros` after midnight (within the day).
pub fn time(micros: i64) -> Option<NaiveTime> {
    if !(0..86_400 * MICROS_PER_SECOND).contains(&micros) {
        return None;
    }
    NaiveTime::from_num_seconds_from_midnight_opt(
        (micros / MICROS_PER_SECOND) as u32,
        (micros % MICROS_PER_SECOND) as u32 * 1_000,
    )
}

/// The instant `micros` after the epoch.
pub fn instant(micros: i64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_micros(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_a_calendar_holds_and_those_it_does_not() {
        assert_eq!(date(-1).unwrap().to_string(), "1969-12-31");
        assert!(date(i32::MAX).is_none() && date(i32::MIN).is_none());
        assert_eq!(time(3_600_000_001).unwrap().to_string(), "01:00:00.000001");
        assert!(time(-1).is_none() && time(86_400 * MICROS_PER_SECOND).is_none());
        assert_eq!(
            instant(-500_000).unwrap().to_rfc3339(),
            "1969-12-31T23:59:59.500+00:00"
        );
        assert!(instant(i64::MAX).is_none() && instant(i64::MIN).is_none());
    }
}
