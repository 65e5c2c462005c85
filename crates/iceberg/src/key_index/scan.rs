//! Reading what the key index needs from the table: the files of a
//! snapshot (from its manifests), the `_olake_id` column of a data file
//! (Parquet projection, streamed a batch at a time), position delete files
//! and deletion vectors.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use futures::TryStreamExt;
use iceberg::arrow::ArrowFileReader;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileFormat, ManifestList, ManifestStatus, Snapshot, TableMetadata,
};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use roaring::RoaringTreemap;

use super::Stamp;
use crate::deletes::deletion_vectors::decode_deletion_vector;
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};

/// The column holding each row's key.
pub(crate) const KEY_COLUMN: &str = topicberg_core::columns::OLAKE_ID;
/// Reserved field ids of a position delete file's columns.
const FILE_PATH_FIELD_ID: i32 = 2147483546;
const POS_FIELD_ID: i32 = 2147483545;
/// Rows per decoded batch: bounds the memory of one read.
pub(crate) const BATCH_ROWS: usize = 8192;

/// A file of a snapshot, as its manifest entry describes it.
#[derive(Debug, Clone)]
pub(crate) struct FileEntry {
    pub path: String,
    pub content: DataContentType,
    pub format: DataFileFormat,
    /// The data sequence number.
    pub seq: i64,
    pub status: ManifestStatus,
    pub referenced_data_file: Option<String>,
    pub content_offset: Option<i64>,
    pub content_size: Option<i64>,
    pub equality_ids: Option<Vec<i32>>,
}

fn data_err(step: impl Into<String>, detail: impl std::fmt::Display) -> IcebergError {
    IcebergError::new(IcebergErrorKind::Data, step, detail.to_string())
}

pub(crate) fn parquet_err(
    step: impl Into<String>,
    e: parquet::errors::ParquetError,
) -> IcebergError {
    IcebergError::new(IcebergErrorKind::Storage, step, e.to_string()).with_source(e)
}

/// The entries of the snapshot's manifests. `only_added_by`: read only the
/// manifests that snapshot wrote, and only the entries it added or removed.
pub(crate) async fn snapshot_files(
    file_io: &FileIO,
    metadata: &TableMetadata,
    snapshot: &Snapshot,
    only_added_by: Option<i64>,
) -> Result<Vec<FileEntry>, IcebergError> {
    let list_path = snapshot.manifest_list();
    let step = format!("reading manifest list {list_path}");
    let bytes = file_io
        .new_input(list_path)
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Data))?
        .read()
        .await
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Data))?;
    let list = ManifestList::parse_with_version(&bytes, metadata.format_version())
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Data))?;
    let mut out = Vec::new();
    for manifest_file in list.entries() {
        if only_added_by.is_some_and(|id| manifest_file.added_snapshot_id != id) {
            continue;
        }
        let step = format!("reading manifest {}", manifest_file.manifest_path);
        let manifest = manifest_file
            .load_manifest(file_io)
            .await
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Data))?;
        for entry in manifest.entries() {
            match only_added_by {
                Some(id) if entry.snapshot_id() != Some(id) => continue,
                Some(_) if entry.status() == ManifestStatus::Existing => continue,
                None if !entry.is_alive() => continue,
                _ => {}
            }
            let file = entry.data_file();
            out.push(FileEntry {
                path: file.file_path().to_string(),
                content: file.content_type(),
                format: file.file_format(),
                seq: entry
                    .sequence_number()
                    .unwrap_or(snapshot.sequence_number()),
                status: entry.status(),
                referenced_data_file: file.referenced_data_file(),
                content_offset: file.content_offset(),
                content_size: file.content_size_in_bytes(),
                equality_ids: file.equality_ids(),
            });
        }
    }
    Ok(out)
}

