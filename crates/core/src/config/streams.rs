//! `[[streams]]`: per-topic settings, and what a topic without an entry gets.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use super::{empty_as_none, PartitionField, SortKey};
use crate::registry::ValueFormat;

/// How messages become rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StreamMode {
    /// Every message is a new row.
    Append,
    /// One row per key (`dedup_keys`): the latest message wins.
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

/// Whether a topic's messages are change events of a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeEvents {
    /// Plain messages: each is a row.
    #[default]
    None,
    /// Debezium's change events (JSON, with or without the Connect
    /// schema): the row is `after`; `op` d deletes the key's row.
    #[schemars(extend("x-label" = "Debezium"))]
    Debezium,
}

/// What a truncate of the source table (a change event `op` t) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnTruncate {
    /// The table's rows from before the truncate are deleted, in the
    /// sync's one commit with its other changes.
    #[default]
    #[schemars(extend("x-label" = "Empty the table"))]
    EmptyTable,
    /// The sync fails at the truncate, naming it; nothing of the table is
    /// committed.
    #[schemars(extend("x-label" = "Fail the sync"))]
    Fail,
}

/// How an upsert retires the old row of a key.
// Which one a table gets is decided by
// [`resolve_delete_format`](super::resolve_delete_format) from
// `target_engines` (see the matrix in `engines.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeleteFormat {
    /// Position delete files; format v2 only (the Iceberg spec forbids
    /// adding them to v3 tables).
    #[schemars(extend("x-label" = "position deletes (v2)"))]
    Position,
    /// Deletion vectors; format v3 only.
    #[schemars(extend("x-label" = "deletion vectors (v3)"))]
    Dv,
    /// Equality delete files on the dedup key; format v2 or v3.
    #[schemars(extend("x-label" = "equality deletes"))]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnInvalid {
    /// Stop the sync for that table; nothing of it is committed.
    #[schemars(extend("x-label" = "fail the sync"))]
    Fail,
    /// Write the record to the table `<table>__dlq` in the same commit.
    #[schemars(extend("x-label" = "write them to the dead-letter table"))]
    Dlq,
    /// Count and log it, and go on.
    #[schemars(extend("x-label" = "skip them (counted)"))]
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

