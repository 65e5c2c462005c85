//! The `replace` snapshot a compaction commits (Java's `RewriteFiles`):
//! the new data files added, the rewritten data files and the delete files
//! that went with them removed, nothing else changed (the table's
//! properties, and so its offsets record, are left as they are).
//!
//! It lands only where it is still true. On every table state it is built
//! on (after another writer's commit, the commit loop reloads and builds
//! again), each snapshot committed on `main` since the one the compaction
//! read is checked: a snapshot that removed one of the replaced files, or
//! added a delete that applies to one of them (a deletion vector or
//! position delete naming it, any equality delete), makes the replace
//! stale: committing it would bring back the rows those deletes removed.
//! The caller then plans again from the new state. New data files
//! appended meanwhile are carried forward untouched.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, ManifestContentType, ManifestFile, Operation, TableMetadata,
};

use crate::commit::manifest_entries::{
    entries_of, file_identity, live_entries_of, Entry, ManifestRewrite,
};
use crate::commit::offsets::OffsetsAdvance;
use crate::commit::snapshot_commit::{
    build_snapshot, new_snapshot_id, renew_snapshot_id_if_taken, write_new_manifests,
    BuiltSnapshot, PendingCommit,
};
use crate::commit::summary::summary;
use crate::error::{CatalogErrorKind, IcebergError, IcebergErrorKind};
use crate::key_index::scan::read_position_deletes;
use crate::table_metadata::{is_deletion_vector, manifests_of};

/// The step text of a replace that no longer applies (see the module doc);
/// the error's kind is `Catalog(Conflict)`.
pub const STALE_REPLACE_STEP: &str = "checking that a compaction's files are still as it read them";

/// Whether `err` is a stale replace: plan the compaction again.
pub fn is_stale_replace(err: &IcebergError) -> bool {
    err.kind == IcebergErrorKind::Catalog(CatalogErrorKind::Conflict)
        && err.step.starts_with(STALE_REPLACE_STEP)
}

pub(super) fn stale(metadata: &TableMetadata, detail: String) -> IcebergError {
    IcebergError::new(
        IcebergErrorKind::Catalog(CatalogErrorKind::Conflict),
        format!("{STALE_REPLACE_STEP} ({})", metadata.location()),
        detail,
    )
}

/// A replace being committed.
pub(crate) struct PendingReplace {
    pub(crate) snapshot_id: i64,
    pub(crate) commit_id: String,
    /// The snapshot the compaction read.
    base: Option<i64>,
    added: Vec<DataFile>,
    /// Replaced data files and removed delete files, by identity.
    removed: HashMap<(String, i64), Entry>,
    removed_data: HashSet<String>,
    data_manifests: Option<Vec<ManifestFile>>,
    summary_extra: BTreeMap<String, String>,
}

impl PendingReplace {
    pub(crate) fn new(
        metadata: &TableMetadata,
        base: Option<i64>,
        added: Vec<DataFile>,
        removed: Vec<Entry>,
    ) -> Self {
        let removed_data = removed
            .iter()
            .filter(|e| e.is_data())
            .map(|e| e.path().to_string())
            .collect();
        Self {
            snapshot_id: new_snapshot_id(metadata),
            commit_id: uuid::Uuid::new_v4().to_string(),
            base,
            added,
            removed: removed
                .into_iter()
                .map(|e| (file_identity(&e.file), e))
                .collect(),
            removed_data,
            data_manifests: None,
            summary_extra: BTreeMap::new(),
        }
    }

    /// Fails when a snapshot on `main` since the base removed a replaced
    /// file or added a delete that applies to a replaced data file.
    async fn check_still_applies(
        &self,
        file_io: &FileIO,
        metadata: &TableMetadata,
    ) -> Result<(), IcebergError> {
        let mut next = metadata.current_snapshot_id();
        while next != self.base {
            let Some(id) = next else {
                return Err(stale(
                    metadata,
                    format!(
                        "snapshot {:?} the compaction read is no longer on main",
                        self.base
                    ),
                ));
            };
            let Some(snapshot) = metadata.snapshot_by_id(id) else {
                return Err(stale(metadata, format!("snapshot {id} of main is missing")));
            };
            for manifest in manifests_of(file_io, metadata, snapshot).await? {
                if manifest.added_snapshot_id != id {
                    continue;
                }
                for entry in entries_of(file_io, &manifest).await? {
                    if entry.snapshot_id != id {
                        continue;
                    }
                    self.check_entry(file_io, metadata, id, &entry).await?;
                }
            }
            next = snapshot.parent_snapshot_id();
        }
        Ok(())
    }

