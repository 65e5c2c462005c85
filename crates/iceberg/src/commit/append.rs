//! The append snapshot: one manifest for the new data files, a manifest
//! list that carries the parent snapshot's manifests forward, the snapshot
//! with its summary, and the commit (updates + requirements) for the REST
//! catalog.
//!
//! The new manifest's entries inherit their sequence numbers (and, on v3,
//! their first row ids) from the manifest list, so after a conflict only the
//! manifest list and the snapshot are rebuilt on the new parent; the
//! manifest and the data files are reused. The manifest list, snapshot and
//! commit are built by `snapshot_commit`, shared with the row delta.

use std::collections::{BTreeMap, HashMap};

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, ManifestFile, ManifestList, Operation, Summary,
    TableMetadata,
};

use crate::commit::offsets::OffsetsAdvance;
use crate::commit::snapshot_commit::{
    build_snapshot, new_snapshot_id, renew_snapshot_id_if_taken, write_new_manifest, BuiltSnapshot,
    PendingCommit,
};
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};

/// The snapshot summary property that identifies a topicberg commit, so
/// that a commit whose answer was lost can be recognised after a reload.
pub const COMMIT_ID_PROPERTY: &str = "topicberg.commit-id";

/// An append being committed: the data files, the snapshot id and commit id
/// it will carry, and its manifest once written.
pub(crate) struct PendingAppend {
    pub(crate) snapshot_id: i64,
    pub(crate) commit_id: String,
    pub(crate) data_files: Vec<DataFile>,
    pub(crate) summary_extra: BTreeMap<String, String>,
    /// The offsets the append moves (checked on every attempt).
    pub(crate) offsets: Option<OffsetsAdvance>,
    /// The manifest of `data_files`, written for `snapshot_id`.
    manifest: Option<ManifestFile>,
}

impl PendingAppend {
    pub(crate) fn new(
        metadata: &TableMetadata,
        data_files: Vec<DataFile>,
        summary_extra: BTreeMap<String, String>,
    ) -> Self {
        Self {
            snapshot_id: new_snapshot_id(metadata),
            commit_id: uuid::Uuid::new_v4().to_string(),
            data_files,
            summary_extra,
            offsets: None,
            manifest: None,
        }
    }
}

impl PendingCommit for PendingAppend {
    fn commit_id(&self) -> &str {
        &self.commit_id
    }

    fn offsets(&self) -> Option<&OffsetsAdvance> {
        self.offsets.as_ref()
    }

    fn summary_extra_mut(&mut self) -> &mut BTreeMap<String, String> {
        &mut self.summary_extra
    }

    /// Writes the manifest (once per snapshot id) and the manifest list and
    /// builds the snapshot on `metadata`'s current `main` snapshot.
    /// `attempt` numbers the manifest list file.
    async fn build(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        attempt: u32,
    ) -> Result<BuiltSnapshot, IcebergError> {
        let step = format!("building the append snapshot for {}", metadata.location());
        let format = metadata.format_version();
        if format == FormatVersion::V1 {
            return Err(IcebergError::new(
                IcebergErrorKind::Config,
                step,
                "format version 1 tables are not supported (use 2 or 3)",
            ));
        }
        if let Some(bad) = self
            .data_files
            .iter()
            .find(|f| f.content_type() != DataContentType::Data)
        {
            return Err(IcebergError::new(
                IcebergErrorKind::Data,
                step,
                format!("{} is not a data file", bad.file_path()),
            ));
        }
        if renew_snapshot_id_if_taken(metadata, &mut self.snapshot_id) {
            // Another writer took our id since we picked it: write the
            // manifest again for the new id.
            self.manifest = None;
        }
        if self.manifest.is_none() && !self.data_files.is_empty() {
            self.manifest = Some(
                write_new_manifest(
                    file_io,
                    metadata,
                    self.snapshot_id,
                    &self.commit_id,
                    self.data_files.clone(),
                    "m0",
                )
                .await?,
            );
        }

        let parent = metadata.current_snapshot();
        let mut manifests = match parent {
            Some(parent) => {
                let bytes = file_io
                    .new_input(parent.manifest_list())
                    .map_err(|e| from_iceberg(&step, &e, IcebergErrorKind::Storage))?
                    .read()
                    .await
                    .map_err(|e| {
                        from_iceberg(
                            format!("reading manifest list {}", parent.manifest_list()),
                            &e,
                            IcebergErrorKind::Storage,
                        )
                    })?;
                ManifestList::parse_with_version(&bytes, format)
                    .map_err(|e| {
                        from_iceberg(
                            format!("parsing manifest list {}", parent.manifest_list()),
                            &e,
                            IcebergErrorKind::Data,
                        )
                    })?
                    .entries()
                    .to_vec()
            }
            None => Vec::new(),
        };
        // The new manifest first, as the Java library orders them.
        if let Some(manifest) = &self.manifest {
            manifests.insert(0, manifest.clone());
        }

        let summary = summary(
            parent.map(|p| p.summary()),
            &self.data_files,
            &self.summary_extra,
            &self.commit_id,
        );
        build_snapshot(
            file_io,
            metadata,
            self.snapshot_id,
            &self.commit_id,
            attempt,
            manifests,
            summary,
        )
        .await
    }
}