/// `[[streams]]`: one entry per topic that needs more than the defaults; a
/// topic that matches `topic_pattern` without an entry is synced in append
/// mode with every default. Two entries for one topic, or two topics
/// writing one table, are errors.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = super::schema::field_order::<Self>)]
pub struct StreamConfig {
    /// The exact topic name. Must match `topic_pattern` when that is set.
    #[schemars(extend("x-label" = "Topic", "x-place" = "streams-table"))]
    pub topic: String,
    /// How messages become rows.
    #[serde(default)]
    #[schemars(extend("x-label" = "Mode", "x-place" = "streams-table"))]
    pub mode: StreamMode,
    /// Upsert: the key. Payload field names, or `_kafka_key` (the message
    /// key); several make a composite key, and `_kafka_key` may be combined
    /// with payload fields. Other metadata columns cannot be keys. Required
    /// in upsert mode, refused in append mode.
    #[serde(default)]
    #[schemars(extend("x-label" = "Dedup keys", "x-place" = "streams-table"))]
    pub dedup_keys: Vec<String>,
    /// Upsert: a payload field (`int`, `long`, `timestamp` or
    /// `timestamptz` column) that orders one key's messages: the message
    /// with the higher value wins, whatever its partition or offset, so a
    /// late, older message never overwrites a newer row. Equal values: the
    /// later offset (another partition: the higher partition). A message
    /// without a value (a tombstone, or a row without the field or with
    /// null) goes by offset within its partition, so a tombstone deletes
    /// its partition's earlier rows, and comes before every value of
    /// another partition. Set when the table is created (kept in its property
    /// `topicberg.order-by`); it cannot change later. Without it, the later
    /// offset wins within a partition and the later message timestamp
    /// across partitions.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Order by",
        "x-help" = "a payload field (version or event time) whose higher value wins"
    ))]
    pub order_by: Option<String>,
    /// Upsert: how the old row of a key is retired. `dv` needs format v3,
    /// `position` cannot be used with it; every engine of `target_engines`
    /// must read it.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Delete format",
        "x-default" = "from the target engines",
        "x-help" = "upsert tables only"
    ))]
    pub delete_format: Option<DeleteFormat>,
    /// What to do with a message that cannot become a row.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Invalid messages",
        "x-help" = "a message that cannot become a row"
    ))]
    pub on_invalid: OnInvalid,
    /// The payload fields that become columns; the metadata columns are
    /// always there. Payload dedup keys must be listed.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Columns",
        "x-default" = "every payload field",
        "x-help" = "the payload fields to keep, comma separated; empty: all of them"
    ))]
    pub columns: Option<Vec<String>>,
    /// The table name: lower-case letters, digits and `_` (two entries
    /// that name one table write it together when their table settings
    /// agree). Or a template
    /// that routes each message to the table it names: `{topic}`,
    /// `{header:NAME}` (a header's text) and `{a.b}` (a field of a JSON
    /// value; of a change event's envelope, e.g. `{source.table}`)
    /// placeholders among literal text, the result made a table name as a
    /// topic's is.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Table name",
        "x-default" = "the topic, lower-cased, other characters than letters, digits and `_` as `_`",
        "x-help" = "empty: the topic's name in lower case, other characters as _; {source.table}, {header:NAME} or {topic} route each message to the table it names"
    ))]
    pub table: Option<String>,
    /// When retention deleted messages before they were read: log the lost
    /// offset range and go on, instead of failing.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Go on past expired messages",
        "x-help" = "when retention deleted messages before they were read: log the lost range and go on"
    ))]
    pub allow_data_loss: bool,
    /// How the values are encoded. `avro` and `protobuf`: Confluent-framed
    /// with the writer schema in the registry; `auto`: framed values by
    /// their schema's kind, plain JSON otherwise. Unset: the latest schema
    /// of the registry's `<topic>-value` subject decides at sync start (no
    /// subject, or no registry: `json`). All but `json` need
    /// `schema_registry_url`.
    #[serde(default, deserialize_with = "format_or_none")]
    #[schemars(extend(
        "x-label" = "Value format",
        "x-place" = "streams-table",
        "x-default" = "from the registry, else `json`"
    ))]
    pub value_format: Option<ValueFormat>,
    /// How the keys are encoded (same values). `json` keeps the key's bytes
    /// as they are (`_kafka_key`). All but `json` need
    /// `schema_registry_url`.
    #[serde(default, deserialize_with = "format_or_none")]
    #[schemars(extend(
        "x-label" = "Key format",
        "x-place" = "streams-table",
        "x-default" = "`auto` with a registry, else `json`"
    ))]
    pub key_format: Option<ValueFormat>,
    /// The Iceberg transforms the table is partitioned by when topicberg
    /// creates it, of payload or metadata columns, e.g.
    /// `["day(_kafka_timestamp)", "bucket(16, id)"]`. A table that exists
    /// keeps its own spec (another engine may have changed it).
    #[serde(default)]
    #[schemars(with = "Vec<PartitionField>")]
    #[schemars(extend(
        "x-label" = "Partitioning",
        "x-separator" = ";",
        "x-default" = "unpartitioned",
        "x-help" = "Iceberg transforms separated by ;, e.g. day(_kafka_timestamp); bucket(16, id); applied when topicberg creates the table"
    ))]
    pub partition_by: Vec<String>,
    /// The order of the rows within each data file, and the sort order the
    /// table is created with, e.g. `["id", "created_at desc"]`; nulls come
    /// first ascending, last descending, unless said. The columns must be
    /// in the table when it is created; a table that exists keeps its own
    /// sort order (another engine may have changed it).
    #[serde(default)]
    #[schemars(with = "Vec<SortKey>")]
    #[schemars(extend(
        "x-label" = "Sort order",
        "x-default" = "unsorted",
        "x-help" = "columns, comma separated, each optionally asc/desc and nulls first/last, e.g. region, created_at desc; applied when topicberg creates the table"
    ))]
    pub sort_by: Vec<String>,
    /// Whether the messages are a database's change events. `debezium`
    /// (JSON values, or Avro through the schema registry). In mode `upsert` the table holds the source table's
    /// rows: the row is the event's `after`, a delete (`op` d) and the
    /// tombstone after it delete the key's row, and without `dedup_keys`
    /// the key is every field of the message key (payload fields as
    /// `dedup_keys` are read from a delete's `before`: set `REPLICA
    /// IDENTITY FULL` on the source table). In mode `append` the table is
    /// the log of the events, one row per event (a delete its `before`).
    /// With the Connect schema in the message (`schemas.enable=true`) the
    /// columns get its exact types.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Change events",
        "x-help" = "debezium: the topic is a Debezium change stream (JSON or registry Avro values); upsert keeps the source's rows, append every event"
    ))]
    pub change_events: ChangeEvents,
    /// What a truncate of the source table (a change event with `op` t)
    /// does: `empty_table` (default) deletes every row from before it, in
    /// the sync's one commit; `fail` stops the sync at it, naming the
    /// topic, partition and offset. Only with `change_events`.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "On truncate",
        "x-help" = "empty_table: delete the rows from before the truncate; fail: stop the sync at it"
    ))]
    pub on_truncate: OnTruncate,
    /// Change events: keep a deleted row instead of deleting it, marked
    /// with `_cdc_op = "d"` and holding the delete's `before` (the whole
    /// row with `REPLICA IDENTITY FULL`; with the default identity only
    /// the primary key, the other columns null). The Kafka tombstone after
    /// a delete is then passed.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Soft deletes",
        "x-help" = "keep deleted rows, marked _cdc_op = d (change events only)"
    ))]
    pub soft_deletes: bool,
    /// Whether rows keep the message's Kafka headers, in the column
    /// `_kafka_headers`: a list of `{key: string, value: binary}` in the
    /// message's order, repeated keys kept, a null value null, an empty list
    /// for a message without headers. Turned on for a table that exists,
    /// the column is added (earlier rows: null).
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Kafka headers",
        "x-help" = "keep each message's headers in the column _kafka_headers"
    ))]
    pub kafka_headers: bool,
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
    /// Upsert: the field that orders a key's messages (`order_by`).
    pub order_by: Option<String>,
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
    /// Whether the messages are change events.
    pub change_events: ChangeEvents,
    /// What a truncate event does.
    pub on_truncate: OnTruncate,
    /// Whether deleted rows are kept, marked (`soft_deletes`).
    pub soft_deletes: bool,
    /// Whether rows keep the message's headers (`_kafka_headers`).
    pub kafka_headers: bool,
    /// Whether the settings come from a `[[streams]]` entry.
    pub configured: bool,
    /// Whether the `[[streams]]` entry names its table (`table = ...`):
    /// only such streams may write one table together.
    pub table_named: bool,
}

