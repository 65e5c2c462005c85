//! A duration setting of at least one second, written as a whole number and
//! a unit (`"2s"`, `"5m"`, `"1h"`): parsed and checked when the job file is
//! read, so a field of this type needs no rule of its own in `validate.rs`
//! and no resolving in `job.rs` (its [`Interval::get`] is the `Duration`).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::maintain::{parse_duration, DurationError};

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

/// A whole number of at least 1 and a unit (`0s` does not match).
pub(super) const INTERVAL_PATTERN: &str = r"^\s*0*[1-9][0-9]*[smhd]\s*$";

#[cfg(test)]
mod tests {
    use super::*;

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
