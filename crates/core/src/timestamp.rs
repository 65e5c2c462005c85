//! Timestamp strings to microseconds since the Unix epoch, by hand and fast.
//!
//! Accepted (the shape RFC 3339 and the common ISO 8601 profile share):
//!
//! ```text
//! YYYY-MM-DD ( 'T' | 't' | ' ' ) HH:MM:SS [ '.' fraction ] [ offset ]
//! offset := 'Z' | 'z' | ('+' | '-') HH [ [':'] MM ]
//! ```
//!
//! Without an offset the value is taken as UTC. The fraction may have any
//! number of digits (at least one); digits past the sixth (sub-microsecond)
//! are dropped, not rounded. Leap seconds (`:60`), a date alone, week dates
//! and ordinal dates are not timestamps here: such strings stay strings.

const MICROS_PER_SECOND: i64 = 1_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

/// Parses a timestamp string into microseconds since 1970-01-01T00:00:00Z.
///
/// Accepts `YYYY-MM-DD` then `T`, `t` or a space, then `HH:MM:SS`, an
/// optional `.fraction` (any number of digits; past microseconds they are
/// dropped, not rounded), and an optional offset: `Z`, `z`, `+HH:MM`,
/// `+HHMM` or `+HH` (or `-`). Without an offset the time is UTC. Returns
/// `None` for anything else: a date alone, a leap second (`:60`), an
/// impossible date (`2023-02-29`), trailing text.
pub fn parse_timestamp_micros(text: &str) -> Option<i64> {
    parse_timestamp_micros_bytes(text.as_bytes())
}

/// [`parse_timestamp_micros`] of the bytes of a string (only ASCII can
/// match, so the bytes need not be checked as UTF-8 first).
pub(crate) fn parse_timestamp_micros_bytes(b: &[u8]) -> Option<i64> {
    // "YYYY-MM-DDTHH:MM:SS" is 19 bytes; nothing shorter can match.
    if b.len() < 19 {
        return None;
    }
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    let second = digits(b, 17, 2)?;
    if b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }

    let mut i = 19;
    let mut fraction_micros = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 6 {
                fraction_micros = fraction_micros * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let count = i - start;
        if count == 0 {
            return None;
        }
        for _ in count..6 {
            fraction_micros *= 10;
        }
    }

    let offset_seconds = match b.get(i) {
        None => 0,
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let rest = &b[i + 1..];
            let (hours, minutes) = match rest.len() {
                2 => (digits(rest, 0, 2)?, 0),
                4 => (digits(rest, 0, 2)?, digits(rest, 2, 2)?),
                5 if rest[2] == b':' => (digits(rest, 0, 2)?, digits(rest, 3, 2)?),
                _ => return None,
            };
            if hours > 23 || minutes > 59 {
                return None;
            }
            let seconds = i64::from(hours * 3600 + minutes * 60);
            if sign == b'-' {
                -seconds
            } else {
                seconds
            }
        }
        Some(_) => return None,
    };

    let days = days_from_civil(i64::from(year), month, day);
    let seconds =
        days * SECONDS_PER_DAY + i64::from(hour * 3600 + minute * 60 + second) - offset_seconds;
    // Years 0000-9999 keep this far inside i64: no overflow possible.
    Some(seconds * MICROS_PER_SECOND + fraction_micros)
}

/// `count` ASCII digits at `at` as a number, or `None`.
#[inline(always)]
fn digits(b: &[u8], at: usize, count: usize) -> Option<u32> {
    let mut value = 0u32;
    let mut bad = false;
    for &c in b.get(at..at + count)? {
        let digit = c.wrapping_sub(b'0');
        bad |= digit > 9;
        value = value * 10 + u32::from(digit);
    }
    (!bad).then_some(value)
}

