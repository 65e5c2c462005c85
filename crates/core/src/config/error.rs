//! What can be wrong with a job file, in words that say how to fix it.

use std::fmt;

/// One problem found in a job file: the field it concerns and what to do.
///
/// Fields are dotted paths as in the file, arrays indexed from 0:
/// `source.sasl_password`, `streams[1].dedup_keys`. Messages never quote a
/// secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The field, e.g. `destination.credential`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl ConfigProblem {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// What kind of failure an error about one setting's value is
/// ([`DurationError`](super::DurationError),
/// [`SortKeyError`](super::SortKeyError), ...). None is retryable: the job
/// file must change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingErrorKind {
    /// The value is not written the way the setting takes it.
    Syntax,
    /// A name (a unit, a transform, an engine) the setting does not know.
    UnknownName,
    /// A number out of the setting's range.
    OutOfRange,
    /// The file the value names cannot be read.
    Unreadable,
    /// The value contradicts other settings (an engine that cannot read
    /// the delete format, a format version the delete format cannot use).
    Conflict,
}

/// Why a job file could not be loaded. Every variant names the file
/// (`<inline>` for [`JobConfig::from_toml_str`](super::JobConfig::from_toml_str)).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read job file {file}: {source}")]
    Read {
        /// The path as given.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a value does not fit the job file's
    /// shape (wrong type, unknown variant, missing field). TOML stops at
    /// the first such error; the message never quotes a secret.
    #[error("{file}: {}{message}", location(*.line, *.column))]
    Parse {
        /// The path as given.
        file: String,
        /// 1-based line of the error, when known.
        line: Option<usize>,
        /// 1-based column of the error, when known.
        column: Option<usize>,
        /// What is wrong; names the key for an unknown key.
        message: String,
    },
    /// The file parsed but has problems (unknown keys, missing environment
    /// variables, invalid values, contradictions); all of them, at once.
    #[error("{file} is not a valid job file ({} problem{}):\n{}",
        .problems.len(),
        if .problems.len() == 1 { "" } else { "s" },
        list(.problems))]
    Invalid {
        /// The path as given.
        file: String,
        /// Every problem found.
        problems: Vec<ConfigProblem>,
    },
}

impl ConfigError {
    /// The problems of an [`ConfigError::Invalid`]; empty for the others.
    pub fn problems(&self) -> &[ConfigProblem] {
        match self {
            Self::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!("line {l}, column {c}: "),
        (Some(l), None) => format!("line {l}: "),
        _ => String::new(),
    }
}

fn list(problems: &[ConfigProblem]) -> String {
    problems
        .iter()
        .map(|p| format!("  - {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}