/// Opens a Parquet file of the table for streamed reading; errors name
/// `step`.
pub(crate) async fn open_parquet(
    file_io: &FileIO,
    path: &str,
    step: &str,
) -> Result<ParquetRecordBatchStreamBuilder<ArrowFileReader>, IcebergError> {
    let input = file_io
        .new_input(path)
        .map_err(|e| from_iceberg(step, e, IcebergErrorKind::Data))?;
    let meta = input
        .metadata()
        .await
        .map_err(|e| from_iceberg(step, e, IcebergErrorKind::Storage))?;
    let reader = input
        .reader()
        .await
        .map_err(|e| from_iceberg(step, e, IcebergErrorKind::Storage))?;
    ParquetRecordBatchStreamBuilder::new(ArrowFileReader::new(meta, reader))
        .await
        .map_err(|e| parquet_err(step, e))
}

/// Streams a Parquet file's batches with only the leaf columns `pick`
/// chooses (given each leaf's field id and name).
pub(crate) async fn stream_columns(
    file_io: &FileIO,
    path: &str,
    pick: impl Fn(Option<i32>, &str) -> bool,
    mut each: impl FnMut(&RecordBatch) -> Result<(), IcebergError>,
) -> Result<(), IcebergError> {
    let step = format!("reading {path}");
    let builder = open_parquet(file_io, path, &step).await?;
    let leaves: Vec<usize> = builder
        .parquet_schema()
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            let info = c.self_type().get_basic_info();
            pick(info.has_id().then(|| info.id()), c.name())
        })
        .map(|(i, _)| i)
        .collect();
    if leaves.is_empty() {
        return Err(data_err(step, "none of the columns to read is in the file"));
    }
    let mask = ProjectionMask::leaves(builder.parquet_schema(), leaves);
    let mut stream = builder
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| parquet_err(&step, e))?;
    while let Some(batch) = stream.try_next().await.map_err(|e| parquet_err(&step, e))? {
        each(&batch)?;
    }
    Ok(())
}

/// Parses 32 hex digits into the 16 bytes of a key.
pub fn parse_key(hex: &str) -> Option<[u8; 16]> {
    let digits = hex.as_bytes();
    if digits.len() != 32 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = (nibble(digits[2 * i])? << 4) | nibble(digits[2 * i + 1])?;
    }
    Some(out)
}

fn strings<'a>(step: &str, column: &'a dyn Array) -> Result<Vec<Option<&'a str>>, IcebergError> {
    topicberg_core::columns::str_values(column).ok_or_else(|| {
        data_err(
            step,
            format!("expected strings, found {}", column.data_type()),
        )
    })
}

/// Streams the keys of a data file's rows in position order: `each(pos,
/// key)` with `None` for a null or malformed `_olake_id`.
pub(crate) async fn read_keys(
    file_io: &FileIO,
    path: &str,
    key_field_id: i32,
    mut each: impl FnMut(u64, Option<[u8; 16]>) -> Result<(), IcebergError>,
) -> Result<(), IcebergError> {
    let step = format!("reading the {KEY_COLUMN} column of {path}");
    let mut pos = 0u64;
    stream_columns(
        file_io,
        path,
        |id, name| match id {
            Some(id) => id == key_field_id,
            None => name == KEY_COLUMN,
        },
        |batch| {
            let column = batch.column(0);
            match column.data_type() {
                DataType::Utf8 => {
                    for v in column.as_string::<i32>().iter() {
                        each(pos, v.and_then(parse_key))?;
                        pos += 1;
                    }
                }
                _ => {
                    for v in strings(&step, column.as_ref())? {
                        each(pos, v.and_then(parse_key))?;
                        pos += 1;
                    }
                }
            }
            Ok(())
        },
    )
    .await
}

/// The field ids of the columns the index reads from a data file: the
/// key, and the two a row's [`Stamp`] comes from (absent from a table
/// that lacks them: its rows get [`Stamp::UNKNOWN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyFields {
    pub key: i32,
    pub partition: Option<i32>,
    /// The column the stamp's order is read from: the one the table's
    /// [`ORDER_BY_PROPERTY`] names, else `_cdc_lsn` where the table has it
    /// (a table of change events), else `_kafka_timestamp`.
    pub timestamp: Option<i32>,
    /// That column's name (for a data file without field ids).
    pub order_name: &'static str,
    /// `_kafka_timestamp` when `timestamp` is `_cdc_lsn`: a row without a
    /// log position is stamped with its message timestamp.
    pub fallback: Option<i32>,
}

/// The table property naming the payload column that orders a key's
/// versions (a stream's `order_by`), set when the table is created.
pub const ORDER_BY_PROPERTY: &str = "topicberg.order-by";

