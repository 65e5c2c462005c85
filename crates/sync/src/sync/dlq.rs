//! The dead-letter table `<table>__dlq`: invalid messages of a stream with
//! `on_invalid = "dlq"`, raw key and value in base64 with partition,
//! offset, timestamp and the error text.
//!
//! It is committed just before the stream's table, in the same sync, and
//! records the same offsets (table property and summary). A crash between the
//! two commits leaves the dead-letter table ahead: the rerun reads those
//! messages again and writes to the dead-letter table only those at or
//! after its recorded offsets, so no message is lost or written twice.

use std::sync::Arc;

use arrow_array::builder::{
    Int32Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::ArrowError;
use base64::Engine as _;
use topicberg_iceberg::{
    Column, ColumnType, Destination, FormatVersion, IcebergError, IcebergErrorKind, OffsetsAdvance,
};

use super::invalid::DeadRecord;
use super::plan::TableOffsets;
use crate::error::SyncErrorKind;

/// The suffix of a dead-letter table's name.
pub const DLQ_SUFFIX: &str = "__dlq";

/// The dead-letter table's columns.
pub fn dlq_columns() -> Vec<Column> {
    [
        ("_kafka_topic", ColumnType::String),
        ("_kafka_partition", ColumnType::Int),
        ("_kafka_offset", ColumnType::Long),
        ("_kafka_timestamp", ColumnType::TimestampTz),
        ("_kafka_key_base64", ColumnType::String),
        ("_kafka_value_base64", ColumnType::String),
        ("_error", ColumnType::String),
        ("_error_field", ColumnType::String),
        ("_olake_timestamp", ColumnType::TimestampTz),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (name, ty))| Column::optional(name, i as i32 + 1, ty))
    .collect()
}

/// What a dead-letter commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterCommit {
    /// `namespace.table__dlq`.
    pub table: String,
    /// Messages written now.
    pub written: u64,
    /// Messages an earlier, interrupted sync had already written.
    pub already_there: u64,
}

/// Why a stream's dead letters could not be committed (its table then
/// commits nothing).
#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    /// The dead-letter table could not be made or loaded, or its file
    /// written.
    #[error("dead-letter table {table}: {source}")]
    Table {
        /// `namespace.table__dlq`.
        table: String,
        /// The catalog's or storage's error.
        #[source]
        source: IcebergError,
    },
    /// The offsets the dead-letter table records cannot be read.
    #[error(transparent)]
    RecordedOffsets(topicberg_iceberg::OffsetsError),
    /// The dead letters do not make a batch of the table's schema.
    #[error(transparent)]
    Batch(#[from] ArrowError),
    /// The snapshot was refused.
    #[error("committing dead-letter table {table}: {source}")]
    Commit {
        /// `namespace.table__dlq`.
        table: String,
        /// The catalog's error.
        #[source]
        source: IcebergError,
    },
}

impl DeadLetterError {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::Table { .. } | Self::Commit { .. } => SyncErrorKind::Iceberg,
            Self::RecordedOffsets(_) => SyncErrorKind::Offsets,
            Self::Batch(_) => SyncErrorKind::Internal,
        }
    }

    /// Whether the next sync may succeed without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Table { source, .. } | Self::Commit { source, .. } => source.retryable(),
            Self::RecordedOffsets(_) | Self::Batch(_) => false,
        }
    }
}

/// Attempts at a dead-letter commit that meets another sync's commit of
/// the same dead-letter table (each one filters again on the new offsets).
const DEAD_LETTER_ATTEMPTS: u32 = 5;

