//! A stream's `partition_by`: Iceberg partition transforms written as
//! `day(_kafka_timestamp)`, `bucket(16, id)`, `identity(region)`,
//! `truncate(4, sku)`, `hour(created_at)`, `month(..)`, `year(..)`.
//!
//! Parsed and checked here (syntax, arguments, the metadata columns' types,
//! repeats); a payload column's type is known only when the table is
//! created, where [`PartitionTransform::accepts`] is asked again.

use std::fmt;
use std::str::FromStr;

use super::SettingErrorKind;
use crate::columns::{metadata_column_type, ColumnType};

/// An Iceberg partition transform (format/spec.md, "Partition Transforms").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionTransform {
    /// The value itself.
    Identity,
    /// A 32-bit Murmur3 hash of the value modulo N.
    Bucket(u32),
    /// The value truncated to width W (integers: down to a multiple of W;
    /// strings: the first W characters).
    Truncate(u32),
    /// Years since 1970.
    Year,
    /// Months since 1970-01.
    Month,
    /// Days since 1970-01-01.
    Day,
    /// Hours since 1970-01-01 00:00.
    Hour,
}

/// One `partition_by` entry: a transform of a column.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionField {
    /// The transform.
    pub transform: PartitionTransform,
    /// The source column (a metadata column or a payload field's column).
    pub column: String,
}

const TRANSFORMS: &str = "identity(col), bucket(N, col), truncate(W, col), year(col), \
                          month(col), day(col), hour(col)";

impl PartitionTransform {
    /// The transform's name in the job file.
    pub fn name(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Bucket(_) => "bucket",
            Self::Truncate(_) => "truncate",
            Self::Year => "year",
            Self::Month => "month",
            Self::Day => "day",
            Self::Hour => "hour",
        }
    }

    /// Whether it is one of the time transforms (at most one per column).
    pub fn is_time(self) -> bool {
        matches!(self, Self::Year | Self::Month | Self::Day | Self::Hour)
    }

    /// Whether the spec defines the transform for a column of type `ty`.
    pub fn accepts(self, ty: &ColumnType) -> bool {
        use ColumnType as T;
        let nested = matches!(ty, T::Struct(_) | T::List(_) | T::Map(_));
        match self {
            Self::Identity => !nested,
            Self::Bucket(_) => matches!(
                ty,
                T::Int
                    | T::Long
                    | T::Decimal { .. }
                    | T::Date
                    | T::Time
                    | T::Timestamp
                    | T::TimestampTz
                    | T::String
                    | T::Json
                    | T::Uuid
                    | T::Binary
            ),
            Self::Truncate(_) => matches!(
                ty,
                T::Int | T::Long | T::Decimal { .. } | T::String | T::Json | T::Binary
            ),
            Self::Year | Self::Month | Self::Day => {
                matches!(ty, T::Date | T::Timestamp | T::TimestampTz)
            }
            Self::Hour => matches!(ty, T::Timestamp | T::TimestampTz),
        }
    }

    /// The column types it takes, in words (for messages).
    pub fn accepted_types(self) -> &'static str {
        match self {
            Self::Identity => "any column but a struct, list or map",
            Self::Bucket(_) => {
                "int, long, decimal, date, time, timestamp, timestamptz, string, uuid or binary"
            }
            Self::Truncate(_) => "int, long, decimal, string or binary",
            Self::Year | Self::Month | Self::Day => "date, timestamp or timestamptz",
            Self::Hour => "timestamp or timestamptz",
        }
    }
}

impl PartitionField {
    /// The partition field's name, as the Java library names it:
    /// `region`, `id_bucket`, `sku_trunc`, `ts_day`, ...
    pub fn field_name(&self) -> String {
        let suffix = match self.transform {
            PartitionTransform::Identity => return self.column.clone(),
            PartitionTransform::Bucket(_) => "bucket",
            PartitionTransform::Truncate(_) => "trunc",
            t => t.name(),
        };
        format!("{}_{suffix}", self.column)
    }

