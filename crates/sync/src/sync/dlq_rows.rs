//! The newest messages of a stream's dead-letter table, for a look at
//! them (serve's table page): partition, offset, the error and the raw
//! value as text.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};
use base64::Engine as _;
use serde::Serialize;
use topicberg_core::columns::string_values;
use topicberg_iceberg::{CatalogErrorKind, Destination, IcebergError, IcebergErrorKind};

use super::dlq::DLQ_SUFFIX;

/// Characters of a key or value shown, at most.
const SHOWN_CHARS: usize = 300;

/// One dead letter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetterRow {
    /// The message's partition.
    pub partition: Option<i32>,
    /// Its offset.
    pub offset: Option<i64>,
    /// Its Kafka timestamp (µs since the epoch).
    pub timestamp_micros: Option<i64>,
    /// When the sync wrote it (µs since the epoch).
    pub written_micros: Option<i64>,
    /// Why it could not become a row.
    pub error: Option<String>,
    /// The field the error names.
    pub error_field: Option<String>,
    /// The key as text (UTF-8, invalid bytes replaced; cut at 300
    /// characters with "…").
    pub key: Option<String>,
    /// The value, shown as the key.
    pub value: Option<String>,
}

/// The newest `limit` messages of `<table>__dlq` (newest written first,
/// then by offset, highest first); `None` when the stream has no
/// dead-letter table.
pub async fn newest_dead_letters(
    destination: &Destination,
    namespace: &Vec<String>,
    table: &str,
    limit: usize,
) -> Result<Option<Vec<DeadLetterRow>>, IcebergError> {
    let name = format!("{table}{DLQ_SUFFIX}");
    let handle = match destination.load_table(namespace, &name).await {
        Ok(handle) => handle,
        Err(e) if e.kind == IcebergErrorKind::Catalog(CatalogErrorKind::NotFound) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let batches = destination.newest_rows(&handle, limit).await?;
    let mut rows: Vec<DeadLetterRow> = batches.iter().flat_map(batch_rows).collect();
    rows.sort_by(|a, b| {
        (b.written_micros, b.offset, a.partition).cmp(&(a.written_micros, a.offset, b.partition))
    });
    rows.truncate(limit);
    Ok(Some(rows))
}

fn batch_rows(batch: &RecordBatch) -> Vec<DeadLetterRow> {
    let int32 = |name| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<Int32Type>())
    };
    let int64 = |name| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
    };
    let micros = |name| {
        batch
            .column_by_name(name)
            .and_then(|c| c.as_primitive_opt::<TimestampMicrosecondType>())
    };
    let text = |name| {
        batch
            .column_by_name(name)
            .and_then(|c| string_values(c.as_ref()))
    };
    let (partitions, offsets) = (int32("_kafka_partition"), int64("_kafka_offset"));
    let (timestamps, written) = (micros("_kafka_timestamp"), micros("_olake_timestamp"));
    let (errors, fields) = (text("_error"), text("_error_field"));
    let (keys, values) = (text("_kafka_key_base64"), text("_kafka_value_base64"));
    let at = |col: &Option<Vec<Option<String>>>, i: usize| col.as_ref().and_then(|c| c[i].clone());
    (0..batch.num_rows())
        .map(|i| DeadLetterRow {
            partition: partitions.filter(|c| c.is_valid(i)).map(|c| c.value(i)),
            offset: offsets.filter(|c| c.is_valid(i)).map(|c| c.value(i)),
            timestamp_micros: timestamps.filter(|c| c.is_valid(i)).map(|c| c.value(i)),
            written_micros: written.filter(|c| c.is_valid(i)).map(|c| c.value(i)),
            error: at(&errors, i),
            error_field: at(&fields, i),
            key: at(&keys, i).map(|k| shown(&k)),
            value: at(&values, i).map(|v| shown(&v)),
        })
        .collect()
}

/// Base64 of raw bytes -> text to show.
fn shown(base64: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(base64)
        .unwrap_or_else(|_| base64.as_bytes().to_vec());
    let text = String::from_utf8_lossy(&bytes);
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_decodes_base64_and_cuts_long_text() {
        let b64 = base64::engine::general_purpose::STANDARD;
        assert_eq!(shown(&b64.encode("not JSON")), "not JSON");
        assert_eq!(shown(&b64.encode([0xff, b'a'])), "\u{fffd}a");
        let long = "x".repeat(400);
        let cut = shown(&b64.encode(&long));
        assert_eq!(cut.chars().count(), SHOWN_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
