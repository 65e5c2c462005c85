//! Equality delete files on the `_olake_id` key column (format v2 and v3):
//! Parquet files holding the `_olake_id` values whose rows are deleted.
//!
//! Per the Iceberg spec: the file's one column is the table's `_olake_id`
//! column, with the table's field id; the manifest entry is `content = 2`
//! (equality deletes) with `equality_ids = [that field id]`. It applies to
//! data files whose data sequence number is strictly less than its own, so
//! rows added in the same commit are kept. Values are written sorted and
//! distinct, as 32 lowercase hex digits (the `_olake_id` text).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, TableMetadata,
};

use crate::deletes::partitions::FilePartition;
use crate::deletes::position::{data_folder, encode_zstd_parquet, store_file};
use crate::deletes::DeleteFileError;
use crate::error::{IcebergError, IcebergErrorKind};
use crate::key_index::scan::KEY_COLUMN;

/// The Arrow schema of an equality delete file on `_olake_id`: the one
/// column, with the table's field id in `PARQUET:field_id`.
pub fn equality_delete_arrow_schema(key_field_id: i32, nullable: bool) -> ArrowSchemaRef {
    Arc::new(ArrowSchema::new(vec![Field::new(
        KEY_COLUMN,
        DataType::Utf8,
        nullable,
    )
    .with_metadata(HashMap::from([(
        "PARQUET:field_id".to_string(),
        key_field_id.to_string(),
    )]))]))
}