    /// Why a column of type `ty` cannot be partitioned so, naming the fix.
    pub fn type_problem(&self, ty: &ColumnType) -> Option<String> {
        (!self.transform.accepts(ty)).then(|| {
            format!(
                "{self}: column \"{}\" is {ty:?}, and {} takes {}; partition it with another \
                 transform (identity or bucket fit most columns) or name another column",
                self.column,
                self.transform.name(),
                self.transform.accepted_types()
            )
        })
    }
}

impl fmt::Display for PartitionField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.transform {
            PartitionTransform::Bucket(n) | PartitionTransform::Truncate(n) => {
                write!(f, "{}({n}, {})", self.transform.name(), self.column)
            }
            t => write!(f, "{}({})", t.name(), self.column),
        }
    }
}

/// Why a `partition_by` entry does not parse; the message says how to
/// write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionFieldError {
    /// Not `name(...)`.
    #[error("\"{entry}\" is not a transform of a column; write one of {TRANSFORMS}")]
    NotATransform {
        /// The entry as written (trimmed).
        entry: String,
    },
    /// A one-column transform given other arguments.
    #[error("\"{entry}\": {name} takes one column, e.g. {name}(_kafka_timestamp)")]
    OneColumn {
        /// The entry as written (trimmed).
        entry: String,
        /// The transform's name, lower case.
        name: String,
    },
    /// `bucket` or `truncate` with a width that is not a positive `i32`.
    #[error(
        "\"{entry}\": {name}'s first argument must be a positive whole number, \
         e.g. {name}(16, {column})"
    )]
    BadWidth {
        /// The entry as written (trimmed).
        entry: String,
        /// The transform's name, lower case.
        name: String,
        /// The column as written.
        column: String,
    },
    /// `bucket` or `truncate` without a width and a column.
    #[error("\"{entry}\": {name} takes a number and a column, e.g. {name}(16, id)")]
    NumberAndColumn {
        /// The entry as written (trimmed).
        entry: String,
        /// The transform's name, lower case.
        name: String,
    },
    /// A transform name Iceberg does not have.
    #[error("\"{entry}\": unknown transform \"{name}\"; use one of {TRANSFORMS}")]
    UnknownTransform {
        /// The entry as written (trimmed).
        entry: String,
        /// The transform's name, lower case.
        name: String,
    },
}

impl PartitionFieldError {
    /// What kind of failure this is.
    pub fn kind(&self) -> SettingErrorKind {
        match self {
            Self::BadWidth { .. } => SettingErrorKind::OutOfRange,
            Self::UnknownTransform { .. } => SettingErrorKind::UnknownName,
            _ => SettingErrorKind::Syntax,
        }
    }
}

impl FromStr for PartitionField {
    type Err = PartitionFieldError;