fn is_leap_year(year: u32) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
///
/// Counts in 400-year eras (146,097 days each) of years that start on
/// March 1st, so that the leap day is the last day of its year and the
/// month lengths from March on follow the (153 * m + 2) / 5 pattern.
#[inline]
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400; // 0..=399
    let month_from_march = i64::from((month + 9) % 12); // March = 0
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    // 719,468 days separate 0000-03-01 from 1970-01-01.
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::{days_from_civil, parse_timestamp_micros as parse};

    const SEED_T0: i64 = 1_793_287_324_000_000; // 2026-10-29T15:22:04Z

    #[test]
    fn seed_timestamp_with_offset() {
        assert_eq!(parse("2026-10-29T15:22:04+00:00"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29T15:22:04Z"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29T15:22:04z"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29t15:22:04Z"), Some(SEED_T0));
    }

    #[test]
    fn no_offset_is_utc_and_space_separator_is_accepted() {
        assert_eq!(parse("2026-10-29T15:22:04"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29 15:22:04"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29 15:22:04+00:00"), Some(SEED_T0));
    }

    #[test]
    fn offsets_move_the_instant() {
        let hour = 3_600_000_000;
        assert_eq!(parse("2026-10-29T16:22:04+01:00"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29T20:52:04+05:30"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29T20:52:04+0530"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29T10:22:04-05"), Some(SEED_T0));
        assert_eq!(parse("2026-10-29T15:22:04-00:00"), Some(SEED_T0));
        assert_eq!(
            parse("2026-10-29T15:22:04+23:00"),
            Some(SEED_T0 - 23 * hour)
        );
    }

    #[test]
    fn fractions_to_micros_truncating_past_six_digits() {
        assert_eq!(parse("2026-10-29T15:22:04.5Z"), Some(SEED_T0 + 500_000));
        assert_eq!(parse("2026-10-29T15:22:04.123Z"), Some(SEED_T0 + 123_000));
        assert_eq!(
            parse("2026-10-29T15:22:04.123456Z"),
            Some(SEED_T0 + 123_456)
        );
        assert_eq!(
            parse("2026-10-29T15:22:04.1234569Z"),
            Some(SEED_T0 + 123_456)
        );
        assert_eq!(
            parse("2026-10-29T15:22:04.123456789012+00:00"),
            Some(SEED_T0 + 123_456)
        );
        assert_eq!(parse("2026-10-29T15:22:04.000001"), Some(SEED_T0 + 1));
    }

    #[test]
    fn epoch_and_before() {
        assert_eq!(parse("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse("1970-01-01T00:00:00.000001Z"), Some(1));
        assert_eq!(parse("1969-12-31T23:59:59.999999Z"), Some(-1));
        assert_eq!(parse("1900-01-01T00:00:00Z"), Some(-2_208_988_800_000_000));
        assert_eq!(parse("0001-01-01T00:00:00Z"), Some(-62_135_596_800_000_000));
        assert_eq!(parse("9999-12-31T23:59:59Z"), Some(253_402_300_799_000_000));
        assert_eq!(parse("0000-01-01T00:00:00Z"), Some(-62_167_219_200_000_000));
    }

    #[test]
    fn calendar_matches_a_day_by_day_walk() {
        // Walk every day from 1600-01-01 to 2400-12-31 and check the count.
        let mut expected = days_from_civil(1600, 1, 1);
        for year in 1600..=2400u32 {
            for month in 1..=12 {
                for day in 1..=super::days_in_month(year, month) {
                    assert_eq!(days_from_civil(i64::from(year), month, day), expected);
                    expected += 1;
                }
            }
        }
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn leap_days() {
        assert!(parse("2024-02-29T00:00:00Z").is_some());
        assert!(parse("2000-02-29T00:00:00Z").is_some());
        assert_eq!(parse("2023-02-29T00:00:00Z"), None);
        assert_eq!(parse("1900-02-29T00:00:00Z"), None);
        assert_eq!(
            parse("2024-03-01T00:00:00Z").unwrap() - parse("2024-02-28T00:00:00Z").unwrap(),
            2 * 86_400_000_000
        );
    }

    #[test]
    fn not_timestamps() {
        for text in [
            "",
            "hello",
            "2026-10-29",
            "2026-10-29T15:22",
            "2026-10-29T15:22:04 ",
            " 2026-10-29T15:22:04",
            "2026-10-29T15:22:04.",
            "2026-10-29T15:22:04.Z",
            "2026-10-29T15:22:04+",
            "2026-10-29T15:22:04+1",
            "2026-10-29T15:22:04+01:0",
            "2026-10-29T15:22:04+01:000",
            "2026-10-29T15:22:04+24:00",
            "2026-10-29T15:22:04+01:60",
            "2026-10-29T15:22:04ZZ",
            "2026-10-29T15:22:04UTC",
            "2026-10-29X15:22:04",
            "2026/10/29T15:22:04",
            "2026-13-29T15:22:04",
            "2026-00-29T15:22:04",
            "2026-10-00T15:22:04",
            "2026-04-31T15:22:04",
            "2026-10-29T24:00:00",
            "2026-10-29T23:60:00",
            "2026-10-29T23:59:60Z",
            "20261029T152204Z",
            "+2026-10-29T15:22:04",
            "2026-1a-29T15:22:04",
            "２０２６-10-29T15:22:04",
        ] {
            assert_eq!(parse(text), None, "{text:?} parsed");
        }
    }
}
