//! The row-delta snapshot (Java's `RowDelta`): data files and delete files
//! committed together.
//!
//! - a new data manifest for the data files, a new delete manifest
//!   (`content = deletes`) for the delete files (position delete files on
//!   v2, deletion vectors on v3, equality delete files on either), both
//!   inheriting the snapshot's sequence number (and, for data, the v3
//!   first row id) from the manifest list;
//! - the parent's manifests carried forward, except that a delete manifest
//!   holding a deletion vector this commit replaces is rewritten: the
//!   replaced entry as DELETED, the others as EXISTING (at most one DV per
//!   data file per snapshot), and small ones of ours merged when there
//!   are many (`manifest_merge`);
//! - the summary metrics the Java library writes (`added-dvs`,
//!   `removed-dvs`, `added-position-deletes`, `added-equality-deletes`,
//!   running totals, ...), the caller's properties and
//!   `topicberg.commit-id`;
//! - requirements: the table uuid and `main`'s snapshot id.
//!
//! The new manifests are written once and reused on a retry; the rewritten
//! manifests and the manifest list are rebuilt on each new parent, and the
//! replaced DVs are checked to still be current on it. The new manifests,
//! the manifest list, snapshot and commit are built by
//! `snapshot_commit`, shared with the append.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, FormatVersion, ManifestContentType, ManifestFile,
    Operation, TableMetadata,
};

use crate::commit::manifest_entries::{file_identity, live_entries_of, ManifestRewrite};
use crate::commit::manifest_merge::merge_small_manifests;
use crate::commit::offsets::OffsetsAdvance;
use crate::commit::snapshot_commit::{
    build_snapshot, new_snapshot_id, renew_snapshot_id_if_taken, write_new_manifests,
    BuiltSnapshot, PendingCommit,
};
use crate::commit::summary::summary;
use crate::error::{CatalogErrorKind, IcebergError, IcebergErrorKind};
use crate::table_metadata::{carried_forward, current_manifests, is_deletion_vector};

/// What a row delta commits.
#[derive(Debug, Clone, Default)]
pub struct RowDelta {
    /// New data files.
    pub data_files: Vec<DataFile>,
    /// New delete files: position delete files (v2 tables), deletion
    /// vectors (v3 tables) or equality delete files (either; they apply to
    /// data files of earlier commits only, since the new entries share the
    /// snapshot's sequence number). A DV for a data file that already has one must
    /// hold the union of both and name the old one in `replaced_dvs`.
    pub delete_files: Vec<DataFile>,
    /// The current DV entries the new DVs replace, as listed by
    /// [`list_deletion_vectors`] (matched by Puffin path and offset).
    pub replaced_dvs: Vec<DataFile>,
    /// Extra summary properties.
    pub summary_extra: BTreeMap<String, String>,
    /// The offsets the commit moves: checked against every table state it
    /// is built on, recorded in the table's properties and the summary.
    pub offsets: Option<OffsetsAdvance>,
}

/// The step text of the error a row delta fails with when its deletes no
/// longer apply to the table as another writer left it: a DV it replaces is
/// no longer current, another DV appeared for a data file it adds a DV
/// for, or a commit since the table was loaded removed data files (e.g. a
/// compaction). Reload and recompute the deletes. The error's kind is
/// `Catalog(Conflict)`; [`is_stale_deletes`] tells it apart.
pub const STALE_DELETES_STEP: &str = "checking that a row delta's deletes still apply";

/// Whether `err` says that the row delta's deletes no longer apply (see
/// [`STALE_DELETES_STEP`]): reload the table, recompute (merge again with
/// the current vectors), commit again.
pub fn is_stale_deletes(err: &IcebergError) -> bool {
    err.kind == IcebergErrorKind::Catalog(CatalogErrorKind::Conflict)
        && err.step.starts_with(STALE_DELETES_STEP)
}

fn stale(metadata: &TableMetadata, detail: String) -> IcebergError {
    IcebergError::new(
        IcebergErrorKind::Catalog(CatalogErrorKind::Conflict),
        format!("{STALE_DELETES_STEP} ({})", metadata.location()),
        detail,
    )
}