/// The running totals and the `added-*` metric each one follows.
const TOTALS: [(&str, &str); 6] = [
    ("total-data-files", "added-data-files"),
    ("total-delete-files", "added-delete-files"),
    ("total-records", "added-records"),
    ("total-files-size", "added-files-size"),
    ("total-position-deletes", "added-position-deletes"),
    ("total-equality-deletes", "added-equality-deletes"),
];

/// The summary of an append: the caller's properties, then the metrics the
/// Java library writes (which win over a caller's key of the same name),
/// then the commit id.
///
/// A total is the parent's total plus what this snapshot adds; like the Java
/// library, a total the parent does not carry is left out (it is unknown).
pub(crate) fn summary(
    parent: Option<&Summary>,
    data_files: &[DataFile],
    extra: &BTreeMap<String, String>,
    commit_id: &str,
) -> Summary {
    let mut props: HashMap<String, String> =
        extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let files = data_files.len() as u64;
    let records: u64 = data_files.iter().map(|f| f.record_count()).sum();
    let size: u64 = data_files.iter().map(|f| f.file_size_in_bytes()).sum();
    let mut added: HashMap<&str, u64> = HashMap::new();
    if files > 0 {
        added.insert("added-data-files", files);
        added.insert("added-records", records);
        added.insert("added-files-size", size);
        // Unpartitioned: all files land in the one (empty) partition.
        props.insert("changed-partition-count".into(), "1".into());
    }
    for (key, value) in &added {
        props.insert((*key).to_string(), value.to_string());
    }
    for (total, added_key) in TOTALS {
        let previous = match parent {
            None => Some(0),
            Some(p) => p
                .additional_properties
                .get(total)
                .and_then(|v| v.parse::<u64>().ok()),
        };
        match previous {
            Some(previous) => {
                let now = previous + added.get(added_key).copied().unwrap_or(0);
                props.insert(total.to_string(), now.to_string());
            }
            None => {
                props.remove(total);
            }
        }
    }
    props.insert(COMMIT_ID_PROPERTY.to_string(), commit_id.to_string());
    props.remove("operation");
    Summary {
        operation: Operation::Append,
        additional_properties: props,
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{DataFileBuilder, Struct};

    use super::*;

    fn file(records: u64, size: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("s3://b/t/data/{records}.parquet"))
            .file_format(iceberg::spec::DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(records)
            .file_size_in_bytes(size)
            .build()
            .unwrap()
    }

    #[test]
    fn first_append_totals_equal_what_it_adds() {
        let extra = BTreeMap::from([
            (
                "topicberg.offsets".to_string(),
                r#"{"t":{"0":5}}"#.to_string(),
            ),
            ("added-records".to_string(), "999".to_string()),
        ]);
        let s = summary(None, &[file(3, 100), file(2, 50)], &extra, "c1");
        let p = &s.additional_properties;
        assert_eq!(s.operation, Operation::Append);
        assert_eq!(p["added-data-files"], "2");
        assert_eq!(p["added-records"], "5", "computed metrics win");
        assert_eq!(p["added-files-size"], "150");
        assert_eq!(p["total-records"], "5");
        assert_eq!(p["total-data-files"], "2");
        assert_eq!(p["total-files-size"], "150");
        assert_eq!(p["total-delete-files"], "0");
        assert_eq!(p["total-position-deletes"], "0");
        assert_eq!(p["total-equality-deletes"], "0");
        assert_eq!(p["changed-partition-count"], "1");
        assert_eq!(p["topicberg.offsets"], r#"{"t":{"0":5}}"#);
        assert_eq!(p[COMMIT_ID_PROPERTY], "c1");
    }

    #[test]
    fn totals_add_to_the_parent_and_unknown_totals_stay_out() {
        let first = summary(None, &[file(3, 100)], &BTreeMap::new(), "c1");
        let mut parent = first.clone();
        parent.additional_properties.remove("total-files-size");
        let s = summary(Some(&parent), &[file(4, 10)], &BTreeMap::new(), "c2");
        let p = &s.additional_properties;
        assert_eq!(p["total-records"], "7");
        assert_eq!(p["total-data-files"], "2");
        assert!(!p.contains_key("total-files-size"));
        let empty = summary(Some(&first), &[], &BTreeMap::new(), "c3");
        assert_eq!(empty.additional_properties["total-records"], "3");
        assert!(!empty.additional_properties.contains_key("added-records"));
    }
}
