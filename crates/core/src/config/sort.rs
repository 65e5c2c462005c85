//! A stream's `sort_by`: the sort order a new table is created with, and
//! the order rows are written in within each data file. Entries are
//! `column`, `column asc`, `column desc`, optionally followed by
//! `nulls first` / `nulls last` (unset: Iceberg's default, nulls first
//! when ascending, nulls last when descending).
//!
//! Parsed and checked here (syntax, repeats, a column the stream's
//! `columns` drops, a metadata column that cannot be sorted); a payload
//! column's type is known only when the table is created, where
//! [`sortable`] is asked again.

use std::fmt;
use std::str::FromStr;

use super::SettingErrorKind;
use crate::columns::{metadata_column_type, ColumnType};

/// One `sort_by` entry: a column, its direction and where nulls go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SortKey {
    /// The column (a metadata column or a payload field's column).
    pub column: String,
    /// Largest first.
    pub descending: bool,
    /// Nulls before the values.
    pub nulls_first: bool,
}

impl SortKey {
    /// Why a column of type `ty` cannot be a sort key, naming the fix.
    pub fn type_problem(&self, ty: &ColumnType) -> Option<String> {
        (!sortable(ty)).then(|| {
            format!(
                "\"{self}\": column \"{}\" is {ty:?}, which cannot be sorted (struct, list and \
                 map columns cannot); sort by a column of a plain type",
                self.column
            )
        })
    }
}

/// Whether rows can be ordered by a column of type `ty` (any but struct,
/// list, map).
pub fn sortable(ty: &ColumnType) -> bool {
    !ty.is_nested()
}

impl fmt::Display for SortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let direction = if self.descending { "desc" } else { "asc" };
        let nulls = if self.nulls_first { "first" } else { "last" };
        write!(f, "{} {direction} nulls {nulls}", self.column)
    }
}

const HOW: &str = "write \"column\", \"column asc\" or \"column desc\", optionally followed \
                   by \"nulls first\" or \"nulls last\"";

/// Why a `sort_by` entry does not parse; the message says how to write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SortKeyError {
    /// An empty entry.
    #[error("an empty entry; {HOW}")]
    Empty,
    /// Words that are not `column [asc|desc] [nulls first|nulls last]`.
    #[error("\"{entry}\" is not a sort key; {HOW}")]
    NotASortKey {
        /// The entry as written (trimmed).
        entry: String,
    },
}

impl SortKeyError {
    /// What kind of failure this is.
    pub fn kind(&self) -> SettingErrorKind {
        SettingErrorKind::Syntax
    }
}

impl FromStr for SortKey {
    type Err = SortKeyError;

    /// `column [asc|desc] [nulls first|nulls last]`; the message says how
    /// to write it.
    fn from_str(text: &str) -> Result<Self, SortKeyError> {
        let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        let lower: Vec<&str> = lower.iter().map(String::as_str).collect();
        let Some(column) = words.first().cloned() else {
            return Err(SortKeyError::Empty);
        };
        let (descending, rest) = match &lower[1..] {
            ["desc", rest @ ..] => (true, rest),
            ["asc", rest @ ..] => (false, rest),
            rest => (false, rest),
        };
        let nulls_first = match rest {
            [] => !descending,
            ["nulls", "first"] => true,
            ["nulls", "last"] => false,
            _ => {
                return Err(SortKeyError::NotASortKey {
                    entry: text.trim().to_owned(),
                })
            }
        };
        Ok(Self {
            column,
            descending,
            nulls_first,
        })
    }
}

/// Parses a stream's `sort_by` and checks what the job file alone can
/// tell: every entry's syntax, a column given twice, a metadata column's
/// type, and (when the stream keeps only some `columns`) payload columns
/// it drops. One message per problem.
pub fn parse_sort_by(
    entries: &[String],
    kept_columns: Option<&[String]>,
) -> Result<Vec<SortKey>, Vec<String>> {
    let mut keys: Vec<SortKey> = Vec::new();
    let mut problems = Vec::new();
    for entry in entries {
        let key = match entry.parse::<SortKey>() {
            Ok(key) => key,
            Err(problem) => {
                problems.push(problem.to_string());
                continue;
            }
        };
        match metadata_column_type(&key.column) {
            Some(ty) => problems.extend(key.type_problem(&ty)),
            None if kept_columns.is_some_and(|kept| !kept.contains(&key.column)) => {
                problems.push(format!(
                    "\"{entry}\": column \"{}\" is not among the stream's columns; add it to \
                     columns or sort by a kept column",
                    key.column
                ));
            }
            None => {}
        }
        if keys.iter().any(|k| k.column == key.column) {
            problems.push(format!(
                "\"{entry}\": column \"{}\" is given twice; keep one entry per column",
                key.column
            ));
            continue;
        }
        keys.push(key);
    }
    if problems.is_empty() {
        Ok(keys)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(entries: &[&str]) -> Result<Vec<SortKey>, Vec<String>> {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        parse_sort_by(&entries, None)
    }

    #[test]
    fn directions_and_null_orders_default_as_iceberg_does() {
        let keys = parse(&[
            "id",
            "created_at desc",
            "region ASC nulls last",
            "sku desc NULLS first",
        ])
        .unwrap();
        let printed: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(
            printed,
            [
                "id asc nulls first",
                "created_at desc nulls last",
                "region asc nulls last",
                "sku desc nulls first"
            ]
        );
        // Printed keys parse back to themselves.
        for key in &keys {
            assert_eq!(&key.to_string().parse::<SortKey>().unwrap(), key);
        }
    }

    #[test]
    fn bad_entries_say_how_to_write_them() {
        for entry in [
            "id descending",
            "id desc nulls",
            "id nulls middle",
            "",
            "a b",
        ] {
            let problems = parse(&[entry]).unwrap_err();
            assert!(
                problems[0].contains("write \"column\", \"column asc\" or \"column desc\""),
                "{entry}: {problems:?}"
            );
        }
    }

    #[test]
    fn repeats_dropped_columns_and_nested_types_are_refused() {
        let problems = parse(&["id", "id desc"]).unwrap_err();
        assert!(problems[0].contains("given twice"), "{problems:?}");
        let kept = vec!["id".to_string()];
        let entries = vec!["region".to_string(), "id".to_string()];
        let problems = parse_sort_by(&entries, Some(&kept)).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].contains("\"region\" is not among the stream's columns"));
        // Metadata columns are always there, whatever `columns` keeps.
        let entries = vec!["_kafka_timestamp desc".to_string()];
        assert!(parse_sort_by(&entries, Some(&kept)).is_ok());
        let key: SortKey = "tags".parse().unwrap();
        let problem = key
            .type_problem(&ColumnType::Struct(Vec::new().into()))
            .unwrap();
        assert!(problem.contains("cannot be sorted"), "{problem}");
        assert!(key.type_problem(&ColumnType::TimestampTz).is_none());
    }
}
