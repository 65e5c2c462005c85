//! Position delete files (format v2): Parquet files of `(file_path, pos)`
//! rows, each marking the row at position `pos` (0-based) of the data file
//! `file_path` as deleted.
//!
//! Per the Iceberg spec: the columns carry the reserved field ids
//! 2147483546 (`file_path`, required string) and 2147483545 (`pos`,
//! required long); rows are sorted by `file_path`, then `pos`; the manifest
//! entry is `content = 1` (position deletes) with full (untruncated)
//! `file_path` bounds so that readers can skip the file for data files
//! outside them, and `referenced_data_file` when every row names the same
//! data file.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, TableMetadata,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::deletes::partitions::FilePartition;
use crate::deletes::DeleteFileError;
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};

/// The reserved field id of a position delete file's `file_path` column.
pub const FILE_PATH_FIELD_ID: i32 = 2_147_483_546;
/// The reserved field id of a position delete file's `pos` column (also the
/// `_pos` metadata column a deletion vector is computed for).
pub const POS_FIELD_ID: i32 = 2_147_483_545;

/// The Arrow schema of a position delete file: `file_path` and `pos`,
/// required, with their reserved field ids in `PARQUET:field_id`.
pub fn position_delete_arrow_schema() -> ArrowSchemaRef {
    let field = |name: &str, data_type: DataType, id: i32| {
        Field::new(name, data_type, false).with_metadata(HashMap::from([(
            "PARQUET:field_id".to_string(),
            id.to_string(),
        )]))
    };
    Arc::new(ArrowSchema::new(vec![
        field("file_path", DataType::Utf8, FILE_PATH_FIELD_ID),
        field("pos", DataType::Int64, POS_FIELD_ID),
    ]))
}

/// The rows of a position delete file, sorted and without duplicates, and
/// the metrics of its manifest entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortedDeletes {
    pub(crate) paths: Vec<String>,
    pub(crate) positions: Vec<i64>,
}

impl SortedDeletes {
    /// Sorts `deletes` by data file path (bytewise), then position, merging
    /// repeated paths and dropping repeated positions. A position past
    /// `i64::MAX` is an error.
    pub(crate) fn new(deletes: &[(String, Vec<u64>)]) -> Result<Self, DeleteFileError> {
        let mut by_path: Vec<(&str, Vec<i64>)> = Vec::new();
        let mut sorted: Vec<&(String, Vec<u64>)> = deletes.iter().collect();
        sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        for (path, positions) in sorted {
            if by_path.last().map(|(p, _)| *p) != Some(path.as_str()) {
                by_path.push((path.as_str(), Vec::new()));
            }
            let slot = &mut by_path.last_mut().expect("pushed above").1;
            for &pos in positions {
                let pos = i64::try_from(pos).map_err(|_| DeleteFileError::Position {
                    position: pos,
                    path: path.clone(),
                })?;
                slot.push(pos);
            }
        }
        let mut out = Self {
            paths: Vec::new(),
            positions: Vec::new(),
        };
        for (path, mut positions) in by_path {
            positions.sort_unstable();
            positions.dedup();
            for pos in positions {
                out.paths.push(path.to_string());
                out.positions.push(pos);
            }
        }
        Ok(out)
    }

    pub(crate) fn len(&self) -> usize {
        self.positions.len()
    }

    /// The data files referenced, in order, each once.
    fn distinct_paths(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.paths.iter().map(String::as_str).collect();
        out.dedup();
        out
    }

    fn batch(&self) -> Result<RecordBatch, DeleteFileError> {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(self.paths.iter())),
            Arc::new(Int64Array::from(self.positions.clone())),
        ];
        RecordBatch::try_new(position_delete_arrow_schema(), columns)
            .map_err(DeleteFileError::Batch)
    }
}

/// Encodes the rows as a zstd Parquet file.
pub(crate) fn encode_parquet(
    rows: &SortedDeletes,
    zstd_level: i32,
) -> Result<Vec<u8>, DeleteFileError> {
    encode_zstd_parquet(&rows.batch()?, zstd_level)
}

