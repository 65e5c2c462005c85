//! Manifests as commits and maintenance read and rewrite them: a
//! manifest's entries with everything a rewrite needs
//! (the file, its status, sequence numbers, the partition spec), a
//! manifest written again with some entries marked deleted, and locations
//! compared whatever their scheme's spelling.

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, ManifestContentType, ManifestFile, ManifestStatus, Snapshot,
    TableMetadata,
};

use super::snapshot_commit::manifest_writer;
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};
use crate::table_metadata::manifests_of;
use crate::write::data_files::copy_of;

/// One entry of a manifest.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub file: DataFile,
    pub status: ManifestStatus,
    /// The snapshot that added the file.
    pub snapshot_id: i64,
    /// Its data sequence number.
    pub sequence_number: i64,
    pub file_sequence_number: i64,
    /// The partition spec of the manifest that lists it.
    pub spec_id: i32,
    /// A live data file's first row id (v3): its own, or inherited from
    /// its manifest's.
    pub first_row_id: Option<i64>,
}

impl Entry {
    pub fn path(&self) -> &str {
        self.file.file_path()
    }

    pub fn is_data(&self) -> bool {
        self.file.content_type() == DataContentType::Data
    }

    pub fn is_live(&self) -> bool {
        self.status != ManifestStatus::Deleted
    }

    /// The entry's data file with its first row id written out when it
    /// was inherited from its manifest (v3), so that its rows keep their
    /// ids in another manifest.
    pub fn file_with_row_ids(&self) -> Result<DataFile, IcebergError> {
        let file = &self.file;
        let Some(first_row_id) = self.first_row_id.filter(|_| file.first_row_id().is_none()) else {
            return Ok(file.clone());
        };
        let mut b = copy_of(file);
        b.first_row_id(Some(first_row_id));
        b.build().map_err(|e| {
            IcebergError::new(
                IcebergErrorKind::Data,
                format!(
                    "carrying data file {} into a new manifest",
                    file.file_path()
                ),
                e.to_string(),
            )
            .with_source(e)
        })
    }
}

/// Every entry of a manifest (deleted ones too), sequence numbers
/// inherited.
pub(crate) async fn entries_of(
    file_io: &FileIO,
    manifest: &ManifestFile,
) -> Result<Vec<Entry>, IcebergError> {
    let step = format!("reading manifest {}", manifest.manifest_path);
    let loaded = manifest
        .load_manifest(file_io)
        .await
        .map_err(|e| from_iceberg(&step, e, IcebergErrorKind::Storage))?;
    let mut out = Vec::with_capacity(loaded.entries().len());
    // First row ids inherited in order by the live data files that have
    // none (the specification's inheritance).
    let mut next_row_id = manifest.first_row_id.map(|id| id as i64);
    for entry in loaded.entries() {
        let sequence_number = entry.sequence_number().unwrap_or(manifest.sequence_number);
        let file = entry.data_file();
        let live_data = entry.status() != ManifestStatus::Deleted
            && file.content_type() == DataContentType::Data;
        let first_row_id = match (file.first_row_id(), next_row_id) {
            (Some(id), _) => Some(id),
            (None, Some(next)) if live_data => {
                next_row_id = Some(next + file.record_count() as i64);
                Some(next)
            }
            _ => None,
        };
        out.push(Entry {
            file: entry.data_file().clone(),
            status: entry.status(),
            snapshot_id: entry.snapshot_id().unwrap_or(manifest.added_snapshot_id),
            sequence_number,
            file_sequence_number: entry.file_sequence_number.unwrap_or(sequence_number),
            spec_id: manifest.partition_spec_id,
            first_row_id: first_row_id.filter(|_| live_data),
        });
    }
    Ok(out)
}

/// The live entries of a manifest.
pub(crate) async fn live_entries_of(
    file_io: &FileIO,
    manifest: &ManifestFile,
) -> Result<Vec<Entry>, IcebergError> {
    let mut entries = entries_of(file_io, manifest).await?;
    entries.retain(Entry::is_live);
    Ok(entries)
}

/// The live entries of a snapshot (data and deletes).
pub(crate) async fn live_entries(
    file_io: &FileIO,
    metadata: &TableMetadata,
    snapshot: &Snapshot,
) -> Result<Vec<Entry>, IcebergError> {
    let mut out = Vec::new();
    for manifest in manifests_of(file_io, metadata, snapshot).await? {
        out.extend(live_entries_of(file_io, &manifest).await?);
    }
    Ok(out)
}

/// A file's identity in a manifest: its path, and the blob offset for a
/// deletion vector (several share one Puffin file).
pub(crate) fn file_identity(file: &DataFile) -> (String, i64) {
    (
        file.file_path().to_string(),
        file.content_offset().unwrap_or(-1),
    )
}

