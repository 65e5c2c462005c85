//! The key index against tables of the embedded catalog in temporary
//! folders.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, FormatVersion, ManifestFile,
    ManifestList, ManifestListWriter, ManifestWriterBuilder, Operation, Snapshot,
    SnapshotReference, SnapshotRetention, Struct, Summary, MAIN_BRANCH, UNASSIGNED_SEQUENCE_NUMBER,
};
use iceberg::{TableRequirement, TableUpdate};
use topicberg_core::{upsert_olake_id, KeyValue};

use super::*;
use crate::write::schema::{Column, ColumnType};
use crate::Destination;

mod compaction;
mod stamps;

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("tb-keys-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn key_hex(i: i64) -> String {
    upsert_olake_id(&[KeyValue::Long(i)])
}

fn key(i: i64) -> [u8; 16] {
    parse_key(&key_hex(i)).unwrap()
}

struct Fixture {
    _dir: TempDir,
    state: PathBuf,
    destination: Destination,
    table: TableHandle,
}

impl Fixture {
    async fn new(format: FormatVersion) -> Self {
        let dir = TempDir::new();
        let state = dir.0.join("state");
        let destination = Destination::open_embedded(&dir.0.join("catalog"), "default").unwrap();
        let columns = [
            Column::optional("_olake_id", 1, ColumnType::String),
            Column::optional("v", 2, ColumnType::Long),
        ];
        let table = destination
            .ensure_table(&vec!["ns".to_string()], "t", &columns, format)
            .await
            .unwrap();
        Self {
            _dir: dir,
            state,
            destination,
            table,
        }
    }

    /// Writes one data file with these keys (value = key * 10 + `version`).
    async fn data_file(&self, keys: &[i64], version: i64) -> DataFile {
        let batch = RecordBatch::try_new(
            self.table.arrow_schema().clone(),
            vec![
                Arc::new(StringArray::from(
                    keys.iter().map(|k| key_hex(*k)).collect::<Vec<_>>(),
                )) as ArrayRef,
                Arc::new(Int64Array::from(
                    keys.iter().map(|k| k * 10 + version).collect::<Vec<_>>(),
                )),
            ],
        )
        .unwrap();
        self.write_one_file(batch).await
    }

    /// Writes `batch` as one data file of the table.
    async fn write_one_file(&self, batch: RecordBatch) -> DataFile {
        let mut files = self
            .destination
            .write_data_files(&self.table, [batch])
            .await
            .unwrap();
        assert_eq!(files.len(), 1);
        files.pop().unwrap()
    }

    /// Appends one data file with these keys; returns its path and the
    /// committed snapshot's id and parent.
    async fn append(&mut self, keys: &[i64], version: i64) -> (String, i64, Option<i64>) {
        let file = self.data_file(keys, version).await;
        let path = file.file_path().to_string();
        let committed = self
            .destination
            .commit_append(&mut self.table, vec![file], BTreeMap::new())
            .await
            .unwrap();
        (path, committed.snapshot_id, committed.parent_snapshot_id)
    }

    async fn open(&self) -> KeyIndex {
        KeyIndex::open(&self.state, &self.table, self.destination.file_io())
            .await
            .unwrap()
    }

    fn index_dir(&self) -> PathBuf {
        self.state.join(self.table.metadata().uuid().to_string())
    }