/// One record batch as a whole zstd Parquet file in memory (delete files
/// are small); shared by the position and equality delete writers.
pub(crate) fn encode_zstd_parquet(
    batch: &RecordBatch,
    zstd_level: i32,
) -> Result<Vec<u8>, DeleteFileError> {
    let level = ZstdLevel::try_new(zstd_level).map_err(DeleteFileError::ZstdLevel)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(level))
        .build();
    let mut writer = ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props))
        .map_err(DeleteFileError::Writer)?;
    writer.write(batch).map_err(DeleteFileError::Encode)?;
    writer.into_inner().map_err(DeleteFileError::Close)
}

/// Stores a finished delete file at `location`; errors are of kind
/// `Storage` under `step`.
pub(crate) async fn store_file(
    file_io: &FileIO,
    location: &str,
    bytes: Vec<u8>,
    step: &str,
) -> Result<(), IcebergError> {
    file_io
        .new_output(location)
        .map_err(|e| from_iceberg(step, e, IcebergErrorKind::Storage))?
        .write(bytes.into())
        .await
        .map_err(|e| from_iceberg(step, e, IcebergErrorKind::Storage))
}

/// Where the table's data files go: `write.data.path`, else
/// `<location>/data`.
pub(crate) fn data_folder(metadata: &TableMetadata) -> String {
    metadata
        .properties()
        .get("write.data.path")
        .map(|p| p.trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("{}/data", metadata.location().trim_end_matches('/')))
}

/// The manifest entry of a position delete file holding `rows`.
pub(crate) fn delete_file_entry(
    location: &str,
    rows: &SortedDeletes,
    file_size: u64,
    partition: &FilePartition,
) -> Result<DataFile, DeleteFileError> {
    let paths = rows.distinct_paths();
    let (first_path, last_path) = match (paths.first(), paths.last()) {
        (Some(a), Some(b)) => (*a, *b),
        _ => return Err(DeleteFileError::Nothing { what: "positions" }),
    };
    let min_pos = *rows.positions.iter().min().expect("not empty");
    let max_pos = *rows.positions.iter().max().expect("not empty");
    let count = rows.len() as u64;
    DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(location.to_string())
        .file_format(DataFileFormat::Parquet)
        .partition(partition.value.clone())
        .partition_spec_id(partition.spec_id)
        .record_count(count)
        .file_size_in_bytes(file_size)
        .value_counts(HashMap::from([
            (FILE_PATH_FIELD_ID, count),
            (POS_FIELD_ID, count),
        ]))
        .null_value_counts(HashMap::from([(FILE_PATH_FIELD_ID, 0), (POS_FIELD_ID, 0)]))
        .lower_bounds(HashMap::from([
            (FILE_PATH_FIELD_ID, Datum::string(first_path)),
            (POS_FIELD_ID, Datum::long(min_pos)),
        ]))
        .upper_bounds(HashMap::from([
            (FILE_PATH_FIELD_ID, Datum::string(last_path)),
            (POS_FIELD_ID, Datum::long(max_pos)),
        ]))
        .referenced_data_file((paths.len() == 1).then(|| first_path.to_string()))
        .build()
        .map_err(DeleteFileError::Entry)
}

