//! Why a schedule's text is not a schedule: each error names the text and
//! says how to write it.

use crate::error_kind::ServeErrorKind;

/// How to write a schedule, added to the errors that do not say it otherwise.
pub(super) const HOW_TO: &str = "write a cron expression in UTC with 5 fields \
    (minute hour day-of-month month day-of-week, e.g. `30 2 * * *` or `0 9 * * 1-5`) \
    or 6 with seconds first, or a preset: `every 15 minutes`, `every 2 hours`, \
    `daily at 02:30`; leave it empty for manual runs only";

/// A schedule that cannot be parsed (see `Schedule::parse`).
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// Starts like a preset (`every ...`, `daily ...`) but is none.
    #[error("`{text}` is not a schedule: {HOW_TO}")]
    NotASchedule {
        /// The schedule as written (trimmed).
        text: String,
    },
    /// An `@` preset the `cron` crate does not know.
    #[error("`{text}`: {source}; {HOW_TO}")]
    Preset {
        /// The schedule as written.
        text: String,
        /// The `cron` crate's error.
        #[source]
        source: cron::error::Error,
    },
    /// Neither 5 nor 6 fields.
    #[error("`{text}` has {fields} field{}: {HOW_TO}", if *.fields == 1 { "" } else { "s" })]
    FieldCount {
        /// The schedule as written.
        text: String,
        /// Its fields.
        fields: usize,
    },
    /// The day-of-week field.
    #[error("`{text}`: {source}")]
    DayOfWeek {
        /// The schedule as written.
        text: String,
        /// What is wrong with the field.
        #[source]
        source: DayOfWeekError,
    },
    /// Not a cron expression the `cron` crate takes.
    #[error("`{text}` is not a valid cron expression ({source}); {HOW_TO}")]
    Cron {
        /// The schedule as written.
        text: String,
        /// The `cron` crate's error.
        #[source]
        source: cron::error::Error,
    },
    /// `every N <unit>` with another unit than minutes or hours.
    #[error(
        "`{text}`: the unit must be minutes or hours (e.g. `every 15 minutes`, `every 2 hours`)"
    )]
    EveryUnit {
        /// The schedule as written.
        text: String,
    },
    /// `every N ...` where N is not a whole number.
    #[error("`{text}`: `{n}` is not a whole number (e.g. `every 15 minutes`)")]
    EveryNotWhole {
        /// The schedule as written.
        text: String,
        /// The N as written.
        n: String,
    },
    /// `every N ...` with N outside 1..=10000.
    #[error("`{text}`: the number must be between 1 and 10000 (e.g. `every 15 minutes`)")]
    EveryOutOfRange {
        /// The schedule as written.
        text: String,
    },
    /// `daily at ...` without a time of day.
    #[error(
        "`{text}`: the time must be HH:MM or HH in UTC, hours 0-23 and minutes 0-59 \
         (e.g. `daily at 02:30`)"
    )]
    DailyTime {
        /// The schedule as written.
        text: String,
    },
}

impl ScheduleError {
    /// What kind of failure: always a setting to fix.
    pub fn kind(&self) -> ServeErrorKind {
        ServeErrorKind::Invalid
    }
}

/// What is wrong with a cron day-of-week field.
#[derive(Debug, thiserror::Error)]
pub enum DayOfWeekError {
    /// `a/b` with a step that is not a whole number above 0.
    #[error("day of week `{part}`: the step must be a whole number above 0")]
    Step {
        /// The field's part at fault.
        part: String,
    },
    /// A day number above 7.
    #[error(
        "day of week `{part}` is out of range: use 0-7 (0 or 7 = Sunday, 1 = Monday) or names SUN-SAT"
    )]
    OutOfRange {
        /// The field's part at fault.
        part: String,
    },
    /// A range that goes downwards.
    #[error("day of week `{part}`: the range must go upwards (e.g. `1-5` for Monday to Friday)")]
    Downwards {
        /// The field's part at fault.
        part: String,
    },
}