    /// Commits, as a row delta would, `data` and deletes of (data file
    /// path, positions): a position delete file on v2, deletion vectors
    /// (one Puffin file) on v3.
    async fn commit_with_deletes(&mut self, data: DataFile, deletes: &[(&str, &[u64])]) {
        let metadata = self.table.metadata().clone();
        let io = self.destination.file_io();
        let location = metadata.location().to_string();
        let snapshot_id = 424242 + metadata.snapshots().count() as i64;
        let v3 = metadata.format_version() == FormatVersion::V3;
        let delete_files = if v3 {
            self.deletion_vectors(deletes).await
        } else {
            vec![self.position_delete_file(deletes).await]
        };
        // Manifests: the new data and deletes, plus the parent's.
        let manifest = |n: &str| {
            let path = format!("{location}/metadata/{snapshot_id}-{n}.avro");
            ManifestWriterBuilder::new(
                io.new_output(path).unwrap(),
                Some(snapshot_id),
                metadata.current_schema().clone(),
                metadata.default_partition_spec().as_ref().clone(),
            )
        };
        let (mut data_writer, mut delete_writer) = if v3 {
            (
                manifest("data").build_v3_data(),
                manifest("deletes").build_v3_deletes(),
            )
        } else {
            (
                manifest("data").build_v2_data(),
                manifest("deletes").build_v2_deletes(),
            )
        };
        data_writer
            .add_file(data, UNASSIGNED_SEQUENCE_NUMBER)
            .unwrap();
        for file in delete_files {
            delete_writer
                .add_file(file, UNASSIGNED_SEQUENCE_NUMBER)
                .unwrap();
        }
        let mut manifests = vec![
            data_writer.write_manifest_file().await.unwrap(),
            delete_writer.write_manifest_file().await.unwrap(),
        ];
        let parent = metadata.current_snapshot().unwrap();
        let list = io
            .new_input(parent.manifest_list())
            .unwrap()
            .read()
            .await
            .unwrap();
        let list = ManifestList::parse_with_version(&list, metadata.format_version()).unwrap();
        manifests.extend(list.entries().iter().cloned());
        self.commit_manifests(snapshot_id, manifests, Operation::Overwrite)
            .await;
    }

    /// Commits a snapshot with these manifests on `main`.
    async fn commit_manifests(
        &mut self,
        snapshot_id: i64,
        manifests: Vec<ManifestFile>,
        operation: Operation,
    ) {
        let metadata = self.table.metadata().clone();
        let io = self.destination.file_io();
        let location = metadata.location().to_string();
        let v3 = metadata.format_version() == FormatVersion::V3;
        let parent = metadata.current_snapshot().unwrap();
        let seq = metadata.last_sequence_number() + 1;
        let list_path = format!("{location}/metadata/snap-{snapshot_id}.avro");
        let writer = io.new_output(&list_path).unwrap().writer().await.unwrap();
        let parent_id = Some(parent.snapshot_id());
        let first_row_id = metadata.next_row_id();
        let mut list = if v3 {
            ManifestListWriter::v3(writer, snapshot_id, parent_id, seq, Some(first_row_id))
        } else {
            ManifestListWriter::v2(writer, snapshot_id, parent_id, seq)
        };
        list.add_manifests(manifests.into_iter()).unwrap();
        let next_row_id = list.next_row_id();
        list.close().await.unwrap();
        let snapshot = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(Some(parent.snapshot_id()))
            .with_sequence_number(seq)
            .with_timestamp_ms(metadata.last_updated_ms() + 1)
            .with_manifest_list(list_path)
            .with_summary(Summary {
                operation,
                additional_properties: HashMap::new(),
            })
            .with_schema_id(metadata.current_schema_id());
        let snapshot = match next_row_id {
            Some(next) if v3 => snapshot
                .with_row_range(first_row_id, next - first_row_id)
                .build(),
            _ => snapshot.build(),
        };
        let updates = vec![
            TableUpdate::AddSnapshot { snapshot },
            TableUpdate::SetSnapshotRef {
                ref_name: MAIN_BRANCH.to_string(),
                reference: SnapshotReference::new(
                    snapshot_id,
                    SnapshotRetention::branch(None, None, None),
                ),
            },
        ];
        let requirements = vec![TableRequirement::UuidMatch {
            uuid: metadata.uuid(),
        }];
        self.destination
            .catalog()
            .commit_table(
                self.table.namespace(),
                self.table.name(),
                &requirements,
                &updates,
            )
            .await
            .unwrap();
        self.destination.refresh(&mut self.table).await.unwrap();
    }

