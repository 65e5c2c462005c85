//! File sets: data files one worker of a job wrote and another commits.
//!
//! When several workers share a job's partitions, each table has one
//! committer (the worker the consumer group gave the table topic's
//! partition 0). The other workers write their data files as usual, then
//! publish a [`FileSet`] naming those files and the offset range of each
//! partition they hold, as a small Avro file (one record holding the set
//! as JSON) `metadata/topicberg-pending-<ms>-<uuid>.avro` in the table's
//! location: object stores that guard a table's location (S3 table
//! buckets, SeaweedFS's) take Avro files in `metadata/` as they take
//! manifests, and refuse other names there. The committer lists them
//! each round and commits the sets that continue the table's offsets in its
//! own snapshot; the table's offsets check stays the fence, so a set whose
//! range another commit already holds can never land.
//!
//! An upsert table's writers hand over *staged* sets: their data files
//! hold the round's winning rows per key (and the set its winning
//! tombstones), which the committer reads into its own round, so the key
//! rule and the key index see every worker's messages in one place; the
//! committer writes the table's files, and the staged ones are deleted,
//! never committed ([`Destination::staged_rows`]).
//!
//! Orphan removal treats the files a set names as referenced while the set
//! is there ([`pending_files`]).

use std::collections::{BTreeMap, HashSet};

use iceberg::spec::{deserialize_data_file_from_json, serialize_data_file_to_json, DataFile};
use serde::{Deserialize, Serialize};

use crate::deletes::equality::key_hex;
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};
use crate::table::TableHandle;
use crate::table_metadata::spec_id;
use crate::Destination;

/// How a pending file set's name begins, in the table's `metadata/`.
pub const PENDING_PREFIX: &str = "topicberg-pending-";

/// The Avro schema of a set's file: one record, the set as JSON.
const AVRO_SCHEMA: &str = r#"{"type": "record", "name": "topicberg_file_set", "fields": [{"name": "json", "type": "string"}]}"#;

/// The layout version of a set's JSON; another is refused, never guessed.
const LAYOUT: u32 = 1;

/// Data files and the offsets they hold, handed to a table's committer.
#[derive(Debug, Clone)]
pub struct FileSet {
    /// The topic the files were read from.
    pub topic: String,
    /// Partition -> (the offset the table records for it when the set
    /// was planned, `None` for a partition it never saw; the next offset
    /// after the set).
    pub partitions: BTreeMap<i32, (Option<i64>, i64)>,
    /// The data files (possibly none: a range of invalid messages only).
    pub data_files: Vec<DataFile>,
    /// Messages written as rows.
    pub records: u64,
    /// Who wrote it (the group member id), for logs.
    pub writer: String,
    /// The data files hold an upsert writer's winning rows, for the
    /// committer to read into its round (never committed as they are).
    pub staged: bool,
    /// A staged set's winning tombstones.
    pub tombstones: Vec<SetTombstone>,
}

/// A key whose winning message in a staged set's round is a tombstone,
/// with that message's place in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetTombstone {
    /// The key (`_olake_id`'s 16 bytes).
    pub key: [u8; 16],
    /// The message timestamp, microseconds.
    pub timestamp: i64,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
}