/// Writes `dead` (invalid messages of the stream's topic) to
/// `<table>__dlq`, creating it when missing, in one snapshot that moves the
/// dead-letter table's offsets to the stream table's (`advance`), never
/// back. Messages the dead-letter table already holds (at or past its
/// recorded offsets: an interrupted sync, or another sync of the job
/// running at once) are not written again.
pub async fn commit_dead_letters(
    destination: &Destination,
    namespace: &Vec<String>,
    table: &str,
    dead: &[DeadRecord],
    advance: &OffsetsAdvance,
    olake_timestamp_micros: i64,
) -> Result<DeadLetterCommit, DeadLetterError> {
    let name = format!("{table}{DLQ_SUFFIX}");
    let qualified = format!("{}.{name}", namespace.join("."));
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut handle = destination
            .ensure_table(namespace, &name, &dlq_columns(), FormatVersion::V2)
            .await
            .map_err(|source| DeadLetterError::Table {
                table: qualified.clone(),
                source,
            })?;
        let recorded = TableOffsets::of_metadata(handle.metadata())
            .map_err(DeadLetterError::RecordedOffsets)?;
        let topic = advance.topic.as_str();
        let fresh: Vec<&DeadRecord> = dead
            .iter()
            .filter(|d| {
                recorded
                    .get(topic, d.partition)
                    .is_none_or(|next| d.offset >= next)
            })
            .collect();
        let already_there = (dead.len() - fresh.len()) as u64;
        let done = DeadLetterCommit {
            table: qualified.clone(),
            written: fresh.len() as u64,
            already_there,
        };
        if fresh.is_empty() {
            return Ok(done);
        }
        let batch = dead_letter_batch(topic, &fresh, olake_timestamp_micros, &handle)?;
        let files = destination
            .write_data_files(&handle, [batch])
            .await
            .map_err(|source| DeadLetterError::Table {
                table: qualified.clone(),
                source,
            })?;
        // From what this table records (not the stream table's plan) to
        // the stream table's next offsets, never back.
        let moves = OffsetsAdvance {
            topic: topic.to_string(),
            partitions: advance
                .partitions
                .iter()
                .map(|(p, (_, next))| {
                    let now = recorded.get(topic, *p);
                    (*p, (now, now.map_or(*next, |n| n.max(*next))))
                })
                .collect(),
        };
        match destination
            .commit_append_moving(&mut handle, files.clone(), moves)
            .await
        {
            Ok(_) => {
                tracing::warn!(table = %qualified, written = fresh.len(), "invalid messages written to the dead-letter table");
                return Ok(done);
            }
            Err(e) if e.kind == IcebergErrorKind::Superseded && attempt < DEAD_LETTER_ATTEMPTS => {
                // Another sync wrote dead letters first: filter again.
                destination.delete_uncommitted(&files).await;
            }
            Err(source) => {
                return Err(DeadLetterError::Commit {
                    table: qualified,
                    source,
                })
            }
        }
    }
}

fn dead_letter_batch(
    topic: &str,
    dead: &[&DeadRecord],
    olake_timestamp_micros: i64,
    handle: &topicberg_iceberg::TableHandle,
) -> Result<RecordBatch, ArrowError> {
    let n = dead.len();
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut topics = StringBuilder::new();
    let mut partitions = Int32Builder::with_capacity(n);
    let mut offsets = Int64Builder::with_capacity(n);
    let mut timestamps = TimestampMicrosecondBuilder::with_capacity(n);
    let mut keys = StringBuilder::new();
    let mut values = StringBuilder::new();
    let mut errors = StringBuilder::new();
    let mut fields = StringBuilder::new();
    let mut written = TimestampMicrosecondBuilder::with_capacity(n);
    for d in dead {
        topics.append_value(topic);
        partitions.append_value(d.partition);
        offsets.append_value(d.offset);
        timestamps.append_option(d.timestamp_ms.and_then(|ms| ms.checked_mul(1000)));
        keys.append_option(d.key.as_ref().map(|k| b64.encode(k)));
        values.append_option(d.value.as_ref().map(|v| b64.encode(v)));
        errors.append_value(&d.error);
        fields.append_option(d.field.as_deref());
        written.append_value(olake_timestamp_micros);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(topics.finish()),
        Arc::new(partitions.finish()),
        Arc::new(offsets.finish()),
        Arc::new(timestamps.finish().with_timezone("+00:00")),
        Arc::new(keys.finish()),
        Arc::new(values.finish()),
        Arc::new(errors.finish()),
        Arc::new(fields.finish()),
        Arc::new(written.finish().with_timezone("+00:00")),
    ];
    RecordBatch::try_new(handle.arrow_schema().clone(), columns)
}
