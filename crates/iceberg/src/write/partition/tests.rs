//! Spec building, batch splitting and partitioned data files (local files).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use iceberg::spec::{
    Datum, FormatVersion, Literal, PartitionSpec, SortOrder, TableMetadata, TableMetadataBuilder,
    Transform,
};
use topicberg_core::config::{PartitionField, PartitionTransform};

use super::*;
use crate::write::data_files::{DataFileWriter, WriteOptions};
use crate::write::schema::{iceberg_schema, ColumnType};
use crate::write::storage::{ObjectStorage, StorageConfig};

fn columns() -> Vec<Column> {
    vec![
        Column::optional("id", 1, ColumnType::Long),
        Column::optional("region", 2, ColumnType::String),
        Column::optional("_kafka_timestamp", 3, ColumnType::TimestampTz),
    ]
}

fn field(transform: PartitionTransform, column: &str) -> PartitionField {
    PartitionField {
        transform,
        column: column.into(),
    }
}

fn spec(fields: &[PartitionField]) -> Result<UnboundPartitionSpec, IcebergError> {
    let schema = Arc::new(iceberg_schema(&columns()).unwrap());
    partition_spec("ns.t", &schema, &columns(), fields)
}

#[test]
fn the_spec_has_field_ids_from_1000_and_the_transforms() {
    let spec = spec(&[
        field(PartitionTransform::Day, "_kafka_timestamp"),
        field(PartitionTransform::Bucket(16), "id"),
        field(PartitionTransform::Truncate(2), "region"),
    ])
    .unwrap();
    let fields = spec.fields();
    let ids: Vec<Option<i32>> = fields.iter().map(|f| f.field_id).collect();
    assert_eq!(ids, [Some(1000), Some(1001), Some(1002)]);
    let shape: Vec<(i32, &str, Transform)> = fields
        .iter()
        .map(|f| (f.source_id, f.name.as_str(), f.transform))
        .collect();
    assert_eq!(
        shape,
        [
            (3, "_kafka_timestamp_day", Transform::Day),
            (1, "id_bucket", Transform::Bucket(16)),
            (2, "region_trunc", Transform::Truncate(2)),
        ]
    );
    assert!(
        self::spec(&[]).unwrap().fields().is_empty(),
        "unpartitioned"
    );
}

#[test]
fn a_missing_column_or_a_wrong_type_names_the_column_and_the_fix() {
    let err = spec(&[field(PartitionTransform::Identity, "country")]).unwrap_err();
    assert_eq!(err.kind, IcebergErrorKind::Config);
    assert!(
        err.detail.contains("identity(country)")
            && err.detail.contains("no column \"country\"")
            && err.step.contains("ns.t"),
        "{err}"
    );
    let err = spec(&[field(PartitionTransform::Hour, "region")]).unwrap_err();
    assert!(
        err.detail.contains("\"region\" is String") && err.detail.contains("timestamp"),
        "{err}"
    );
}

fn metadata(dir: &std::path::Path, fields: &[PartitionField]) -> TableMetadata {
    sorted_metadata(dir, fields, SortOrder::unsorted_order())
}

fn sorted_metadata(
    dir: &std::path::Path,
    fields: &[PartitionField],
    order: SortOrder,
) -> TableMetadata {
    let schema = iceberg_schema(&columns()).unwrap();
    let unbound = spec(fields).unwrap();
    TableMetadataBuilder::new(
        schema,
        unbound,
        order,
        format!("file://{}/t", dir.display()),
        FormatVersion::V2,
        HashMap::new(),
    )
    .unwrap()
    .build()
    .unwrap()
    .metadata
}

const DAY_US: i64 = 86_400_000_000;

fn batch(
    schema: &arrow_schema::SchemaRef,
    ids: &[i64],
    regions: &[&str],
    days: &[i64],
) -> RecordBatch {
    let ts: Vec<i64> = days.iter().map(|d| d * DAY_US + 3_600_000_000).collect();
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())) as ArrayRef,
            Arc::new(StringArray::from(regions.to_vec())),
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("+00:00")),
        ],
    )
    .unwrap()
}