    async fn check_entry(
        &self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        id: i64,
        entry: &Entry,
    ) -> Result<(), IcebergError> {
        if !entry.is_live() {
            if self.removed.contains_key(&file_identity(&entry.file)) {
                return Err(stale(
                    metadata,
                    format!("snapshot {id} removed {} meanwhile", entry.path()),
                ));
            }
            return Ok(());
        }
        match entry.file.content_type() {
            DataContentType::Data => Ok(()),
            DataContentType::EqualityDeletes => Err(stale(
                metadata,
                format!("snapshot {id} added equality deletes meanwhile"),
            )),
            DataContentType::PositionDeletes if is_deletion_vector(&entry.file) => {
                match entry.file.referenced_data_file() {
                    Some(target) if !self.removed_data.contains(&target) => Ok(()),
                    _ => Err(stale(
                        metadata,
                        format!(
                            "snapshot {id} added a deletion vector for a rewritten file ({})",
                            entry.path()
                        ),
                    )),
                }
            }
            DataContentType::PositionDeletes => {
                let mut hits = HashMap::new();
                read_position_deletes(
                    file_io,
                    entry.path(),
                    |p| self.removed_data.contains(p),
                    &mut hits,
                )
                .await?;
                match hits.keys().next() {
                    None => Ok(()),
                    Some(hit) => Err(stale(
                        metadata,
                        format!("snapshot {id} added position deletes for rewritten file {hit}"),
                    )),
                }
            }
        }
    }

    /// The current snapshot's manifests, those holding removed files
    /// rewritten (removed entries DELETED, the others EXISTING).
    async fn carry_forward(
        &self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        attempt: u32,
    ) -> Result<Vec<ManifestFile>, IcebergError> {
        let Some(current) = metadata.current_snapshot() else {
            return Err(stale(metadata, "the table has no snapshot".to_string()));
        };
        let removes_deletes = self.removed.len() > self.removed_data.len();
        let mut found = 0usize;
        let mut out = Vec::new();
        let mut rewritten = 0;
        for manifest in manifests_of(file_io, metadata, current).await? {
            if manifest.added_files_count == Some(0) && manifest.existing_files_count == Some(0) {
                continue;
            }
            let relevant = match manifest.content {
                ManifestContentType::Data => !self.removed_data.is_empty(),
                ManifestContentType::Deletes => removes_deletes,
            };
            if !relevant {
                out.push(manifest);
                continue;
            }
            let entries = live_entries_of(file_io, &manifest).await?;
            if !entries
                .iter()
                .any(|e| self.removed.contains_key(&file_identity(&e.file)))
            {
                out.push(manifest);
                continue;
            }
            rewritten += 1;
            let rewrite = ManifestRewrite {
                file_io,
                metadata,
                snapshot_id: self.snapshot_id,
                location: format!(
                    "{}/metadata/{}-c{attempt}-{rewritten}.avro",
                    metadata.location(),
                    self.commit_id
                ),
            };
            let is_removed = |f: &DataFile| self.removed.contains_key(&file_identity(f));
            let (manifest, removed) = rewrite
                .write(&manifest, entries, is_removed, |d| stale(metadata, d))
                .await?;
            found += removed.len();
            out.push(manifest);
        }
        if found != self.removed.len() {
            return Err(stale(
                metadata,
                format!(
                    "{} of the {} files the compaction replaces are no longer live",
                    self.removed.len() - found,
                    self.removed.len()
                ),
            ));
        }
        Ok(out)
    }
}

impl PendingCommit for PendingReplace {
    fn commit_id(&self) -> &str {
        &self.commit_id
    }

    fn offsets(&self) -> Option<&OffsetsAdvance> {
        None
    }

    fn summary_extra_mut(&mut self) -> &mut BTreeMap<String, String> {
        &mut self.summary_extra
    }

    async fn build(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        attempt: u32,
    ) -> Result<BuiltSnapshot, IcebergError> {
        self.check_still_applies(file_io, metadata).await?;
        if renew_snapshot_id_if_taken(metadata, &mut self.snapshot_id) {
            self.data_manifests = None;
        }
        if self.data_manifests.is_none() && !self.added.is_empty() {
            self.data_manifests = Some(
                write_new_manifests(
                    file_io,
                    metadata,
                    self.snapshot_id,
                    &self.commit_id,
                    self.added.clone(),
                    "m0",
                )
                .await?,
            );
        }
        let mut manifests: Vec<ManifestFile> =
            self.data_manifests.iter().flatten().cloned().collect();
        manifests.extend(self.carry_forward(file_io, metadata, attempt).await?);
        let removed: Vec<DataFile> = self.removed.values().map(|e| e.file.clone()).collect();
        let mut summary = summary(
            metadata.current_snapshot().map(|p| p.summary()),
            &self.added,
            &[],
            &removed,
            &self.summary_extra,
            &self.commit_id,
        );
        summary.operation = Operation::Replace;
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