/// Writes one position delete file for `deletes` (data file path ->
/// positions, in any order; every data file in `partition`) into the
/// table's data folder and returns its manifest entry, or `None` when
/// there is no position to delete.
pub async fn write_position_delete_file(
    file_io: &FileIO,
    metadata: &TableMetadata,
    deletes: &[(String, Vec<u64>)],
    partition: &FilePartition,
    zstd_level: i32,
) -> Result<Option<DataFile>, IcebergError> {
    let location = format!(
        "{}/{}-deletes.parquet",
        data_folder(metadata),
        uuid::Uuid::new_v4()
    );
    let step = format!("writing position delete file {location}");
    let data_err = |e: DeleteFileError| {
        IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()).with_source(e)
    };
    let rows = SortedDeletes::new(deletes).map_err(data_err)?;
    if rows.len() == 0 {
        return Ok(None);
    }
    let bytes = encode_parquet(&rows, zstd_level).map_err(data_err)?;
    let size = bytes.len() as u64;
    store_file(file_io, &location, bytes, &step).await?;
    let entry = delete_file_entry(&location, &rows, size, partition).map_err(data_err)?;
    Ok(Some(entry))
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use bytes::Bytes;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::reader::FileReader;
    use parquet::file::serialized_reader::SerializedFileReader;

    use super::*;

    fn sample() -> Vec<(String, Vec<u64>)> {
        vec![
            ("s3://b/t/data/b.parquet".to_string(), vec![9, 3, 3, 0]),
            ("s3://b/t/data/a.parquet".to_string(), vec![7]),
            ("s3://b/t/data/b.parquet".to_string(), vec![1]),
        ]
    }

    #[test]
    fn rows_are_sorted_by_path_then_position_without_repeats() {
        let rows = SortedDeletes::new(&sample()).unwrap();
        assert_eq!(
            rows.paths,
            [
                "s3://b/t/data/a.parquet",
                "s3://b/t/data/b.parquet",
                "s3://b/t/data/b.parquet",
                "s3://b/t/data/b.parquet",
                "s3://b/t/data/b.parquet"
            ]
        );
        assert_eq!(rows.positions, [7, 0, 1, 3, 9]);
        let too_far = [("x".to_string(), vec![u64::MAX])];
        assert!(SortedDeletes::new(&too_far)
            .unwrap_err()
            .to_string()
            .contains("2^63"));
    }

    #[test]
    fn parquet_has_the_reserved_field_ids_required_columns_and_zstd() {
        let rows = SortedDeletes::new(&sample()).unwrap();
        let bytes = Bytes::from(encode_parquet(&rows, 3).unwrap());

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
        assert_eq!(
            columns,
            [
                ("file_path".to_string(), FILE_PATH_FIELD_ID, true),
                ("pos".to_string(), POS_FIELD_ID, true)
            ]
        );
        let row_group = reader.metadata().row_group(0);
        for column in row_group.columns() {
            assert!(matches!(column.compression(), Compression::ZSTD(_)));
        }

        let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        let paths: Vec<String> = batches
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_string::<i32>()
                    .iter()
                    .map(|s| s.unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        let positions: Vec<i64> = batches
            .iter()
            .flat_map(|b| b.column(1).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(paths, rows.paths);
        assert_eq!(positions, rows.positions);
    }

    #[test]
    fn entry_has_bounds_and_a_referenced_file_only_when_single() {
        let rows = SortedDeletes::new(&sample()).unwrap();
        let entry = delete_file_entry(
            "s3://b/t/data/d.parquet",
            &rows,
            123,
            &FilePartition::unpartitioned(0),
        )
        .unwrap();
        assert_eq!(entry.content_type(), DataContentType::PositionDeletes);
        assert_eq!(entry.record_count(), 5);
        assert_eq!(entry.file_size_in_bytes(), 123);
        assert_eq!(
            entry.lower_bounds()[&FILE_PATH_FIELD_ID],
            Datum::string("s3://b/t/data/a.parquet")
        );
        assert_eq!(
            entry.upper_bounds()[&FILE_PATH_FIELD_ID],
            Datum::string("s3://b/t/data/b.parquet")
        );
        assert_eq!(entry.lower_bounds()[&POS_FIELD_ID], Datum::long(0));
        assert_eq!(entry.upper_bounds()[&POS_FIELD_ID], Datum::long(9));
        assert_eq!(entry.referenced_data_file(), None);

        let single = SortedDeletes::new(&sample()[..1]).unwrap();
        let entry = delete_file_entry(
            "s3://b/t/data/e.parquet",
            &single,
            1,
            &FilePartition::unpartitioned(0),
        )
        .unwrap();
        assert_eq!(
            entry.referenced_data_file().as_deref(),
            Some("s3://b/t/data/b.parquet")
        );
        assert_eq!(entry.record_count(), 3);
    }
}
