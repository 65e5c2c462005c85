//! `[[streams]]`: per-topic settings, and what a topic without an entry gets.

use serde::{Deserialize, Deserializer};

use super::empty_as_none;
use crate::registry::ValueFormat;

/// How messages become rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamMode {
    /// Every message is a new row.
    Append,
    /// One row per dedup key: the latest message wins.
    Upsert,
}

impl StreamMode {
    /// The name the job file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Append => "append",
            Self::Upsert => "upsert",
        }
    }
}

impl Default for StreamMode {
    /// `[[streams]] mode`, and the mode of a matching topic without an
    /// entry.
    fn default() -> Self {
        Self::Append
    }
}

/// How an upsert retires the old row of a key. Which one a table gets is
/// decided by [`resolve_delete_format`](super::resolve_delete_format) from
/// `target_engines` (see the matrix in `engines.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeleteFormat {
    /// Position delete files; format v2 only (the Iceberg spec forbids
    /// adding them to v3 tables).
    Position,
    /// Deletion vectors; format v3 only.
    Dv,
    /// Equality delete files on the dedup key; format v2 or v3.
    Equality,
}

impl DeleteFormat {
    /// The name the job file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Position => "position",
            Self::Dv => "dv",
            Self::Equality => "equality",
        }
    }

    /// The format in words, for messages.
    pub fn label(self) -> &'static str {
        match self {
            Self::Position => "position deletes",
            Self::Dv => "deletion vectors",
            Self::Equality => "equality deletes",
        }
    }
}

/// What to do with a message that cannot become a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnInvalid {
    /// Stop the sync for that table; nothing of it is committed.
    Fail,
    /// Write the record to the table `<table>__dlq` in the same commit.
    Dlq,
    /// Count and log it, and go on.
    Skip,
}

impl OnInvalid {
    /// The name the job file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "fail",
            Self::Dlq => "dlq",
            Self::Skip => "skip",
        }
    }
}

impl Default for OnInvalid {
    /// `[[streams]] on_invalid`.
    fn default() -> Self {
        Self::Fail
    }
}

/// One `[[streams]]` entry, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// The exact topic name this entry configures.
    pub topic: String,
    /// `append` (every message a row) or `upsert` (one row per key).
    #[serde(default)]
    pub mode: StreamMode,
    /// Upsert: the key. Payload field names, or `_kafka_key`; several make a
    /// composite key, and `_kafka_key` may be combined with payload fields.
    #[serde(default)]
    pub dedup_keys: Vec<String>,
    /// Upsert: `position`, `dv` or `equality`. Unset: resolved from
    /// `target_engines`.
    #[serde(default)]
    pub delete_format: Option<DeleteFormat>,
    /// A message that cannot become a row: `fail`, `dlq` or `skip`.
    #[serde(default)]
    pub on_invalid: OnInvalid,
    /// The payload fields that become columns. Unset: all of them. The
    /// metadata columns are always there.
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// The table name. Unset: the topic name in lower case with every
    /// character other than letters, digits and `_` replaced by `_`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub table: Option<String>,
    /// Go on (logging the lost offset range) when retention deleted
    /// messages before they were read, instead of failing.
    #[serde(default)]
    pub allow_data_loss: bool,
    /// How the values are encoded: `json`, `avro`, `protobuf` (framed with
    /// a schema registry id) or `auto` (framed values by their schema,
    /// plain JSON otherwise). Unset: the latest schema of the registry's
    /// `<topic>-value` subject decides at sync start; no subject, or no
    /// registry, is `json`.
    #[serde(default, deserialize_with = "format_or_none")]
    pub value_format: Option<ValueFormat>,
    /// How the keys are encoded (same values). Unset: `auto` with a
    /// registry (framed keys decoded by their schema), else the raw bytes
    /// as without one.
    #[serde(default, deserialize_with = "format_or_none")]
    pub key_format: Option<ValueFormat>,
    /// How the table is partitioned when topicberg creates it: Iceberg
    /// transforms of columns (metadata or payload), e.g.
    /// `["day(_kafka_timestamp)", "bucket(16, id)", "identity(region)",
    /// "truncate(4, sku)", "hour(created_at)", "month(..)", "year(..)"]`.
    /// Unset: unpartitioned. A table that exists keeps its spec (another
    /// engine may have changed it): files are written under its current
    /// default spec.
    #[serde(default)]
    pub partition_by: Vec<String>,
    /// The order of the rows within each data file, and the sort order
    /// the table is created with: columns (metadata or payload, of any
    /// type but struct, list, map), each optionally followed by `asc`
    /// (the default) or `desc` and by `nulls first` / `nulls last` (unset:
    /// nulls first ascending, last descending), e.g.
    /// `["id", "created_at desc"]`. Unset: unsorted. The columns must be
    /// in the table when it is created (a column added later cannot join
    /// the order); a table that exists keeps its own sort order, which
    /// files are written in (another engine may have changed it).
    #[serde(default)]
    pub sort_by: Vec<String>,
}