/// A set as found in the table's pending folder.
#[derive(Debug)]
pub struct PendingSet {
    /// The set's object.
    pub location: String,
    /// When the store says it was written (milliseconds since the epoch).
    pub written_ms: i64,
    /// The set, or why it could not be read.
    pub set: Result<FileSet, IcebergError>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetJson {
    layout: u32,
    topic: String,
    partitions: BTreeMap<i32, (Option<i64>, i64)>,
    /// The table schema the files were written with: their column bounds
    /// are read with it (a schema the committer's table does not know yet
    /// makes the set wait for a round that loads the table again, rather
    /// than losing the bounds of the new columns).
    schema_id: i32,
    /// Each data file as `(partition spec id, iceberg's data file JSON)`.
    data_files: Vec<(i32, String)>,
    records: u64,
    writer: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    staged: bool,
    /// (`_olake_id` hex, timestamp, partition, offset).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tombstones: Vec<(String, i64, i32, i64)>,
}

impl Destination {
    /// Writes `set` into `handle`'s pending folder; returns its location.
    pub async fn publish_file_set(
        &self,
        handle: &TableHandle,
        set: &FileSet,
    ) -> Result<String, IcebergError> {
        let metadata = handle.metadata();
        let step = format!("publishing a file set of {}", handle.qualified_name());
        let schema = metadata.current_schema();
        let mut data_files = Vec::with_capacity(set.data_files.len());
        for file in &set.data_files {
            let spec = spec_id(file);
            let partition_type = partition_type(metadata, spec, schema, &step)?;
            let json = serialize_data_file_to_json(
                file.clone(),
                &partition_type,
                metadata.format_version(),
            )
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Data))?;
            data_files.push((spec, json));
        }
        let json = SetJson {
            layout: LAYOUT,
            topic: set.topic.clone(),
            partitions: set.partitions.clone(),
            schema_id: schema.schema_id(),
            data_files,
            records: set.records,
            writer: set.writer.clone(),
            staged: set.staged,
            tombstones: set
                .tombstones
                .iter()
                .map(|t| (key_hex(&t.key), t.timestamp, t.partition, t.offset))
                .collect(),
        };
        let text = serde_json::to_string(&json)
            .map_err(|e| IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()))?;
        let bytes = avro_file(text)
            .map_err(|e| IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()))?;
        let location = format!(
            "{}/metadata/{PENDING_PREFIX}{:013}-{}.avro",
            metadata.location().trim_end_matches('/'),
            crate::commit::snapshot_commit::now_ms(),
            uuid::Uuid::new_v4().simple()
        );
        self.file_io()
            .new_output(&location)
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?
            .write(bytes.into())
            .await
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
        Ok(location)
    }

    /// The sets in `handle`'s pending folder, oldest first, each read (a
    /// set that cannot be read says why in its `set`).
    pub async fn pending_file_sets(
        &self,
        handle: &TableHandle,
    ) -> Result<Vec<PendingSet>, IcebergError> {
        let mut sets = Vec::new();
        for listed in self.list_pending(handle).await? {
            let set = self.read_file_set(handle, &listed.location).await;
            sets.push(PendingSet {
                location: listed.location,
                written_ms: listed.last_modified_ms,
                set,
            });
        }
        Ok(sets)
    }

    /// The locations of the sets in `handle`'s pending folder.
    pub async fn pending_set_locations(
        &self,
        handle: &TableHandle,
    ) -> Result<HashSet<String>, IcebergError> {
        Ok(self
            .list_pending(handle)
            .await?
            .into_iter()
            .map(|l| l.location)
            .collect())
    }

    async fn list_pending(
        &self,
        handle: &TableHandle,
    ) -> Result<Vec<crate::write::storage::ListedFile>, IcebergError> {
        let folder = format!(
            "{}/metadata",
            handle.metadata().location().trim_end_matches('/')
        );
        let mut listed = self
            .storage()
            .list_with_times(&format!("{folder}/"))
            .await
            .map_err(|e| from_iceberg(format!("listing {folder}"), e, IcebergErrorKind::Storage))?;
        listed.retain(|l| {
            let name = l.location.rsplit('/').next().unwrap_or_default();
            name.starts_with(PENDING_PREFIX) && name.ends_with(".avro")
        });
        listed.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(listed)
    }

    async fn read_file_set(
        &self,
        handle: &TableHandle,
        location: &str,
    ) -> Result<FileSet, IcebergError> {
        let step = format!("reading file set {location}");
        let bytes = self
            .file_io()
            .new_input(location)
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?
            .read()
            .await
            .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
        let text = avro_record(&bytes)
            .map_err(|e| IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()))?
            .ok_or_else(|| {
                IcebergError::new(
                    IcebergErrorKind::Data,
                    &step,
                    "no file set record in the file",
                )
            })?;
        let json: SetJson = serde_json::from_str(&text)
            .map_err(|e| IcebergError::new(IcebergErrorKind::Data, &step, e.to_string()))?;
        if json.layout != LAYOUT {
            let why = format!("layout {} (this version reads {LAYOUT})", json.layout);
            return Err(IcebergError::new(IcebergErrorKind::Data, &step, why));
        }
        let metadata = handle.metadata();
        let schema = metadata.schema_by_id(json.schema_id).ok_or_else(|| {
            let why = format!(
                "written with schema {}, which the table as this round loaded it does not have yet; \
                 the set waits for a round that loads the table again",
                json.schema_id
            );
            IcebergError::new(IcebergErrorKind::Data, &step, why)
        })?;
        let mut data_files = Vec::with_capacity(json.data_files.len());
        for (spec, text) in &json.data_files {
            let partition_type = partition_type(metadata, *spec, schema, &step)?;
            let file = deserialize_data_file_from_json(text, *spec, &partition_type, schema)
                .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Data))?;
            data_files.push(file);
        }
        let mut tombstones = Vec::with_capacity(json.tombstones.len());
        for (key, timestamp, partition, offset) in json.tombstones {
            let key = crate::key_index::parse_key(&key).ok_or_else(|| {
                IcebergError::new(IcebergErrorKind::Data, &step, format!("bad key {key:?}"))
            })?;
            tombstones.push(SetTombstone {
                key,
                timestamp,
                partition,
                offset,
            });
        }
        Ok(FileSet {
            topic: json.topic,
            partitions: json.partitions,
            data_files,
            records: json.records,
            writer: json.writer,
            staged: json.staged,
            tombstones,
        })
    }

    /// The rows of a staged set's data file, a batch at a time, with the
    /// columns (and Arrow types) they were written with.
    pub async fn staged_rows(
        &self,
        file: &DataFile,
    ) -> Result<
        futures::stream::BoxStream<'static, Result<arrow_array::RecordBatch, IcebergError>>,
        IcebergError,
    > {
        use crate::key_index::scan::{open_parquet, parquet_err, BATCH_ROWS};
        use futures::TryStreamExt;
        let path = file.file_path().to_string();
        let step = format!("reading staged rows {path}");
        let builder = open_parquet(self.file_io(), &path, &step).await?;
        let stream = builder
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| parquet_err(&step, e))?;
        Ok(Box::pin(stream.map_err(move |e| parquet_err(&step, e))))
    }

    /// Deletes sets (committed, or never to be); returns how many could
    /// not be deleted (a later round tries again). Their data files are
    /// left alone: a committed set's are live, and orphan removal takes
    /// the others.
    pub async fn drop_file_sets(&self, locations: &[String]) -> usize {
        if locations.is_empty() {
            return 0;
        }
        let done = self.storage().delete_all(locations).await;
        for failure in &done.failures {
            tracing::warn!(error = %failure, "could not delete a file set; a later round tries again");
        }
        done.failures.len()
    }
}