impl StreamSettings {
    /// The defaults for a topic without a `[[streams]]` entry.
    pub fn defaults_for(topic: &str) -> Self {
        Self {
            topic: topic.to_string(),
            table: sanitize_identifier(topic),
            mode: StreamMode::default(),
            dedup_keys: Vec::new(),
            order_by: None,
            delete_format: None,
            on_invalid: OnInvalid::default(),
            columns: None,
            allow_data_loss: false,
            value_format: None,
            key_format: None,
            partition_by: Vec::new(),
            sort_by: Vec::new(),
            change_events: ChangeEvents::None,
            on_truncate: OnTruncate::EmptyTable,
            soft_deletes: false,
            kafka_headers: false,
            configured: false,
            table_named: false,
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
            order_by: entry.order_by.clone(),
            delete_format: entry.delete_format,
            on_invalid: entry.on_invalid,
            columns: entry.columns.clone(),
            allow_data_loss: entry.allow_data_loss,
            value_format: entry.value_format,
            key_format: entry.key_format,
            partition_by: entry.partition_by.clone(),
            sort_by: entry.sort_by.clone(),
            change_events: entry.change_events,
            on_truncate: entry.on_truncate,
            soft_deletes: entry.soft_deletes,
            kafka_headers: entry.kafka_headers,
            configured: true,
            table_named: entry.table.is_some(),
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

/// Why `value` (a name: a topic, pattern, group, job) cannot be used: it
/// holds a newline or another control character, which would reach logs
/// verbatim (forged log lines) and file names. Says which and where, not
/// the value itself.
pub fn control_character(value: &str) -> Option<String> {
    let (at, c) = value.chars().enumerate().find(|(_, c)| c.is_control())?;
    Some(format!(
        "holds a control character (U+{:04X}, character {} of {}); remove it: names may not hold newlines, tabs or other control characters",
        c as u32,
        at + 1,
        value.chars().count()
    ))
}

/// Whether `name` is already a sanitised identifier (non-empty, only
/// lower-case ASCII letters, digits and `_`).
pub fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