/// A 16-byte key as its `_olake_id` text: 32 lowercase hex digits.
pub fn key_hex(key: &[u8; 16]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(32);
    for byte in key {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    out
}

/// The keys as sorted, distinct `_olake_id` values.
pub(crate) fn sorted_ids(keys: &[[u8; 16]]) -> Vec<String> {
    let mut ids: Vec<String> = keys.iter().map(key_hex).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Encodes the values as a zstd Parquet file.
pub(crate) fn encode_parquet(
    ids: &[String],
    key_field_id: i32,
    nullable: bool,
    zstd_level: i32,
) -> Result<Vec<u8>, DeleteFileError> {
    let schema = equality_delete_arrow_schema(key_field_id, nullable);
    let column: ArrayRef = Arc::new(StringArray::from_iter_values(ids.iter()));
    let batch = RecordBatch::try_new(schema, vec![column]).map_err(DeleteFileError::Batch)?;
    encode_zstd_parquet(&batch, zstd_level)
}

/// The manifest entry of an equality delete file holding `ids` (sorted).
pub(crate) fn delete_file_entry(
    location: &str,
    ids: &[String],
    key_field_id: i32,
    file_size: u64,
    partition: &FilePartition,
) -> Result<DataFile, DeleteFileError> {
    let (first, last) = match (ids.first(), ids.last()) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(DeleteFileError::Nothing { what: "keys" }),
    };
    let count = ids.len() as u64;
    DataFileBuilder::default()
        .content(DataContentType::EqualityDeletes)
        .file_path(location.to_string())
        .file_format(DataFileFormat::Parquet)
        .partition(partition.value.clone())
        .partition_spec_id(partition.spec_id)
        .record_count(count)
        .file_size_in_bytes(file_size)
        .equality_ids(Some(vec![key_field_id]))
        .value_counts(HashMap::from([(key_field_id, count)]))
        .null_value_counts(HashMap::from([(key_field_id, 0)]))
        .lower_bounds(HashMap::from([(key_field_id, Datum::string(first))]))
        .upper_bounds(HashMap::from([(key_field_id, Datum::string(last))]))
        .build()
        .map_err(DeleteFileError::Entry)
}

/// Writes one equality delete file on `_olake_id` (field `key_field_id`
/// of the table, `nullable` as the table's column) for `keys` into the
/// table's data folder, in `partition` (that of the data files holding
/// the keys' rows), and returns its manifest entry, or `None` when there is
/// no key.
pub async fn write_equality_delete_file(
    file_io: &FileIO,
    metadata: &TableMetadata,
    key_field_id: i32,
    nullable: bool,
    keys: &[[u8; 16]],
    partition: &FilePartition,
    zstd_level: i32,
) -> Result<Option<DataFile>, IcebergError> {
    let ids = sorted_ids(keys);
    if ids.is_empty() {
        return Ok(None);
    }
    let location = format!(
        "{}/{}-eq-deletes.parquet",
        data_folder(metadata),
        uuid::Uuid::new_v4()
    );
    let step = format!("writing equality delete file {location}");
    let data_err = |e: DeleteFileError| {
        IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()).with_source(e)
    };
    let bytes = encode_parquet(&ids, key_field_id, nullable, zstd_level).map_err(data_err)?;
    let size = bytes.len() as u64;
    store_file(file_io, &location, bytes, &step).await?;
    let entry =
        delete_file_entry(&location, &ids, key_field_id, size, partition).map_err(data_err)?;
    Ok(Some(entry))
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use bytes::Bytes;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::Compression;
    use parquet::file::reader::FileReader;
    use parquet::file::serialized_reader::SerializedFileReader;

    use super::*;
    use crate::key_index::scan::parse_key;

    fn keys() -> Vec<[u8; 16]> {
        let mut a = [0u8; 16];
        a[0] = 0xab;
        a[15] = 0x01;
        let mut b = [0u8; 16];
        b[0] = 0x0f;
        let c = [0xffu8; 16];
        vec![c, a, b, a, c]
    }

    #[test]
    fn ids_are_lowercase_hex_sorted_and_distinct() {
        let ids = sorted_ids(&keys());
        assert_eq!(
            ids,
            [
                "0f000000000000000000000000000000",
                "ab000000000000000000000000000001",
                "ffffffffffffffffffffffffffffffff",
            ]
        );
        for (id, key) in ids.iter().zip([keys()[2], keys()[1], keys()[0]]) {
            assert_eq!(parse_key(id), Some(key));
        }
    }

    #[test]
    fn parquet_has_the_table_field_id_one_column_and_zstd() {
        let ids = sorted_ids(&keys());
        let bytes = Bytes::from(encode_parquet(&ids, 7, false, 3).unwrap());
        let reader = SerializedFileReader::new(bytes.clone()).unwrap();
        let schema = reader.metadata().file_metadata().schema_descr();
        let columns: Vec<(String, i32, bool)> = schema
            .columns()
            .iter()
            .map(|c| {
                let info = c.self_type().get_basic_info();
                (
                    c.name().to_string(),
                    info.id(),
                    info.repetition() == parquet::basic::Repetition::REQUIRED,
                )
            })
            .collect();
        assert_eq!(columns, [(KEY_COLUMN.to_string(), 7, true)]);
        for column in reader.metadata().row_group(0).columns() {
            assert!(matches!(column.compression(), Compression::ZSTD(_)));
        }
        let values: Vec<String> = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap()
            .flat_map(|b| {
                b.unwrap()
                    .column(0)
                    .as_string::<i32>()
                    .iter()
                    .map(|s| s.unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(values, ids);

        let optional = Bytes::from(encode_parquet(&ids, 9, true, 3).unwrap());
        let reader = SerializedFileReader::new(optional).unwrap();
        let column = reader.metadata().file_metadata().schema_descr().column(0);
        assert_eq!(column.self_type().get_basic_info().id(), 9);
    }

    #[test]
    fn entry_is_an_equality_delete_on_the_key_field_with_bounds() {
        let ids = sorted_ids(&keys());
        let entry = delete_file_entry(
            "s3://b/t/data/e.parquet",
            &ids,
            7,
            321,
            &FilePartition::unpartitioned(0),
        )
        .unwrap();
        assert_eq!(entry.content_type(), DataContentType::EqualityDeletes);
        assert_eq!(entry.equality_ids(), Some(vec![7]));
        assert_eq!(entry.record_count(), 3);
        assert_eq!(entry.file_size_in_bytes(), 321);
        assert_eq!(entry.file_format(), DataFileFormat::Parquet);
        assert_eq!(entry.lower_bounds()[&7], Datum::string(&ids[0]));
        assert_eq!(entry.upper_bounds()[&7], Datum::string(&ids[2]));
        assert_eq!(entry.value_counts()[&7], 3);
        assert_eq!(entry.null_value_counts()[&7], 0);
        assert!(delete_file_entry("x", &[], 7, 1, &FilePartition::unpartitioned(0)).is_err());
    }
}