/// Fails when a snapshot committed on `main` after `base` (the snapshot
/// the deletes were computed on) removed data files or is a `replace`
/// other than a manifest rewrite, or `base` is no longer an ancestor:
/// positions may point at rows that moved.
fn check_no_data_removed_since(
    metadata: &TableMetadata,
    base: Option<i64>,
) -> Result<(), IcebergError> {
    let mut next = metadata.current_snapshot_id();
    while next != base {
        let Some(id) = next else {
            return Err(stale(
                metadata,
                format!("snapshot {base:?} the deletes were computed on is no longer on main"),
            ));
        };
        let Some(snapshot) = metadata.snapshot_by_id(id) else {
            return Err(stale(
                metadata,
                format!("snapshot {id} of main is missing from the metadata"),
            ));
        };
        let summary = snapshot.summary();
        if moves_rows(summary) {
            return Err(stale(
                metadata,
                format!(
                    "snapshot {id} ({}) removed or rewrote data files after the deletes \
                     were computed",
                    summary.operation.as_str()
                ),
            ));
        }
        next = snapshot.parent_snapshot_id();
    }
    Ok(())
}

/// Whether a snapshot may have moved rows to other positions: it removed
/// data files, or it is a `replace` other than a manifest rewrite (ours or
/// Java's `RewriteManifests`: `manifests-created` in the summary, no data
/// file added or removed), which only moves manifest entries.
pub(crate) fn moves_rows(summary: &iceberg::spec::Summary) -> bool {
    let count = |key: &str| {
        let value = summary.additional_properties.get(key);
        value.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
    };
    let removed = count("deleted-data-files");
    let manifests_only = summary
        .additional_properties
        .contains_key("manifests-created")
        && removed == 0
        && count("added-data-files") == 0;
    removed > 0 || (summary.operation == Operation::Replace && !manifests_only)
}

/// The current deletion vectors of the table's `main` snapshot: data file
/// path -> its DV entry.
pub async fn list_deletion_vectors(
    file_io: &FileIO,
    metadata: &TableMetadata,
) -> Result<HashMap<String, DataFile>, IcebergError> {
    let mut out = HashMap::new();
    for manifest in current_manifests(file_io, metadata).await? {
        if manifest.content != ManifestContentType::Deletes {
            continue;
        }
        for entry in live_entries_of(file_io, &manifest).await? {
            if let (true, Some(data_file)) = (
                is_deletion_vector(&entry.file),
                entry.file.referenced_data_file(),
            ) {
                out.insert(data_file, entry.file);
            }
        }
    }
    Ok(out)
}

/// A row delta being committed.
pub(crate) struct PendingRowDelta {
    pub(crate) snapshot_id: i64,
    pub(crate) commit_id: String,
    delta: RowDelta,
    /// The `main` snapshot the deletes were computed on.
    base: Option<i64>,
    data_manifest: Option<Vec<ManifestFile>>,
    delete_manifest: Option<Vec<ManifestFile>>,
}

impl PendingRowDelta {
    pub(crate) fn new(metadata: &TableMetadata, delta: RowDelta) -> Self {
        Self {
            snapshot_id: new_snapshot_id(metadata),
            commit_id: uuid::Uuid::new_v4().to_string(),
            delta,
            base: metadata.current_snapshot_id(),
            data_manifest: None,
            delete_manifest: None,
        }
    }