    /// A position delete file with the reserved field ids.
    async fn position_delete_file(&self, deletes: &[(&str, &[u64])]) -> DataFile {
        let metadata = self.table.metadata();
        let field = |name: &str, t: DataType, id: &str| {
            Field::new(name, t, false).with_metadata(HashMap::from([(
                "PARQUET:field_id".to_string(),
                id.to_string(),
            )]))
        };
        let schema = Arc::new(ArrowSchema::new(vec![
            field("file_path", DataType::Utf8, "2147483546"),
            field("pos", DataType::Int64, "2147483545"),
        ]));
        let (paths, positions): (Vec<&str>, Vec<i64>) = deletes
            .iter()
            .flat_map(|(p, ps)| ps.iter().map(move |pos| (*p, *pos as i64)))
            .unzip();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(paths)) as ArrayRef,
                Arc::new(Int64Array::from(positions)),
            ],
        )
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let path = format!(
            "{}/data/{}-deletes.parquet",
            metadata.location(),
            uuid::Uuid::new_v4()
        );
        let size = bytes.len() as u64;
        let io = self.destination.file_io();
        io.new_output(&path)
            .unwrap()
            .write(bytes.into())
            .await
            .unwrap();
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(path)
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .partition_spec_id(metadata.default_partition_spec_id())
            .record_count(batch.num_rows() as u64)
            .file_size_in_bytes(size)
            .build()
            .unwrap()
    }

    /// One Puffin file with a `deletion-vector-v1` blob per data file (its
    /// footer left out: readers of a DV go to the blob's offset).
    async fn deletion_vectors(&self, deletes: &[(&str, &[u64])]) -> Vec<DataFile> {
        let metadata = self.table.metadata();
        let path = format!(
            "{}/data/{}-dv.puffin",
            metadata.location(),
            uuid::Uuid::new_v4()
        );
        let mut bytes = b"PFA1".to_vec();
        let mut blobs = Vec::new();
        for (data_file, positions) in deletes {
            let bitmap: roaring::RoaringTreemap = positions.iter().copied().collect();
            let mut body = vec![0xD1, 0xD3, 0x39, 0x64];
            bitmap.serialize_into(&mut body).unwrap();
            let offset = bytes.len();
            bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
            bytes.extend_from_slice(&body);
            bytes.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
            blobs.push((
                data_file.to_string(),
                offset,
                bytes.len() - offset,
                bitmap.len(),
            ));
        }
        let size = bytes.len() as u64;
        let io = self.destination.file_io();
        io.new_output(&path)
            .unwrap()
            .write(bytes.into())
            .await
            .unwrap();
        blobs
            .into_iter()
            .map(|(data_file, offset, length, cardinality)| {
                DataFileBuilder::default()
                    .content(DataContentType::PositionDeletes)
                    .file_path(path.clone())
                    .file_format(DataFileFormat::Puffin)
                    .partition(Struct::empty())
                    .partition_spec_id(metadata.default_partition_spec_id())
                    .record_count(cardinality)
                    .file_size_in_bytes(size)
                    .referenced_data_file(Some(data_file))
                    .content_offset(Some(offset as i64))
                    .content_size_in_bytes(Some(length as i64))
                    .build()
                    .unwrap()
            })
            .collect()
    }
}

fn at(path: &str, pos: u64) -> Option<RowLocation> {
    Some(RowLocation {
        data_file: path.to_string(),
        pos,
    })
}

/// The locations of keys 0..n.
fn all(index: &KeyIndex, n: i64) -> Vec<Option<RowLocation>> {
    index.lookup((0..n).map(key)).unwrap()
}

#[tokio::test]
async fn builds_looks_up_applies_reopens_and_rebuilds_the_same() {
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let empty = fx.open().await;
    assert_eq!(empty.state(), &IndexState::Rebuilt(RebuildReason::Missing));
    assert_eq!(empty.snapshot_id(), None);
    assert!(empty.is_empty().unwrap());
    drop(empty);

    let (a, s1, _) = fx.append(&(0..100).collect::<Vec<_>>(), 0).await;
    let mut index = fx.open().await;
    assert_eq!(index.state(), &IndexState::UpdatedFrom(1));
    assert_eq!(index.snapshot_id(), Some(s1));
    assert_eq!(index.len().unwrap(), 100);
    let found = index.lookup([key(5), key(1000), key(99)]).unwrap();
    assert_eq!(found, vec![at(&a, 5), None, at(&a, 99)]);

    // A sync: keys 50..60 repeat, 200 is new, 7 is tombstoned.
    let new_keys: Vec<i64> = (50..60).chain([200]).collect();
    let (b, s2, parent) = fx.append(&new_keys, 1).await;
    assert_eq!(parent, Some(s1));
    let upserts: Vec<([u8; 16], &str, u64, Stamp)> = new_keys
        .iter()
        .enumerate()
        .map(|(pos, k)| (key(*k), b.as_str(), pos as u64, Stamp::UNKNOWN))
        .collect();
    let applied = index.apply(s2, parent, &upserts, &[key(7)]).unwrap();
    assert_eq!(applied, Applied::Recorded);
    assert_eq!(index.snapshot_id(), Some(s2));
    let found = index.lookup([key(50), key(7), key(200), key(60)]).unwrap();
    assert_eq!(found, vec![at(&b, 0), None, at(&b, 10), at(&a, 60)]);
    assert_eq!(index.len().unwrap(), 100);
    // A commit on another parent is not recorded.
    let stale = index.apply(77, Some(12345), &upserts, &[]).unwrap();
    assert_eq!(stale, Applied::Stale);
    let before = all(&index, 201);
    drop(index);

    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::Fresh);
    assert_eq!(all(&index, 201), before);
    drop(index);

    // Lost disk: rebuilt from the table. Key 7's tombstone never reached
    // the table (no delete file here), and keys 50..60 are live twice in
    // it: the later rows win and are reported.
    std::fs::remove_dir_all(fx.index_dir()).unwrap();
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::Rebuilt(RebuildReason::Missing));
    assert_eq!(index.build_stats().duplicate_keys, 10);
    assert_eq!(index.build_stats().rows_read, 111);
    let mut expected = before.clone();
    expected[7] = at(&a, 7);
    assert_eq!(all(&index, 201), expected);
}

