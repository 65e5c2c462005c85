//! The append snapshot: one manifest for the new data files, a manifest
//! list that carries the parent snapshot's manifests forward (small ones
//! of ours merged when there are many: `manifest_merge`), the snapshot
//! with its summary, and the commit (updates + requirements) for the REST
//! catalog.
//!
//! The new manifest's entries inherit their sequence numbers (and, on v3,
//! their first row ids) from the manifest list, so after a conflict only the
//! manifest list and the snapshot are rebuilt on the new parent; the
//! manifest and the data files are reused. The manifest list, snapshot and
//! commit are built by `snapshot_commit`, and the summary by `summary`,
//! both shared with the row delta.

use std::collections::BTreeMap;

use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, DataFile, FormatVersion, ManifestFile, TableMetadata};

use crate::commit::manifest_merge::merge_small_manifests;
use crate::commit::offsets::OffsetsAdvance;
use crate::commit::snapshot_commit::{
    build_snapshot, new_snapshot_id, renew_snapshot_id_if_taken, write_new_manifests,
    BuiltSnapshot, PendingCommit,
};
use crate::commit::summary::summary;
use crate::error::{IcebergError, IcebergErrorKind};
use crate::table_metadata::{carried_forward, current_manifests};

/// An append being committed: the data files, the snapshot id and commit id
/// it will carry, and its manifest once written.
pub(crate) struct PendingAppend {
    pub(crate) snapshot_id: i64,
    pub(crate) commit_id: String,
    pub(crate) data_files: Vec<DataFile>,
    pub(crate) summary_extra: BTreeMap<String, String>,
    /// The offsets the append moves (checked on every attempt).
    pub(crate) offsets: Option<OffsetsAdvance>,
    /// The manifests of `data_files` (one per partition spec), written
    /// for `snapshot_id`.
    manifest: Option<Vec<ManifestFile>>,
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
                write_new_manifests(
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
        let mut manifests = current_manifests(file_io, metadata).await?;
        manifests.retain(|m| carried_forward(metadata, m));
        let ids = (self.snapshot_id, self.commit_id.as_str());
        let mut manifests =
            merge_small_manifests(file_io, metadata, ids, attempt, manifests).await?;
        // The new manifest first, as the Java library orders them.
        if let Some(new) = &self.manifest {
            manifests.splice(0..0, new.iter().cloned());
        }

        let summary = summary(
            parent.map(|p| p.summary()),
            &self.data_files,
            &[],
            &[],
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