    /// `name(column)` or `name(N, column)`; the message says how to write it.
    fn from_str(text: &str) -> Result<Self, PartitionFieldError> {
        let text = text.trim();
        let entry = || text.to_owned();
        let (name, args) = text
            .strip_suffix(')')
            .and_then(|t| t.split_once('('))
            .ok_or_else(|| PartitionFieldError::NotATransform { entry: entry() })?;
        let name = name.trim().to_ascii_lowercase();
        let args: Vec<&str> = args.split(',').map(str::trim).collect();
        let column = |args: &[&str]| match args {
            [column] if !column.is_empty() => Ok(column.to_string()),
            _ => Err(PartitionFieldError::OneColumn {
                entry: entry(),
                name: name.clone(),
            }),
        };
        let with_width = |args: &[&str]| match args {
            [n, column] if !column.is_empty() => match n.parse::<u32>() {
                Ok(n) if n > 0 && n <= i32::MAX as u32 => Ok((n, column.to_string())),
                _ => Err(PartitionFieldError::BadWidth {
                    entry: entry(),
                    name: name.clone(),
                    column: column.to_string(),
                }),
            },
            _ => Err(PartitionFieldError::NumberAndColumn {
                entry: entry(),
                name: name.clone(),
            }),
        };
        let (transform, column) = match name.as_str() {
            "identity" => (PartitionTransform::Identity, column(&args)?),
            "year" | "years" => (PartitionTransform::Year, column(&args)?),
            "month" | "months" => (PartitionTransform::Month, column(&args)?),
            "day" | "days" => (PartitionTransform::Day, column(&args)?),
            "hour" | "hours" => (PartitionTransform::Hour, column(&args)?),
            "bucket" => {
                let (n, column) = with_width(&args)?;
                (PartitionTransform::Bucket(n), column)
            }
            "truncate" => {
                let (w, column) = with_width(&args)?;
                (PartitionTransform::Truncate(w), column)
            }
            other => {
                return Err(PartitionFieldError::UnknownTransform {
                    entry: entry(),
                    name: other.to_owned(),
                })
            }
        };
        Ok(Self { transform, column })
    }
}