#[tokio::test]
async fn a_kept_index_merges_off_its_commits_and_is_refreshed_from_the_table() {
    let mut fx = Fixture::new(FormatVersion::V2).await;
    fx.append(&(0..10).collect::<Vec<_>>(), 0).await;
    let mut index = fx.open().await;
    // Our commits, each recorded without merging its run (a follower's
    // round merges between its commits), then refreshed as the next round
    // does: fresh, the merge due started in the background; waited for,
    // none is left.
    for round in 1..5 {
        let keys = [round, 100 + round];
        let (b, s, parent) = fx.append(&keys, round).await;
        let upserts: Vec<([u8; 16], &str, u64, Stamp)> = keys
            .iter()
            .enumerate()
            .map(|(pos, k)| (key(*k), b.as_str(), pos as u64, Stamp::UNKNOWN))
            .collect();
        assert_eq!(
            index.apply(s, parent, &upserts, &[]).unwrap(),
            Applied::Recorded
        );
        assert_eq!(index.lookup([key(round)]).unwrap(), vec![at(&b, 0)]);
        index = index.refresh(&fx.table, &fx.destination).await.unwrap();
        assert_eq!(index.state(), &IndexState::Fresh, "round {round}");
        assert_eq!(index.lookup([key(round)]).unwrap(), vec![at(&b, 0)]);
        index.merge().unwrap();
        assert!(!index.merge_pending(), "round {round}");
    }
    // Another writer commits between two of ours: the kept index replays it.
    let (c, s6, _) = fx.append(&[5, 6], 9).await;
    let index = index.refresh(&fx.table, &fx.destination).await.unwrap();
    assert_eq!(index.state(), &IndexState::UpdatedFrom(1));
    assert_eq!(index.snapshot_id(), Some(s6));
    assert_eq!(
        index.lookup([key(5), key(6)]).unwrap(),
        vec![at(&c, 0), at(&c, 1)]
    );
    // What another process opens from disk is the same.
    let kept = all(&index, 110);
    drop(index);
    let reopened = fx.open().await;
    assert_eq!(reopened.state(), &IndexState::Fresh);
    assert_eq!(all(&reopened, 110), kept);
}

#[tokio::test]
async fn a_crash_before_apply_and_another_writer_are_replayed() {
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let (a, s1, _) = fx.append(&[1, 2, 3], 0).await;
    let index = fx.open().await;
    assert_eq!(index.snapshot_id(), Some(s1));
    drop(index);
    // Our commit landed, then the process died before `apply`; then another
    // writer appended too.
    let (b, _, _) = fx.append(&[3, 4], 1).await;
    let (c, s3, _) = fx.append(&[4, 5], 2).await;
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::UpdatedFrom(2));
    assert_eq!(index.snapshot_id(), Some(s3));
    let found = all(&index, 7);
    assert_eq!(
        found,
        vec![
            None,
            at(&a, 0),
            at(&a, 1),
            at(&b, 0),
            at(&c, 0),
            at(&c, 1),
            None
        ]
    );
    drop(index);
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::Fresh);
}

