//! The write path on local files, without a catalog: data files (rolling,
//! zstd, field ids), then append snapshots applied with the `iceberg` crate's
//! own metadata builder (which validates sequence numbers and row lineage).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, FormatVersion, ManifestList, ManifestStatus, PartitionSpec, SortOrder, TableMetadata,
    TableMetadataBuilder,
};
use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};

use crate::commit::append::PendingAppend;
use crate::commit::snapshot_commit::PendingCommit;
use crate::write::data_files::{DataFileWriter, WriteOptions};
use crate::write::schema::{iceberg_schema, Column, ColumnType};
use crate::write::storage::{ObjectStorage, StorageConfig};

struct Fixture {
    dir: std::path::PathBuf,
    file_io: FileIO,
}

impl Fixture {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("tb-local-{}", uuid::Uuid::new_v4()));
        Self {
            dir,
            file_io: ObjectStorage::new(StorageConfig::local()).file_io(),
        }
    }

    fn metadata(&self, format: FormatVersion) -> TableMetadata {
        let columns = [
            Column::optional("id", 1, ColumnType::Long),
            Column::optional("text", 2, ColumnType::String),
        ];
        TableMetadataBuilder::new(
            iceberg_schema(&columns).unwrap(),
            PartitionSpec::unpartition_spec(),
            SortOrder::unsorted_order(),
            format!("file://{}/t", self.dir.display()),
            format,
            HashMap::new(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A batch of the fixture's columns, `id` and `text`.
fn batch(writer: &DataFileWriter, ids: Vec<i64>, text: Vec<String>) -> RecordBatch {
    RecordBatch::try_new(
        writer.arrow_schema().clone(),
        vec![
            Arc::new(Int64Array::from(ids)) as ArrayRef,
            Arc::new(StringArray::from(text)),
        ],
    )
    .unwrap()
}

async fn write(
    fx: &Fixture,
    metadata: &TableMetadata,
    first: i64,
    batches: i64,
    options: &WriteOptions,
) -> Vec<DataFile> {
    let mut writer = DataFileWriter::new(fx.file_io.clone(), metadata, options)
        .await
        .unwrap();
    for b in 0..batches {
        let ids: Vec<i64> = (0..2000).map(|i| first + b * 2000 + i).collect();
        let text: Vec<String> = ids
            .iter()
            .map(|i| format!("row {i} {}", i * 7919))
            .collect();
        writer.write(&batch(&writer, ids, text)).await.unwrap();
    }
    assert_eq!(writer.rows(), batches as u64 * 2000);
    writer.finish().await.unwrap()
}

#[tokio::test]
async fn a_column_unique_in_the_first_rows_is_written_without_a_dictionary_and_a_repeated_one_with()
{
    let fx = Fixture::new();
    let metadata = fx.metadata(FormatVersion::V2);
    let mut writer = DataFileWriter::new(fx.file_io.clone(), &metadata, &WriteOptions::default())
        .await
        .unwrap();
    let ids: Vec<i64> = (0..5_000).collect();
    let text: Vec<String> = ids.iter().map(|i| format!("tier {}", i % 7)).collect();
    writer.write(&batch(&writer, ids, text)).await.unwrap();
    let files = writer.finish().await.unwrap();
    let path = files[0].file_path().strip_prefix("file://").unwrap();
    let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let group = reader.metadata().row_group(0);
    assert!(
        group.column(0).dictionary_page_offset().is_none(),
        "the unique `id` got a dictionary"
    );
    assert!(
        group.column(1).dictionary_page_offset().is_some(),
        "the repeated `text` lost its dictionary"
    );
}

/// Applies a built append to the metadata, as a catalog would.
async fn commit(
    fx: &Fixture,
    metadata: &TableMetadata,
    pending: &mut PendingAppend,
    attempt: u32,
) -> TableMetadata {
    let built = pending.build(&fx.file_io, metadata, attempt).await.unwrap();
    let mut builder = TableMetadataBuilder::new_from_metadata(metadata.clone(), None);
    for update in built.updates {
        builder = update.apply(builder).unwrap();
    }
    builder.build().unwrap().metadata
}

#[tokio::test]
async fn data_files_roll_at_the_target_size_with_zstd_and_field_ids() {
    let fx = Fixture::new();
    let metadata = fx.metadata(FormatVersion::V2);
    let options = WriteOptions {
        target_file_size: 16 * 1024,
        row_group_size: 8 * 1024,
        zstd_level: 3,
        ..WriteOptions::default()
    };
    let files = write(&fx, &metadata, 0, 6, &options).await;
    assert!(files.len() >= 3, "{} files", files.len());
    let records: u64 = files.iter().map(|f| f.record_count()).sum();
    assert_eq!(records, 12_000);
    let first_name = files[0].file_path().rsplit('/').next().unwrap().to_string();
    let prefix = first_name
        .strip_suffix("-00000.parquet")
        .expect(&first_name);
    assert_eq!(prefix.len(), 36, "a uuid: {prefix}");
    for (n, file) in files.iter().enumerate() {
        assert!(
            file.file_path()
                .ends_with(&format!("/t/data/{prefix}-{n:05}.parquet")),
            "{}",
            file.file_path()
        );
        let path = file.file_path().strip_prefix("file://").unwrap();
        assert_eq!(
            std::fs::metadata(path).unwrap().len(),
            file.file_size_in_bytes()
        );
        let reader = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
        let meta = reader.metadata();
        assert_eq!(meta.file_metadata().num_rows() as u64, file.record_count());
        let column = meta.row_group(0).column(1);
        assert!(matches!(column.compression(), Compression::ZSTD(_)));
        let ids: Vec<i32> = meta
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.self_type().get_basic_info().id())
            .collect();
        assert_eq!(ids, vec![1, 2]);
        assert_eq!(file.null_value_counts()[&2], 0);
        assert!(file.lower_bounds()[&1] <= file.upper_bounds()[&1]);
    }
}

#[tokio::test]
async fn appends_chain_inherit_sequence_numbers_and_row_ids_and_rebase() {
    let fx = Fixture::new();
    let v0 = fx.metadata(FormatVersion::V3);
    let options = WriteOptions::default();
    let extra = BTreeMap::from([("topicberg.offsets".to_string(), "{}".to_string())]);

    let files = write(&fx, &v0, 0, 2, &options).await;
    let mut first = PendingAppend::new(&v0, files, extra.clone());
    let v1 = commit(&fx, &v0, &mut first, 1).await;
    assert_eq!(v1.next_row_id(), 4000);

    // Built on v1, but another append lands first (v2): rebuilt on v2.
    let late_files = write(&fx, &v1, 4000, 1, &options).await;
    let mut late = PendingAppend::new(&v1, late_files, extra.clone());
    let stale = late.build(&fx.file_io, &v1, 1).await.unwrap();
    let commit_id_before = late.commit_id.clone();
    let files = write(&fx, &v1, 6000, 1, &options).await;
    let mut other = PendingAppend::new(&v1, files, extra.clone());
    let v2 = commit(&fx, &v1, &mut other, 1).await;
    assert_eq!(stale.snapshot.parent_snapshot_id(), Some(first.snapshot_id));
    let v3 = commit(&fx, &v2, &mut late, 2).await;
    assert_eq!(late.commit_id, commit_id_before);

    let current = v3.current_snapshot().unwrap();
    assert_eq!(current.snapshot_id(), late.snapshot_id);
    assert_eq!(current.parent_snapshot_id(), Some(other.snapshot_id));
    assert_eq!(current.sequence_number(), 3);
    assert_eq!(current.first_row_id(), Some(6000));
    assert_eq!(v3.next_row_id(), 8000);
    let summary = &current.summary().additional_properties;
    assert_eq!(summary["total-records"], "8000");
    assert_eq!(summary["added-records"], "2000");
    assert_eq!(summary["total-data-files"], "3");

    let list = fx
        .file_io
        .new_input(current.manifest_list())
        .unwrap()
        .read()
        .await
        .unwrap();
    let manifests = ManifestList::parse_with_version(&list, FormatVersion::V3).unwrap();
    let seqs: Vec<i64> = manifests
        .entries()
        .iter()
        .map(|m| m.sequence_number)
        .collect();
    assert_eq!(seqs, vec![3, 2, 1], "new manifest first, parents carried");
    assert!(
        manifests.entries()[0]
            .manifest_path
            .ends_with(&format!("/t/metadata/{}-m0.avro", late.commit_id)),
        "the manifest written for the first attempt is reused"
    );
    let row_ids: Vec<Option<u64>> = manifests.entries().iter().map(|m| m.first_row_id).collect();
    assert_eq!(row_ids, vec![Some(6000), Some(4000), Some(0)]);
    for (m, seq) in manifests.entries().iter().zip([3, 2, 1]) {
        let manifest = m.load_manifest(&fx.file_io).await.unwrap();
        for entry in manifest.entries() {
            assert_eq!(entry.status(), ManifestStatus::Added);
            assert_eq!(entry.sequence_number(), Some(seq));
        }
    }
}

/// The first row id of each live data file of the current snapshot, by
/// path, with its data sequence number (inherited or written out).
async fn files_of(fx: &Fixture, metadata: &TableMetadata) -> BTreeMap<String, (i64, i64)> {
    let current = metadata.current_snapshot().unwrap();
    let mut out = BTreeMap::new();
    for manifest in crate::table_metadata::manifests_of(&fx.file_io, metadata, current)
        .await
        .unwrap()
    {
        let entries = crate::commit::manifest_entries::live_entries_of(&fx.file_io, &manifest);
        for entry in entries.await.unwrap() {
            let row_id = entry.first_row_id.unwrap();
            out.insert(entry.path().to_string(), (entry.sequence_number, row_id));
        }
    }
    out
}

#[tokio::test]
async fn the_append_that_would_carry_merge_at_small_manifests_merges_them_keeping_sequence_numbers_and_row_ids(
) {
    use crate::commit::manifest_merge::MERGE_AT;
    let fx = Fixture::new();
    let mut metadata = fx.metadata(FormatVersion::V3);
    let extra = BTreeMap::from([("topicberg.offsets".to_string(), "{}".to_string())]);
    let mut before_merge = BTreeMap::new();
    for n in 0..=MERGE_AT as i64 {
        let files = write(&fx, &metadata, n * 2000, 1, &WriteOptions::default()).await;
        let mut append = PendingAppend::new(&metadata, files, extra.clone());
        let next = commit(&fx, &metadata, &mut append, 1).await;
        if n == MERGE_AT as i64 - 1 {
            before_merge = files_of(&fx, &next).await;
        }
        metadata = next;
    }
    let current = metadata.current_snapshot().unwrap();
    let manifests = crate::table_metadata::manifests_of(&fx.file_io, &metadata, current)
        .await
        .unwrap();
    // The last append's own manifest, then one for the MERGE_AT it carried.
    assert_eq!(manifests.len(), 2, "{manifests:?}");
    assert_eq!(manifests[1].existing_files_count, Some(MERGE_AT as u32));
    assert_eq!(manifests[1].added_snapshot_id, current.snapshot_id());
    // Every file carried keeps its data sequence number and row ids.
    let after = files_of(&fx, &metadata).await;
    assert_eq!(after.len(), MERGE_AT + 1);
    for (path, was) in &before_merge {
        assert_eq!(after.get(path), Some(was), "{path}");
    }
    let summary = &current.summary().additional_properties;
    assert_eq!(summary["total-data-files"], (MERGE_AT + 1).to_string());
    assert_eq!(summary["added-data-files"], "1");
    assert_eq!(current.sequence_number(), MERGE_AT as i64 + 1);
}