/// The partition type of the table's spec `spec` (a set's files name it)
/// over `schema`.
fn partition_type(
    metadata: &iceberg::spec::TableMetadata,
    spec: i32,
    schema: &iceberg::spec::Schema,
    step: &str,
) -> Result<iceberg::spec::StructType, IcebergError> {
    metadata
        .partition_spec_by_id(spec)
        .ok_or_else(|| {
            IcebergError::new(
                IcebergErrorKind::Data,
                step,
                format!("no partition spec {spec}"),
            )
        })?
        .partition_type(schema)
        .map_err(|e| from_iceberg(step, e, IcebergErrorKind::Data))
}

/// An Avro file holding one record: `json`.
fn avro_file(json: String) -> Result<Vec<u8>, apache_avro::Error> {
    let schema = apache_avro::Schema::parse_str(AVRO_SCHEMA)?;
    let mut writer = apache_avro::Writer::new(&schema, Vec::new());
    let record = apache_avro::types::Value::Record(vec![(
        "json".to_string(),
        apache_avro::types::Value::String(json),
    )]);
    writer.append(record)?;
    writer.into_inner()
}

/// The `json` of an Avro file [`avro_file`] wrote; `None` when it holds
/// no such record.
fn avro_record(bytes: &[u8]) -> Result<Option<String>, apache_avro::Error> {
    for value in apache_avro::Reader::new(bytes)? {
        if let apache_avro::types::Value::Record(fields) = value? {
            for (name, field) in fields {
                if let ("json", apache_avro::types::Value::String(text)) = (name.as_str(), field) {
                    return Ok(Some(text));
                }
            }
        }
    }
    Ok(None)
}

/// The data files the pending sets of `handle`'s table name (as written in
/// the sets), for orphan removal: they are not in the table yet, and will
/// be when the committer takes their set. A set that cannot be read is an
/// error: deleting files it may name would lose its data.
pub async fn pending_files(
    destination: &Destination,
    handle: &TableHandle,
) -> Result<HashSet<String>, IcebergError> {
    let mut files = HashSet::new();
    let mut unread = Vec::new();
    for pending in destination.pending_file_sets(handle).await? {
        match pending.set {
            Ok(set) => files.extend(set.data_files.iter().map(|f| f.file_path().to_string())),
            Err(e) => unread.push((pending.location, e)),
        }
    }
    if !unread.is_empty() {
        // A set its committer deleted between the listing and the read is
        // no error; one still there is.
        let there = destination.pending_set_locations(handle).await?;
        if let Some((_, e)) = unread.into_iter().find(|(l, _)| there.contains(l)) {
            return Err(e);
        }
    }
    Ok(files)
}