#[tokio::test]
async fn unknown_snapshots_and_other_tables_mean_rebuild() {
    let mut fx = Fixture::new(FormatVersion::V3).await;
    let (a, s1, _) = fx.append(&[1, 2], 0).await;
    let mut index = fx.open().await;
    // A snapshot this table never had (e.g. rolled back since).
    index
        .apply(999, Some(s1), &[(key(9), &a, 0u64, Stamp::UNKNOWN)], &[])
        .unwrap();
    drop(index);
    let index = fx.open().await;
    assert_eq!(
        index.state(),
        &IndexState::Rebuilt(RebuildReason::UnknownSnapshot(999))
    );
    assert_eq!(all(&index, 3), vec![None, at(&a, 0), at(&a, 1)]);
    assert_eq!(index.lookup([key(9)]).unwrap(), vec![None]);

    // An update that died before its commit left a run no index names: the
    // index is the committed one, and the stray run is deleted.
    let stray = fx.index_dir().join("keys-9999.run");
    std::fs::write(&stray, b"half a run").unwrap();
    drop(index);
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::Fresh);
    assert!(!stray.exists());
    assert_eq!(all(&index, 3), vec![None, at(&a, 0), at(&a, 1)]);
    drop(index);

    // An index file cut short (a disk full, a copy interrupted).
    let index_file = fx.index_dir().join("keys.index");
    let text = std::fs::read_to_string(&index_file).unwrap();
    std::fs::write(&index_file, &text[..text.len() / 2]).unwrap();
    let index = fx.open().await;
    assert!(
        matches!(
            index.state(),
            IndexState::Rebuilt(RebuildReason::Unreadable(_))
        ),
        "{:?}",
        index.state()
    );
    assert_eq!(all(&index, 3), vec![None, at(&a, 0), at(&a, 1)]);
    drop(index);

    // The first layout's file (redb) is replaced by a rebuild.
    std::fs::remove_file(&index_file).unwrap();
    std::fs::write(fx.index_dir().join("keys.redb"), b"redb").unwrap();
    let index = fx.open().await;
    assert!(
        matches!(index.state(), IndexState::Rebuilt(RebuildReason::Unreadable(why)) if why.contains("keys.redb")),
        "{:?}",
        index.state()
    );
    assert!(!fx.index_dir().join("keys.redb").exists());
    assert_eq!(all(&index, 3), vec![None, at(&a, 0), at(&a, 1)]);
    drop(index);

    // Another table's index file in this table's folder.
    let other = Fixture::new(FormatVersion::V2).await;
    let (_, _, _) = {
        let mut other = other;
        let r = other.append(&[7], 0).await;
        drop(other.open().await);
        for item in std::fs::read_dir(fx.index_dir()).unwrap() {
            std::fs::remove_file(item.unwrap().path()).unwrap();
        }
        for item in std::fs::read_dir(other.index_dir()).unwrap() {
            let from = item.unwrap().path();
            std::fs::copy(&from, fx.index_dir().join(from.file_name().unwrap())).unwrap();
        }
        r
    };
    let index = fx.open().await;
    assert!(
        matches!(
            index.state(),
            IndexState::Rebuilt(RebuildReason::OtherTable(_))
        ),
        "{:?}",
        index.state()
    );
    assert_eq!(all(&index, 3), vec![None, at(&a, 0), at(&a, 1)]);
}

/// An upsert commit: key 3 gets a new row, key 4's row is deleted
/// (tombstone), both by deletes on the first file; the index is updated,
/// then rebuilt, to the same content.
async fn deletes_retire_rows_on_update_and_rebuild(format: FormatVersion) {
    let mut fx = Fixture::new(format).await;
    let (a, s1, _) = fx.append(&[0, 1, 2, 3, 4], 0).await;
    let index = fx.open().await;
    assert_eq!(index.snapshot_id(), Some(s1));
    drop(index);
    let data = fx.data_file(&[3, 9], 1).await;
    let b = data.file_path().to_string();
    fx.commit_with_deletes(data, &[(&a, &[3, 4])]).await;
    let expected = vec![
        at(&a, 0),
        at(&a, 1),
        at(&a, 2),
        at(&b, 0),
        None,
        None,
        None,
        None,
        None,
        at(&b, 1),
    ];
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::UpdatedFrom(1));
    assert_eq!(all(&index, 10), expected);
    assert_eq!(index.build_stats().keys_removed, 1);
    drop(index);

    std::fs::remove_dir_all(fx.index_dir()).unwrap();
    let index = fx.open().await;
    assert_eq!(index.state(), &IndexState::Rebuilt(RebuildReason::Missing));
    assert_eq!(all(&index, 10), expected);
    let stats = index.build_stats();
    assert_eq!(stats.deleted_rows_skipped, 2);
    assert_eq!(stats.duplicate_keys, 0);
    assert_eq!(index.len().unwrap(), 5);
}

