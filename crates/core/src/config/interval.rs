//! Durations in the job file, written as a whole number and a unit
//! (`"90s"`, `"30m"`, `"12h"`, `"7d"`): [`parse_duration`], and
//! [`Interval`], a duration setting of at least one second that is parsed
//! and checked when the job file is read, so a field of this type needs no
//! rule of its own in `validate.rs` (its [`Interval::get`] is the
//! `Duration`).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::SettingErrorKind;

/// A positive duration from the job file, kept with the text it was
/// written as (which is what the job file, an export and the forms show).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    text: String,
    value: Duration,
}

impl Interval {
    /// Parses `text` (`"2s"`): a whole number and a unit, `s`, `m`, `h` or
    /// `d`, of at least one second. The error says how to write it.
    pub fn parse(text: &str) -> Result<Self, IntervalError> {
        let value = parse_duration(text)?;
        if value.is_zero() {
            return Err(IntervalError::Zero {
                text: text.trim().to_owned(),
            });
        }
        Ok(Self {
            text: text.trim().to_owned(),
            value,
        })
    }

    /// The duration.
    pub fn get(&self) -> Duration {
        self.value
    }

    /// A default written in the code: panics on a text that does not parse
    /// (a unit test parses every default).
    pub(super) fn default_of(text: &str) -> Self {
        Self::parse(text).unwrap_or_else(|e| panic!("the default interval {text:?}: {e}"))
    }
}

/// Why an interval setting does not parse; the message says how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntervalError {
    /// Not a whole number and a unit.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// `"0s"`: an interval is at least a second.
    #[error("{text:?} is no interval; write at least \"1s\"")]
    Zero {
        /// The value as written (trimmed).
        text: String,
    },
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Serialize for Interval {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl JsonSchema for Interval {
    fn schema_name() -> Cow<'static, str> {
        "Interval".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": INTERVAL_PATTERN,
            "x-type": "duration",
        })
    }
}

/// Why a duration setting (`"7d"`) does not parse; the message says how
/// to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Digits only, e.g. `"7"`.
    #[error("{text:?} has no unit; write e.g. \"30m\", \"12h\" or \"7d\"")]
    NoUnit {
        /// The value as written (trimmed).
        text: String,
    },
    /// No whole number before the unit, e.g. `"d"`.
    #[error("{text:?} does not start with a whole number, e.g. \"7d\"")]
    NotANumber {
        /// The value as written (trimmed).
        text: String,
        /// Why the digits are no number.
        #[source]
        source: std::num::ParseIntError,
    },
    /// A unit other than `s`, `m`, `h`, `d`.
    #[error("{text:?} has the unit {unit:?}; use s, m, h or d (e.g. \"7d\")")]
    UnknownUnit {
        /// The value as written (trimmed).
        text: String,
        /// The unit as written.
        unit: String,
    },
}

impl DurationError {
    /// What kind of failure this is.
    pub fn kind(&self) -> SettingErrorKind {
        match self {
            Self::NoUnit { .. } | Self::NotANumber { .. } => SettingErrorKind::Syntax,
            Self::UnknownUnit { .. } => SettingErrorKind::UnknownName,
        }
    }
}

/// Parses a duration written as a whole number and a unit: `s`, `m`, `h`
/// or `d` (`"0s"` is allowed).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| DurationError::NoUnit {
            text: text.to_owned(),
        })?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|source| DurationError::NotANumber {
        text: text.to_owned(),
        source,
    })?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => {
            return Err(DurationError::UnknownUnit {
                text: text.to_owned(),
                unit: unit.to_owned(),
            })
        }
    };
    Ok(Duration::from_secs(number.saturating_mul(seconds)))
}

/// A whole number of at least 1 and a unit (`0s` does not match).
pub(super) const INTERVAL_PATTERN: &str = r"^\s*0*[1-9][0-9]*[smhd]\s*$";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_their_unit() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse_duration(" 12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("7")
            .unwrap_err()
            .to_string()
            .contains("no unit"));
        assert!(parse_duration("7w")
            .unwrap_err()
            .to_string()
            .contains("\"w\""));
        assert!(parse_duration("d").is_err());
    }

    #[test]
    fn intervals_parse_with_their_unit_and_keep_their_text() {
        let two = Interval::parse(" 2s").unwrap();
        assert_eq!(two.get(), Duration::from_secs(2));
        assert_eq!(two.to_string(), "2s");
        assert_eq!(
            Interval::parse("5m").unwrap().get(),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn zero_and_unitless_intervals_are_refused_with_the_fix() {
        let zero = Interval::parse("0s").unwrap_err().to_string();
        assert!(zero.contains("at least \"1s\""), "{zero}");
        let bare = Interval::parse("5").unwrap_err().to_string();
        assert!(bare.contains("no unit"), "{bare}");
    }

    #[test]
    fn the_schema_pattern_accepts_what_parse_accepts() {
        let pattern = regex::Regex::new(INTERVAL_PATTERN).unwrap();
        for text in ["1s", "2s", "10m", "007h", " 3d "] {
            assert!(
                pattern.is_match(text) && Interval::parse(text).is_ok(),
                "{text}"
            );
        }
        for text in ["0s", "00s", "5", "s", "2w"] {
            assert!(
                !pattern.is_match(text) && Interval::parse(text).is_err(),
                "{text}"
            );
        }
    }
}