#[test]
fn interleaved_rows_are_grouped_and_grouped_rows_are_not_copied() {
    let dir = std::env::temp_dir();
    let meta = metadata(&dir, &[field(PartitionTransform::Identity, "region")]);
    let schema = meta.current_schema().clone();
    let splitter = PartitionSplitter::new(meta.default_partition_spec(), &schema)
        .unwrap()
        .expect("partitioned");
    let arrow = crate::write::schema::arrow_schema(&schema).unwrap();
    let mixed = batch(
        &arrow,
        &[1, 2, 3, 4, 5],
        &["eu", "us", "eu", "us", "ap"],
        &[0; 5],
    );
    let parts = splitter.split(&mixed).unwrap();
    let mut seen: Vec<(String, Vec<i64>)> = parts
        .iter()
        .map(|(key, rows)| {
            let region = match key.fields().first() {
                Some(Some(Literal::Primitive(p))) => format!("{p:?}"),
                other => panic!("{other:?}"),
            };
            let ids = rows.column(0).as_primitive::<Int64Type>().values().to_vec();
            (region, ids)
        })
        .collect();
    seen.sort();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen.iter().map(|(_, ids)| ids.len()).sum::<usize>(), 5);
    assert!(
        seen.iter()
            .any(|(r, ids)| r.contains("eu") && ids == &[1, 3]),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|(r, ids)| r.contains("us") && ids == &[2, 4]),
        "{seen:?}"
    );

    // One partition: the batch itself, sharing its buffers.
    let one = batch(&arrow, &[7, 8], &["eu", "eu"], &[0, 0]);
    let parts = splitter.split(&one).unwrap();
    assert_eq!(parts.len(), 1);
    assert!(parts[0]
        .1
        .column(0)
        .to_data()
        .ptr_eq(&one.column(0).to_data()));
}

#[tokio::test]
async fn files_are_written_per_partition_with_values_and_bounds() {
    let dir = std::env::temp_dir().join(format!("tb-part-{}", uuid::Uuid::new_v4()));
    let meta = metadata(
        &dir,
        &[
            field(PartitionTransform::Day, "_kafka_timestamp"),
            field(PartitionTransform::Identity, "region"),
        ],
    );
    let file_io = ObjectStorage::new(StorageConfig::local()).file_io();
    let options = WriteOptions {
        max_open_files: 2,
        ..WriteOptions::default()
    };
    let mut writer = DataFileWriter::new(file_io, &meta, &options).await.unwrap();
    let arrow = writer.arrow_schema().clone();
    // Three partitions, interleaved: (day 0, eu), (day 1, eu), (day 0, us).
    let first = batch(
        &arrow,
        &[1, 2, 3, 4],
        &["eu", "eu", "us", "eu"],
        &[0, 1, 0, 0],
    );
    writer.write(&first).await.unwrap();
    // (day 0, us) again: still open or reopened, never lost.
    let second = batch(&arrow, &[5], &["us"], &[0]);
    writer.write(&second).await.unwrap();
    assert_eq!(writer.rows(), 5);
    let files = writer.finish().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let mut by_partition: HashMap<String, (u64, Datum, Datum)> = HashMap::new();
    for file in &files {
        assert_eq!(crate::table_metadata::spec_id(file), 0);
        let key = format!("{:?}", file.partition());
        let entry = by_partition.entry(key).or_insert((
            0,
            file.lower_bounds()[&1].clone(),
            file.upper_bounds()[&1].clone(),
        ));
        entry.0 += file.record_count();
        assert!(
            file.file_path().contains("/t/data/_kafka_timestamp_day="),
            "partition path: {}",
            file.file_path()
        );
    }
    assert_eq!(by_partition.len(), 3, "{by_partition:?}");
    let counts: u64 = by_partition.values().map(|(n, _, _)| n).sum();
    assert_eq!(counts, 5);
    // (day 0, eu) holds ids 1 and 4: its bounds are its own rows'.
    let (n, lower, upper) = by_partition
        .iter()
        .find(|(k, _)| k.contains("eu") && k.contains("Int(0)"))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("{by_partition:?}"));
    assert_eq!((n, lower, upper), (2, Datum::long(1), Datum::long(4)));
}