impl KeyFields {
    /// The fields of `schema`, the order column named by `order_by` (the
    /// table's [`ORDER_BY_PROPERTY`]) if any; `None` without an
    /// `_olake_id` column.
    pub(crate) fn of(schema: &iceberg::spec::Schema, order_by: Option<&str>) -> Option<KeyFields> {
        let id = |name: &str| schema.field_by_name(name).map(|f| f.id);
        let (timestamp, order_name, fallback) = match (order_by, id(LSN_COLUMN)) {
            // Named by the table: found by id (a data file's name may be
            // an older one's).
            (Some(name), _) => (id(name), "", None),
            (None, Some(lsn)) => (Some(lsn), LSN_COLUMN, id(TIMESTAMP_COLUMN)),
            (None, None) => (id(TIMESTAMP_COLUMN), TIMESTAMP_COLUMN, None),
        };
        Some(KeyFields {
            key: id(KEY_COLUMN)?,
            partition: id(PARTITION_COLUMN),
            timestamp,
            order_name,
            fallback,
        })
    }
}

/// The columns a row's [`Stamp`] is read from.
const PARTITION_COLUMN: &str = topicberg_core::columns::KAFKA_PARTITION;
const TIMESTAMP_COLUMN: &str = topicberg_core::columns::KAFKA_TIMESTAMP;
const LSN_COLUMN: &str = topicberg_core::columns::CDC_LSN;

/// The index of the batch column with field id `id` (or, in a file
/// without field ids, named `name`).
fn column_of(batch: &RecordBatch, id: Option<i32>, name: &str) -> Option<usize> {
    let id_text = id.map(|id| id.to_string());
    batch.schema().fields().iter().position(|f| {
        match f.metadata().get(parquet::arrow::PARQUET_FIELD_ID_META_KEY) {
            Some(found) => id_text.as_deref() == Some(found.as_str()),
            None => f.name() == name,
        }
    })
}

/// The values of a stamp's order column (`_kafka_timestamp`, `_cdc_lsn`
/// or an `order_by` column: a `long`, `int` or timestamp) as `i64`, and
/// its nulls; `None` for a column of another type.
fn order_values(array: &dyn Array) -> Option<(std::borrow::Cow<'_, [i64]>, Option<&NullBuffer>)> {
    use std::borrow::Cow;
    if let Some(a) = array.as_primitive_opt::<Int64Type>() {
        return Some((Cow::Borrowed(a.values()), a.nulls()));
    }
    if let Some(a) = array.as_primitive_opt::<Int32Type>() {
        let wide = a.values().iter().map(|v| i64::from(*v)).collect();
        return Some((Cow::Owned(wide), a.nulls()));
    }
    let a = array.as_primitive_opt::<TimestampMicrosecondType>()?;
    Some((Cow::Borrowed(a.values()), a.nulls()))
}