/// A set of `data_files` holding one message of partition 0 of topic
/// "t" (tests).
#[cfg(test)]
pub(crate) fn one_message_set(data_files: Vec<DataFile>) -> FileSet {
    FileSet {
        topic: "t".to_string(),
        partitions: BTreeMap::from([(0, (None, 1))]),
        data_files,
        records: 1,
        writer: "test".to_string(),
        staged: false,
        tombstones: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_staged_set_keeps_its_tombstones_and_its_rows_read_back_as_written() {
        use std::sync::Arc;

        use arrow_array::{ArrayRef, Int64Array, RecordBatch};
        use futures::TryStreamExt;

        use crate::write::schema::{Column, ColumnType};

        let dir = std::env::temp_dir().join(format!("tb-sets-{}", uuid::Uuid::new_v4().simple()));
        let destination = Destination::open_embedded(&dir.join("catalog"), "default").unwrap();
        let columns = [Column::optional("v", 1, ColumnType::Long)];
        let ns = vec!["ns".to_string()];
        let mut table = destination
            .ensure_table(&ns, "t", &columns, iceberg::spec::FormatVersion::V2)
            .await
            .unwrap();
        destination
            .commit_append(&mut table, Vec::new(), BTreeMap::new())
            .await
            .unwrap();
        let batch = RecordBatch::try_new(
            table.arrow_schema().clone(),
            vec![Arc::new(Int64Array::from(vec![7, 8, 9])) as ArrayRef],
        )
        .unwrap();
        let files = destination.write_data_files(&table, [batch]).await.unwrap();
        let tombstone = SetTombstone {
            key: core::array::from_fn(|i| i as u8 * 17),
            timestamp: -5,
            partition: 3,
            offset: 1 << 40,
        };
        let set = FileSet {
            partitions: BTreeMap::from([(3, (Some(10), 14))]),
            records: 4,
            staged: true,
            tombstones: vec![tombstone],
            ..one_message_set(files)
        };
        destination.publish_file_set(&table, &set).await.unwrap();
        let seen = destination.pending_file_sets(&table).await.unwrap();
        let read = seen[0].set.as_ref().unwrap();
        assert!(read.staged);
        assert_eq!(read.tombstones, vec![tombstone]);
        assert_eq!(read.partitions, set.partitions);
        let batches: Vec<RecordBatch> = destination
            .staged_rows(&read.data_files[0])
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        let values: Vec<i64> = batches
            .iter()
            .flat_map(|b| {
                let column = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                column.values().to_vec()
            })
            .collect();
        assert_eq!(values, vec![7, 8, 9]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_set_written_with_a_newer_schema_waits_and_keeps_the_new_columns_bounds() {
        use std::sync::Arc;

        use arrow_array::{ArrayRef, Int64Array, RecordBatch};

        use crate::write::schema::{Column, ColumnType};

        let dir = std::env::temp_dir().join(format!("tb-sets-{}", uuid::Uuid::new_v4().simple()));
        let destination = Destination::open_embedded(&dir.join("catalog"), "default").unwrap();
        let v = Column::optional("v", 1, ColumnType::Long);
        let ns = vec!["ns".to_string()];
        let old = destination
            .ensure_table(
                &ns,
                "t",
                std::slice::from_ref(&v),
                iceberg::spec::FormatVersion::V2,
            )
            .await
            .unwrap();
        // A writer adds column w, commits the change, writes and hands over.
        let mut new = old
            .with_columns(&[v, Column::optional("w", 2, ColumnType::Long)])
            .unwrap();
        let batch = RecordBatch::try_new(
            new.arrow_schema().clone(),
            vec![
                Arc::new(Int64Array::from(vec![1])) as ArrayRef,
                Arc::new(Int64Array::from(vec![42])) as ArrayRef,
            ],
        )
        .unwrap();
        destination
            .commit_append(&mut new, Vec::new(), BTreeMap::new())
            .await
            .unwrap();
        let files = destination.write_data_files(&new, [batch]).await.unwrap();
        let set = one_message_set(files);
        destination.publish_file_set(&new, &set).await.unwrap();
        // A committer that loaded the table before the change: the set waits.
        let seen = destination.pending_file_sets(&old).await.unwrap();
        let e = seen[0].set.as_ref().unwrap_err();
        assert!(e.to_string().contains("waits for a round"), "{e}");
        // Loaded after it: the set, with the new column's bounds.
        let seen = destination.pending_file_sets(&new).await.unwrap();
        let read = seen[0].set.as_ref().unwrap();
        assert!(
            read.data_files[0].lower_bounds().contains_key(&2),
            "{read:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_sets_avro_file_gives_back_its_json() {
        let bytes = avro_file(r#"{"layout": 1}"#.to_string()).unwrap();
        assert_eq!(
            avro_record(&bytes).unwrap().as_deref(),
            Some(r#"{"layout": 1}"#)
        );
        assert!(avro_record(b"not avro").is_err());
    }
}