    fn validate(&self, metadata: &TableMetadata, step: &str) -> Result<(), IcebergError> {
        let err = |detail: String| IcebergError::new(IcebergErrorKind::Data, step, detail);
        let format = metadata.format_version();
        if format == FormatVersion::V1 {
            return Err(IcebergError::new(
                IcebergErrorKind::Config,
                step,
                "format version 1 tables are not supported (use 2 or 3)",
            ));
        }
        if let Some(bad) = self
            .delta
            .data_files
            .iter()
            .find(|f| f.content_type() != DataContentType::Data)
        {
            return Err(err(format!("{} is not a data file", bad.file_path())));
        }
        let mut dv_targets = HashSet::new();
        for file in &self.delta.delete_files {
            match (file.content_type(), file.file_format(), format) {
                (DataContentType::Data, _, _) => {
                    return Err(err(format!("{} is not a delete file", file.file_path())))
                }
                (DataContentType::PositionDeletes, DataFileFormat::Puffin, FormatVersion::V3) => {
                    let target = file.referenced_data_file().ok_or_else(|| {
                        err(format!(
                            "deletion vector in {} has no referenced data file",
                            file.file_path()
                        ))
                    })?;
                    if !dv_targets.insert(target.clone()) {
                        return Err(err(format!(
                            "two deletion vectors for {target}; at most one per data file"
                        )));
                    }
                }
                (DataContentType::PositionDeletes, DataFileFormat::Puffin, _) => {
                    return Err(err(
                        "deletion vectors need a format version 3 table".to_string()
                    ))
                }
                (DataContentType::PositionDeletes, _, FormatVersion::V3) => {
                    return Err(err(format!(
                        "{}: v3 tables take deletion vectors, not position delete files",
                        file.file_path()
                    )))
                }
                (DataContentType::EqualityDeletes, _, _)
                    if file.equality_ids().is_none_or(|ids| ids.is_empty()) =>
                {
                    return Err(err(format!(
                        "equality delete file {} has no equality field ids",
                        file.file_path()
                    )))
                }
                _ => {}
            }
        }
        if let Some(bad) = self
            .delta
            .replaced_dvs
            .iter()
            .find(|f| !is_deletion_vector(f))
        {
            return Err(err(format!(
                "replaced entry {} is not a deletion vector",
                bad.file_path()
            )));
        }
        Ok(())
    }

    /// The parent's manifests to list, with every delete manifest that
    /// holds a replaced DV rewritten, and the DV entries removed. Checks
    /// that the replaced DVs are current and that no other current DV
    /// exists for a data file this commit adds a DV for.
    async fn carry_forward(
        &self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        parent_manifests: Vec<ManifestFile>,
        attempt: u32,
    ) -> Result<(Vec<ManifestFile>, Vec<DataFile>), IcebergError> {
        let new_dv_targets: HashSet<String> = self
            .delta
            .delete_files
            .iter()
            .filter(|f| is_deletion_vector(f))
            .filter_map(|f| f.referenced_data_file())
            .collect();
        let mut replaced: HashMap<(String, i64), bool> = self
            .delta
            .replaced_dvs
            .iter()
            .map(|f| (file_identity(f), false))
            .collect();
        let stale = |detail: String| stale(metadata, detail);
        let mut out = Vec::new();
        let mut removed = Vec::new();
        let mut rewritten = 0;
        for manifest in parent_manifests {
            // A manifest of ours left with only DELETED entries (e.g. one
            // rewritten when all its DVs were replaced) has recorded its
            // removals in an earlier snapshot: left out.
            if !carried_forward(metadata, &manifest) {
                continue;
            }
            let must_scan = manifest.content == ManifestContentType::Deletes
                && (!new_dv_targets.is_empty() || !replaced.is_empty());
            if !must_scan {
                out.push(manifest);
                continue;
            }
            let entries = live_entries_of(file_io, &manifest).await?;
            let mut touched = false;
            for entry in &entries {
                if !is_deletion_vector(&entry.file) {
                    continue;
                }
                if let Some(found) = replaced.get_mut(&file_identity(&entry.file)) {
                    *found = true;
                    touched = true;
                } else if let Some(target) = entry
                    .file
                    .referenced_data_file()
                    .filter(|t| new_dv_targets.contains(t))
                {
                    return Err(stale(format!(
                        "{target} has a current deletion vector in {} that this commit does \
                         not replace; merge with it and commit again",
                        entry.file.file_path()
                    )));
                }
            }
            if !touched {
                out.push(manifest);
                continue;
            }
            rewritten += 1;
            let rewrite = ManifestRewrite {
                file_io,
                metadata,
                snapshot_id: self.snapshot_id,
                location: format!(
                    "{}/metadata/{}-r{attempt}-{rewritten}.avro",
                    metadata.location(),
                    self.commit_id
                ),
            };
            let is_replaced =
                |f: &DataFile| is_deletion_vector(f) && replaced.contains_key(&file_identity(f));
            let (manifest, gone) = rewrite
                .write(&manifest, entries, is_replaced, stale)
                .await?;
            removed.extend(gone);
            out.push(manifest);
        }
        if let Some(((path, offset), _)) = replaced.iter().find(|(_, found)| !**found) {
            return Err(stale(format!(
                "the deletion vector at offset {offset} of {path} is no longer current \
                 (another commit replaced or removed it); merge with the current vector \
                 and commit again"
            )));
        }
        Ok((out, removed))
    }
}