#[tokio::test]
async fn position_delete_files_retire_rows_on_update_and_rebuild() {
    deletes_retire_rows_on_update_and_rebuild(FormatVersion::V2).await;
}

#[tokio::test]
async fn deletion_vectors_retire_rows_on_update_and_rebuild() {
    deletes_retire_rows_on_update_and_rebuild(FormatVersion::V3).await;
}

/// 100,000 keys: rebuild, reopen, lookups. Prints the index size.
#[tokio::test]
async fn a_hundred_thousand_keys() {
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let n = 100_000i64;
    let (a, _, _) = fx.append(&(0..n).collect::<Vec<_>>(), 0).await;
    let index = fx.open().await;
    assert_eq!(index.len().unwrap(), n as u64);
    let probe: Vec<i64> = (0..n).step_by(997).collect();
    let found = index.lookup(probe.iter().map(|k| key(*k))).unwrap();
    for (k, loc) in probe.iter().zip(found) {
        assert_eq!(loc, at(&a, *k as u64));
    }
    // docs/src/explanation/upsert.md: about 42 bytes per key on disk (40-byte entries, fences).
    let size = index.size_on_disk();
    assert!(size <= 42 * n as u64, "{size} bytes for {n} keys");
    eprintln!("key index of {n} keys: {size} bytes on disk");
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The memory claim: `TB_KEYS` keys (default 2,000,000) in files of
/// 200,000; the peak RSS of a rebuild, an update and 100,000 lookups, and
/// the size on disk. Run with
/// `cargo test -p topicberg-iceberg --lib large_index -- --ignored --nocapture`.
#[tokio::test]
#[ignore]
async fn large_index_memory() {
    let n: i64 = std::env::var("TB_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let mut fx = Fixture::new(FormatVersion::V2).await;
    let chunk = 200_000;
    for first in (0..n).step_by(chunk as usize) {
        fx.append(&(first..(first + chunk).min(n)).collect::<Vec<_>>(), 0)
            .await;
    }
    // Reset the peak RSS to now (Linux: `5` to clear_refs).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = peak_rss_kib();
    let started = std::time::Instant::now();
    let index = fx.open().await;
    let rebuilt = started.elapsed();
    assert_eq!(index.len().unwrap(), n as u64);
    let rebuild_peak = peak_rss_kib();
    eprintln!("after the rebuild: {} bytes", index.size_on_disk());
    let started = std::time::Instant::now();
    let found = index.lookup((0..100_000).map(|i| key(i * 7 % n))).unwrap();
    assert!(found.iter().all(Option::is_some));
    let looked_up = started.elapsed();
    drop(index);
    // An update replaying 200,000 upserts of existing keys.
    fx.append(&(0..chunk.min(n)).collect::<Vec<_>>(), 1).await;
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before_update = peak_rss_kib();
    let started = std::time::Instant::now();
    let index = fx.open().await;
    let updated = started.elapsed();
    assert_eq!(index.state(), &IndexState::UpdatedFrom(1));
    let update_peak = peak_rss_kib();
    let size = index.size_on_disk();
    eprintln!(
        "{n} keys: {size} bytes on disk ({} B/key); rebuild {rebuilt:?}, peak RSS \
         {before} -> {rebuild_peak} KiB; 100,000 lookups {looked_up:?}; update of \
         {chunk} upserts {updated:?}, peak RSS {before_update} -> {update_peak} KiB",
        size / n as u64
    );
}

/// The sync runs tables on spawned tasks: opening must be `Send`.
#[allow(dead_code)]
fn open_is_send(state: &std::path::Path, table: &TableHandle, io: &FileIO) {
    fn send<T: Send>(_: T) {}
    send(KeyIndex::open(state, table, io));
}