/// Parses a stream's `partition_by` and checks what the job file alone can
/// tell: every entry's syntax, the metadata columns' types, a field given
/// twice, two time transforms of one column, and (when the stream keeps
/// only some `columns`) payload columns it drops. One message per problem.
pub fn parse_partition_by(
    entries: &[String],
    kept_columns: Option<&[String]>,
) -> Result<Vec<PartitionField>, Vec<String>> {
    let mut fields: Vec<PartitionField> = Vec::new();
    let mut problems = Vec::new();
    for entry in entries {
        let field = match entry.parse::<PartitionField>() {
            Ok(field) => field,
            Err(problem) => {
                problems.push(problem.to_string());
                continue;
            }
        };
        match metadata_column_type(&field.column) {
            Some(ty) => problems.extend(field.type_problem(&ty)),
            None => {
                if kept_columns.is_some_and(|kept| !kept.contains(&field.column)) {
                    problems.push(format!(
                        "{field}: column \"{}\" is not among the stream's columns; add it to \
                         columns or partition by a kept column",
                        field.column
                    ));
                }
            }
        }
        if let Some(same) = fields.iter().find(|f| {
            f.column == field.column
                && (f.transform == field.transform
                    || (f.transform.is_time() && field.transform.is_time())
                    || f.field_name() == field.field_name())
        }) {
            problems.push(format!(
                "{field} repeats {same} (one field per transform and column, one time \
                 transform per column); remove one"
            ));
            continue;
        }
        fields.push(field);
    }
    if problems.is_empty() {
        Ok(fields)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(entries: &[&str]) -> Result<Vec<PartitionField>, Vec<String>> {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        parse_partition_by(&entries, None)
    }

    #[test]
    fn every_transform_parses_and_prints_back() {
        let entries = [
            "day(_kafka_timestamp)",
            "bucket(16, id)",
            "identity(region)",
            "truncate(4, sku)",
            "hour(created_at)",
            "month(shipped)",
            "year(born)",
        ];
        let fields = parse(&entries).unwrap();
        assert_eq!(
            fields[1],
            PartitionField {
                transform: PartitionTransform::Bucket(16),
                column: "id".into()
            }
        );
        let printed: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        assert_eq!(printed, entries);
        let names: Vec<String> = fields.iter().map(|f| f.field_name()).collect();
        assert_eq!(
            names,
            [
                "_kafka_timestamp_day",
                "id_bucket",
                "region",
                "sku_trunc",
                "created_at_hour",
                "shipped_month",
                "born_year"
            ]
        );
        // Spacing and case are forgiven.
        assert_eq!(
            " Bucket( 8 ,id ) ".parse::<PartitionField>().unwrap(),
            PartitionField {
                transform: PartitionTransform::Bucket(8),
                column: "id".into()
            }
        );
    }

    #[test]
    fn bad_entries_say_how_to_write_them() {
        let cases = [
            (
                "week(ts)",
                "unknown transform \"week\"; use one of identity(col)",
            ),
            ("day", "is not a transform of a column"),
            (
                "bucket(id)",
                "takes a number and a column, e.g. bucket(16, id)",
            ),
            ("bucket(0, id)", "must be a positive whole number"),
            ("truncate(x, sku)", "must be a positive whole number"),
            ("day(a, b)", "takes one column"),
            ("identity()", "takes one column"),
        ];
        for (entry, expected) in cases {
            let problems = parse(&[entry]).unwrap_err();
            assert!(problems[0].contains(expected), "{entry}: {problems:?}");
        }
    }

    #[test]
    fn metadata_column_types_and_repeats_are_checked() {
        let problems = parse(&["day(_kafka_partition)"]).unwrap_err();
        assert!(
            problems[0].contains("column \"_kafka_partition\" is Int")
                && problems[0].contains("date, timestamp or timestamptz"),
            "{problems:?}"
        );
        assert!(parse(&["hour(_kafka_timestamp)", "identity(_kafka_partition)"]).is_ok());
        let problems = parse(&["day(ts)", "hour(ts)"]).unwrap_err();
        assert!(
            problems[0].contains("hour(ts) repeats day(ts)"),
            "{problems:?}"
        );
        let problems = parse(&["bucket(4, id)", "bucket(8, id)"]).unwrap_err();
        assert!(problems[0].contains("repeats"), "{problems:?}");
        // Different transforms of one column are fine.
        assert!(parse(&["bucket(4, id)", "truncate(10, id)"]).is_ok());
    }

    #[test]
    fn a_dropped_payload_column_is_named() {
        let kept = vec!["id".to_string()];
        let entries = vec!["identity(region)".to_string(), "bucket(4, id)".to_string()];
        let problems = parse_partition_by(&entries, Some(&kept)).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("\"region\" is not among the stream's columns"));
    }

    /// The job file's problems about `partition_by`, as "field: message".
    fn job_problems(partition_by: &str) -> Vec<String> {
        let text = format!(
            "name = \"j\"\n[source]\nbootstrap_servers = \"k:9092\"\n[[streams]]\n\
             topic = \"orders\"\npartition_by = {partition_by}\n"
        );
        match crate::config::JobConfig::from_toml_str(&text, |_| None) {
            Err(crate::config::ConfigError::Invalid { problems, .. }) => {
                problems.iter().map(ToString::to_string).collect()
            }
            Err(other) => panic!("{other}"),
            Ok(_) => Vec::new(),
        }
    }

    #[test]
    fn the_job_file_reports_each_bad_entry_on_its_field() {
        for (entries, expected) in [
            ("[\"week(_kafka_timestamp)\"]", "unknown transform \"week\""),
            ("[\"bucket(id)\"]", "e.g. bucket(16, id)"),
            (
                "[\"hour(_kafka_offset)\"]",
                "\"_kafka_offset\" is Long, and hour takes timestamp or timestamptz",
            ),
        ] {
            let problems = job_problems(entries);
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].starts_with("streams[0].partition_by: ")
                    && problems[0].contains(expected),
                "{problems:?}"
            );
        }
        assert!(job_problems("[\"day(_kafka_timestamp)\", \"bucket(16, id)\"]").is_empty());
    }

    #[test]
    fn accepted_types_follow_the_spec() {
        use ColumnType as T;
        assert!(PartitionTransform::Bucket(4).accepts(&T::String));
        assert!(!PartitionTransform::Bucket(4).accepts(&T::Double));
        assert!(!PartitionTransform::Truncate(4).accepts(&T::TimestampTz));
        assert!(PartitionTransform::Day.accepts(&T::Date));
        assert!(!PartitionTransform::Hour.accepts(&T::Date));
        assert!(PartitionTransform::Identity.accepts(&T::Boolean));
    }
}