/// Streams a data file's rows in position order: `each(pos, key, stamp)`,
/// the key `None` for a null or malformed `_olake_id`, the stamp from the
/// row's `_kafka_timestamp` and `_kafka_partition` ([`Stamp::UNKNOWN`]'s
/// parts where the file lacks them or a value is null).
pub(crate) async fn read_stamped_keys(
    file_io: &FileIO,
    path: &str,
    fields: KeyFields,
    mut each: impl FnMut(u64, Option<[u8; 16]>, Stamp) -> Result<(), IcebergError>,
) -> Result<(), IcebergError> {
    let step = format!("reading the {KEY_COLUMN} column of {path}");
    let order_column = fields.order_name;
    let wanted = [
        (Some(fields.key), KEY_COLUMN),
        (fields.partition, PARTITION_COLUMN),
        (fields.timestamp, order_column),
        (fields.fallback, TIMESTAMP_COLUMN),
    ];
    let mut pos = 0u64;
    stream_columns(
        file_io,
        path,
        |id, name| {
            wanted.iter().any(|(want, want_name)| match id {
                Some(id) => *want == Some(id),
                None => name == *want_name,
            })
        },
        |batch| {
            let key_at = column_of(batch, Some(fields.key), KEY_COLUMN)
                .ok_or_else(|| data_err(&step, "no key column"))?;
            let keys = strings(&step, batch.column(key_at).as_ref())?;
            let partitions = column_of(batch, fields.partition, PARTITION_COLUMN)
                .and_then(|i| batch.column(i).as_primitive_opt::<Int32Type>());
            let timestamps = column_of(batch, fields.timestamp, order_column)
                .and_then(|i| order_values(batch.column(i).as_ref()));
            let fallback = fields
                .fallback
                .and_then(|id| column_of(batch, Some(id), TIMESTAMP_COLUMN))
                .and_then(|i| order_values(batch.column(i).as_ref()));
            let valid = |values: &Option<(std::borrow::Cow<'_, [i64]>, Option<&NullBuffer>)>,
                         row: usize| {
                values
                    .as_ref()
                    .filter(|(_, nulls)| nulls.is_none_or(|n| n.is_valid(row)))
                    .map(|(values, _)| values[row])
            };
            for (row, key) in keys.into_iter().enumerate() {
                let stamp = Stamp {
                    timestamp: valid(&timestamps, row)
                        .or_else(|| valid(&fallback, row))
                        .unwrap_or(Stamp::UNKNOWN.timestamp),
                    partition: partitions
                        .filter(|p| p.is_valid(row))
                        .map_or(Stamp::UNKNOWN.partition, |p| p.value(row)),
                };
                each(pos, key.and_then(parse_key), stamp)?;
                pos += 1;
            }
            Ok(())
        },
    )
    .await
}

/// Reads a position delete file into `out` (data file path -> deleted
/// positions), keeping only the rows `keep(path)` accepts.
pub(crate) async fn read_position_deletes(
    file_io: &FileIO,
    path: &str,
    keep: impl Fn(&str) -> bool,
    out: &mut HashMap<String, RoaringTreemap>,
) -> Result<(), IcebergError> {
    let step = format!("reading position delete file {path}");
    stream_columns(
        file_io,
        path,
        |id, name| match id {
            Some(id) => id == FILE_PATH_FIELD_ID || id == POS_FIELD_ID,
            None => name == "file_path" || name == "pos",
        },
        |batch| {
            let schema = batch.schema();
            let (Ok(fp), Ok(ps)) = (schema.index_of("file_path"), schema.index_of("pos")) else {
                return Err(data_err(&step, "no file_path and pos columns"));
            };
            let paths = strings(&step, batch.column(fp).as_ref())?;
            let positions = batch
                .column(ps)
                .as_primitive_opt::<arrow_array::types::Int64Type>()
                .ok_or_else(|| data_err(&step, "pos is not a long column"))?;
            for (p, pos) in paths.into_iter().zip(positions.iter()) {
                if let (Some(p), Some(pos)) = (p, pos) {
                    if pos >= 0 && keep(p) {
                        match out.get_mut(p) {
                            Some(set) => set.insert(pos as u64),
                            None => out.entry(p.to_string()).or_default().insert(pos as u64),
                        };
                    }
                }
            }
            Ok(())
        },
    )
    .await
}

/// Reads one deletion vector blob of a Puffin file and decodes it with
/// [`decode_deletion_vector`].
pub(crate) async fn read_deletion_vector(
    file_io: &FileIO,
    entry: &FileEntry,
) -> Result<RoaringTreemap, IcebergError> {
    let step = format!("reading deletion vector in {}", entry.path);
    let (Some(offset), Some(size)) = (entry.content_offset, entry.content_size) else {
        return Err(data_err(step, "no content_offset / content_size_in_bytes"));
    };
    let reader = file_io
        .new_input(&entry.path)
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Data))?
        .reader()
        .await
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
    let bytes = reader
        .read(offset as u64..(offset + size) as u64)
        .await
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
    decode_deletion_vector(&bytes).map_err(|e| data_err(step, &e).with_source(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_from_hex() {
        let key = parse_key("000102030405060708090a0b0c0d0e0f").unwrap();
        assert_eq!(key, core::array::from_fn(|i| i as u8));
        assert_eq!(parse_key("00"), None);
        assert_eq!(parse_key("zz0102030405060708090a0b0c0d0e0f"), None);
    }
}
