//! What maintenance reads of a table: the manifests of a snapshot and
//! their entries with everything a rewrite needs (the file, its status,
//! sequence numbers, the partition spec), and locations compared whatever
//! their scheme's spelling.

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, ManifestFile, ManifestList, ManifestStatus, Snapshot, TableMetadata,
};

use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};

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
}

/// The manifests a snapshot lists.
pub(crate) async fn manifests_of(
    file_io: &FileIO,
    metadata: &TableMetadata,
    snapshot: &Snapshot,
) -> Result<Vec<ManifestFile>, IcebergError> {
    let location = snapshot.manifest_list();
    let step = format!("reading manifest list {location}");
    let bytes = file_io
        .new_input(location)
        .map_err(|e| from_iceberg(&step, &e, IcebergErrorKind::Storage))?
        .read()
        .await
        .map_err(|e| from_iceberg(&step, &e, IcebergErrorKind::Storage))?;
    Ok(
        ManifestList::parse_with_version(&bytes, metadata.format_version())
            .map_err(|e| from_iceberg(&step, &e, IcebergErrorKind::Data))?
            .entries()
            .to_vec(),
    )
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
        .map_err(|e| from_iceberg(&step, &e, IcebergErrorKind::Storage))?;
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

/// The live entries of a snapshot (data and deletes).
pub(crate) async fn live_entries(
    file_io: &FileIO,
    metadata: &TableMetadata,
    snapshot: &Snapshot,
) -> Result<Vec<Entry>, IcebergError> {
    let mut out = Vec::new();
    for manifest in manifests_of(file_io, metadata, snapshot).await? {
        out.extend(
            entries_of(file_io, &manifest)
                .await?
                .into_iter()
                .filter(Entry::is_live),
        );
    }
    Ok(out)
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
    use super::location_key;

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