impl PendingCommit for PendingRowDelta {
    fn commit_id(&self) -> &str {
        &self.commit_id
    }

    fn offsets(&self) -> Option<&OffsetsAdvance> {
        self.delta.offsets.as_ref()
    }

    fn summary_extra_mut(&mut self) -> &mut BTreeMap<String, String> {
        &mut self.delta.summary_extra
    }

    /// Writes what is missing and builds the snapshot on `metadata`'s
    /// current `main` snapshot, failing with a stale-deletes conflict
    /// ([`is_stale_deletes`]) when the deletes no longer apply to it.
    /// `attempt` numbers the files written per attempt.
    async fn build(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        attempt: u32,
    ) -> Result<BuiltSnapshot, IcebergError> {
        let step = format!(
            "building the row delta snapshot for {}",
            metadata.location()
        );
        self.validate(metadata, &step)?;
        if !self.delta.delete_files.is_empty() {
            check_no_data_removed_since(metadata, self.base)?;
        }
        if renew_snapshot_id_if_taken(metadata, &mut self.snapshot_id) {
            self.data_manifest = None;
            self.delete_manifest = None;
        }
        let (id, commit_id) = (self.snapshot_id, self.commit_id.as_str());
        if self.data_manifest.is_none() && !self.delta.data_files.is_empty() {
            let files = self.delta.data_files.clone();
            self.data_manifest =
                Some(write_new_manifests(file_io, metadata, id, commit_id, files, "m0").await?);
        }
        if self.delete_manifest.is_none() && !self.delta.delete_files.is_empty() {
            let files = self.delta.delete_files.clone();
            self.delete_manifest =
                Some(write_new_manifests(file_io, metadata, id, commit_id, files, "m1").await?);
        }

        let parent_manifests = current_manifests(file_io, metadata).await?;
        let (carried, removed) = self
            .carry_forward(file_io, metadata, parent_manifests, attempt)
            .await?;
        let ids = (self.snapshot_id, self.commit_id.as_str());
        let carried = merge_small_manifests(file_io, metadata, ids, attempt, carried).await?;
        let mut manifests: Vec<ManifestFile> = Vec::new();
        manifests.extend(self.data_manifest.iter().flatten().cloned());
        manifests.extend(self.delete_manifest.iter().flatten().cloned());
        manifests.extend(carried);

        let summary = summary(
            metadata.current_snapshot().map(|p| p.summary()),
            &self.delta.data_files,
            &self.delta.delete_files,
            &removed,
            &self.delta.summary_extra,
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use iceberg::spec::{Operation, Summary};

    use super::moves_rows;

    fn summary(operation: Operation, props: &[(&str, &str)]) -> Summary {
        Summary {
            operation,
            additional_properties: props
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<HashMap<_, _>>(),
        }
    }

    /// A manifest rewrite between a round's lookups and its commit leaves
    /// its position deletes right (no recompute); a compaction does not.
    #[test]
    fn deletes_survive_a_manifest_rewrite_but_not_a_compaction() {
        let rewrite = summary(Operation::Replace, &[("manifests-created", "2")]);
        assert!(!moves_rows(&rewrite));
        let compaction = summary(
            Operation::Replace,
            &[("added-data-files", "3"), ("deleted-data-files", "40")],
        );
        assert!(moves_rows(&compaction));
        // A replace that says nothing of manifests may have moved rows.
        assert!(moves_rows(&summary(Operation::Replace, &[])));
        let rewrote_files = summary(
            Operation::Replace,
            &[("manifests-created", "1"), ("deleted-data-files", "1")],
        );
        assert!(moves_rows(&rewrote_files));
        assert!(!moves_rows(&summary(
            Operation::Append,
            &[("added-data-files", "1")]
        )));
        assert!(moves_rows(&summary(
            Operation::Overwrite,
            &[("deleted-data-files", "1")]
        )));
    }
}