/// A format name (`json`, `avro`, `protobuf`, `auto`); `""` is unset.
fn format_or_none<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<ValueFormat>, D::Error> {
    let text: Option<String> = Option::deserialize(deserializer)?;
    text.filter(|t| !t.is_empty())
        .map(|t| t.parse().map_err(serde::de::Error::custom))
        .transpose()
}

/// The settings a topic is synced with: its `[[streams]]` entry with the
/// defaults filled in, or the defaults alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSettings {
    /// The topic.
    pub topic: String,
    /// The table name (the override, or the sanitised topic name).
    pub table: String,
    /// Append or upsert.
    pub mode: StreamMode,
    /// Upsert: the dedup key columns; empty in append mode.
    pub dedup_keys: Vec<String>,
    /// Upsert: the explicit delete format, if any.
    pub delete_format: Option<DeleteFormat>,
    /// What to do with a message that cannot become a row.
    pub on_invalid: OnInvalid,
    /// The payload fields kept as columns; `None` keeps all.
    pub columns: Option<Vec<String>>,
    /// Whether a retention gap is logged instead of failing the sync.
    pub allow_data_loss: bool,
    /// The values' format as written; `None`: decided at sync start.
    pub value_format: Option<ValueFormat>,
    /// The keys' format as written; `None`: `auto` with a registry.
    pub key_format: Option<ValueFormat>,
    /// `partition_by` as written (parsed when the job is resolved).
    pub partition_by: Vec<String>,
    /// `sort_by` as written (parsed when the job is resolved).
    pub sort_by: Vec<String>,
    /// Whether the settings come from a `[[streams]]` entry.
    pub configured: bool,
}

impl StreamSettings {
    /// The defaults for a topic without a `[[streams]]` entry.
    pub fn defaults_for(topic: &str) -> Self {
        Self {
            topic: topic.to_string(),
            table: sanitize_identifier(topic),
            mode: StreamMode::default(),
            dedup_keys: Vec::new(),
            delete_format: None,
            on_invalid: OnInvalid::default(),
            columns: None,
            allow_data_loss: false,
            value_format: None,
            key_format: None,
            partition_by: Vec::new(),
            sort_by: Vec::new(),
            configured: false,
        }
    }
}

impl From<&StreamConfig> for StreamSettings {
    fn from(entry: &StreamConfig) -> Self {
        Self {
            topic: entry.topic.clone(),
            table: entry
                .table
                .clone()
                .unwrap_or_else(|| sanitize_identifier(&entry.topic)),
            mode: entry.mode,
            dedup_keys: entry.dedup_keys.clone(),
            delete_format: entry.delete_format,
            on_invalid: entry.on_invalid,
            columns: entry.columns.clone(),
            allow_data_loss: entry.allow_data_loss,
            value_format: entry.value_format,
            key_format: entry.key_format,
            partition_by: entry.partition_by.clone(),
            sort_by: entry.sort_by.clone(),
            configured: true,
        }
    }
}

/// A name as a table or namespace identifier every engine accepts unquoted:
/// lower case, every character other than ASCII letters, digits and `_`
/// replaced by `_` (`Orders.v1` -> `orders_v1`).
pub fn sanitize_identifier(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `name` is already a sanitised identifier (non-empty, only
/// lower-case ASCII letters, digits and `_`).
pub fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