/// Where a rewritten manifest goes, and the snapshot that writes it.
pub(crate) struct ManifestRewrite<'a> {
    pub file_io: &'a FileIO,
    pub metadata: &'a TableMetadata,
    pub snapshot_id: i64,
    pub location: String,
}

impl ManifestRewrite<'_> {
    /// Writes `manifest`'s live `entries` again under the manifest's own
    /// partition spec: each entry `remove` picks is marked DELETED, the
    /// others EXISTING (their snapshot and sequence numbers kept). Returns
    /// the new manifest and the files it marks deleted. A spec the table
    /// no longer has is `stale`'s error (the caller's conflict).
    pub async fn write(
        &self,
        manifest: &ManifestFile,
        entries: Vec<Entry>,
        mut remove: impl FnMut(&DataFile) -> bool,
        stale: impl Fn(String) -> IcebergError,
    ) -> Result<(ManifestFile, Vec<DataFile>), IcebergError> {
        let location = &self.location;
        let step = format!(
            "rewriting manifest {} as {location}",
            manifest.manifest_path
        );
        let err = |e: iceberg::Error| from_iceberg(&step, e, IcebergErrorKind::Data);
        let spec = self
            .metadata
            .partition_spec_by_id(manifest.partition_spec_id)
            .ok_or_else(|| {
                stale(format!(
                    "manifest {} names partition spec {}, which the table does not have",
                    manifest.manifest_path, manifest.partition_spec_id
                ))
            })?;
        let deletes = manifest.content == ManifestContentType::Deletes;
        let mut writer = manifest_writer(
            self.file_io,
            self.metadata,
            location,
            self.snapshot_id,
            deletes,
            spec,
        )
        .map_err(err)?;
        let mut removed = Vec::new();
        for entry in entries.into_iter().filter(Entry::is_live) {
            let (seq, file_seq) = (entry.sequence_number, Some(entry.file_sequence_number));
            if remove(&entry.file) {
                writer
                    .add_delete_file(entry.file.clone(), seq, file_seq)
                    .map_err(err)?;
                removed.push(entry.file);
            } else {
                writer
                    .add_existing_file(entry.file, entry.snapshot_id, seq, file_seq)
                    .map_err(err)?;
            }
        }
        Ok((writer.write_manifest_file().await.map_err(err)?, removed))
    }
}

/// A location with its scheme dropped (`s3://b/k`, `s3a://b/k` -> `b/k`;
/// `file:///p`, `/p` -> `/p`), so that one file spelled two ways compares
/// equal.
pub(crate) fn location_key(location: &str) -> String {
    match location.split_once("://") {
        Some(("file", rest)) => format!("/{}", rest.trim_start_matches('/')),
        Some((_, rest)) => rest.to_string(),
        None => location.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, DataFileFormat, Struct};

    use super::*;
    use crate::table_metadata::spec_id;

    fn data_file(first_row_id: Option<i64>) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path("s3://b/t/data/a.parquet".to_string())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(7)
            .file_size_in_bytes(1234)
            .partition_spec_id(3)
            .split_offsets(Some(vec![4]))
            .first_row_id(first_row_id)
            .build()
            .unwrap()
    }

    fn entry(file: DataFile, inherited: Option<i64>) -> Entry {
        Entry {
            file,
            status: ManifestStatus::Existing,
            snapshot_id: 11,
            sequence_number: 5,
            file_sequence_number: 4,
            spec_id: 3,
            first_row_id: inherited,
        }
    }

    #[test]
    fn an_inherited_first_row_id_is_written_out_and_nothing_else_changes() {
        let carried = entry(data_file(None), Some(100))
            .file_with_row_ids()
            .unwrap();
        assert_eq!(carried, data_file(Some(100)));
        assert_eq!(spec_id(&carried), 3);
        // A file with its own first row id, or none to inherit, is as it was.
        let own = data_file(Some(40));
        assert_eq!(
            entry(own.clone(), Some(40)).file_with_row_ids().unwrap(),
            own
        );
        let none = data_file(None);
        assert_eq!(entry(none.clone(), None).file_with_row_ids().unwrap(), none);
    }

    #[test]
    fn locations_compare_without_their_scheme() {
        assert_eq!(
            location_key("s3://b/t/data/x.parquet"),
            "b/t/data/x.parquet"
        );
        assert_eq!(
            location_key("s3a://b/t/data/x.parquet"),
            "b/t/data/x.parquet"
        );
        assert_eq!(location_key("file:///w/t/x.avro"), "/w/t/x.avro");
        assert_eq!(location_key("/w/t/x.avro"), "/w/t/x.avro");
    }
}