#[test]
fn transforms_map_one_to_one() {
    for (ours, theirs) in [
        (PartitionTransform::Identity, Transform::Identity),
        (PartitionTransform::Bucket(16), Transform::Bucket(16)),
        (PartitionTransform::Truncate(4), Transform::Truncate(4)),
        (PartitionTransform::Year, Transform::Year),
        (PartitionTransform::Month, Transform::Month),
        (PartitionTransform::Day, Transform::Day),
        (PartitionTransform::Hour, Transform::Hour),
    ] {
        assert_eq!(iceberg_transform(ours), theirs);
    }
    let unpartitioned = Arc::new(PartitionSpec::unpartition_spec());
    let schema = Arc::new(iceberg_schema(&columns()).unwrap());
    assert!(PartitionSplitter::new(&unpartitioned, &schema)
        .unwrap()
        .is_none());
}

/// The ids of a local data file, in its row order.
fn ids_in(file: &iceberg::spec::DataFile) -> Vec<i64> {
    let path = file.file_path().strip_prefix("file://").unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(path).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut ids = Vec::new();
    for batch in reader {
        ids.extend(
            batch
                .unwrap()
                .column(0)
                .as_primitive::<Int64Type>()
                .values(),
        );
    }
    ids
}

/// Writes two batches of ids over regions eu/us into a table partitioned
/// by region and sorted by `id desc`; the files, ids per file.
async fn write_sorted(sort_buffer_size: usize) -> Vec<(iceberg::spec::DataFile, Vec<i64>)> {
    let dir = std::env::temp_dir().join(format!("tb-sort-{}", uuid::Uuid::new_v4()));
    let schema = Arc::new(iceberg_schema(&columns()).unwrap());
    let keys = vec!["id desc".parse().unwrap()];
    let order = crate::write::sort::sort_order("ns.t", &schema, &columns(), &keys).unwrap();
    let meta = sorted_metadata(
        &dir,
        &[field(PartitionTransform::Identity, "region")],
        order,
    );
    let file_io = ObjectStorage::new(StorageConfig::local()).file_io();
    let options = WriteOptions {
        sort_buffer_size,
        ..WriteOptions::default()
    };
    let mut writer = DataFileWriter::new(file_io, &meta, &options).await.unwrap();
    let arrow = writer.arrow_schema().clone();
    let first = batch(&arrow, &[3, 1, 5, 2], &["eu", "us", "eu", "us"], &[0; 4]);
    writer.write(&first).await.unwrap();
    let second = batch(&arrow, &[4, 6, 0], &["eu", "us", "eu"], &[0; 3]);
    writer.write(&second).await.unwrap();
    let files = writer.finish().await.unwrap();
    let out = files
        .into_iter()
        .map(|f| {
            let ids = ids_in(&f);
            (f, ids)
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[tokio::test]
async fn sorted_tables_write_each_partition_file_in_order_marked_with_the_order() {
    let mut files = write_sorted(crate::write::data_files::DEFAULT_SORT_BUFFER).await;
    files.sort_by_key(|(f, _)| format!("{:?}", f.partition()));
    let ids: Vec<Vec<i64>> = files.iter().map(|(_, ids)| ids.clone()).collect();
    // One file per partition, rows of both batches in `id desc` order.
    assert_eq!(ids, [vec![5, 4, 3, 0], vec![6, 2, 1]]);
    for (file, _) in &files {
        assert_eq!(file.sort_order_id(), Some(1));
        assert_eq!(crate::table_metadata::spec_id(file), 0);
    }
}

#[tokio::test]
async fn a_full_sort_buffer_writes_the_largest_partition_as_its_own_sorted_file() {
    // A buffer of one byte: every batch's rows are written at once, one
    // sorted file per batch and partition.
    let files = write_sorted(1).await;
    let mut ids: Vec<Vec<i64>> = files.iter().map(|(_, ids)| ids.clone()).collect();
    ids.sort();
    assert_eq!(ids, [vec![2, 1], vec![4, 0], vec![5, 3], vec![6]]);
    assert!(files.iter().all(|(f, _)| f.sort_order_id() == Some(1)));
}
