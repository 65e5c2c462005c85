//! Manifest rewrite (Java's `RewriteManifests`): when the current snapshot
//! lists more manifests than `max_manifests`, its live entries are written
//! into few manifests, one per (partition spec, content) (split every
//! [`ENTRIES_PER_MANIFEST`] entries), committed as a `replace` snapshot
//! that changes no data: the same files, every entry EXISTING with the
//! snapshot id and the data and file sequence numbers it had (so every
//! delete applies to the same data files as before), and on v3 each data
//! file's first row id written out (the row ids it had).
//!
//! It lands only on the snapshot it read: any commit in between (a sync,
//! another engine) makes it stale, and the caller reads the table again.

use std::collections::BTreeMap;

use iceberg::io::FileIO;
use iceberg::spec::{ManifestContentType, ManifestFile, Operation, TableMetadata};
use serde::Serialize;

use super::replace::stale;
use super::MAX_PLANS;
use crate::commit::manifest_entries::{entries_of, Entry};
use crate::commit::offsets::OffsetsAdvance;
use crate::commit::snapshot_commit::{
    build_snapshot, manifest_writer, new_snapshot_id, BuiltSnapshot, PendingCommit,
};
use crate::commit::summary::summary;
use crate::destination::DEFAULT_COMMIT_ATTEMPTS;
use crate::error::{from_iceberg, IcebergError, IcebergErrorKind};
use crate::table::TableHandle;
use crate::table_metadata::manifests_of;
use crate::Destination;

/// The most entries one rewritten manifest holds.
pub const ENTRIES_PER_MANIFEST: usize = 20_000;

/// What a manifest rewrite did to one table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ManifestRewriteOutcome {
    /// Manifests the current snapshot listed before.
    pub manifests_before: u64,
    /// Manifests it lists after (before, when nothing was rewritten).
    pub manifests_after: u64,
    /// Live entries carried into the new manifests.
    pub entries: u64,
    /// The replace snapshot committed (none: under the limit, dry run, or
    /// skipped).
    pub snapshot_id: Option<i64>,
    /// Rewrites read again because another writer committed meanwhile.
    pub replanned: u32,
    /// Why it was left for the next run, if it was.
    pub skipped: Option<String>,
}

/// Rewrites the current snapshot's manifests into few when it lists more
/// than `max_manifests` (see the module doc).
pub async fn rewrite_manifests(
    destination: &Destination,
    handle: &mut TableHandle,
    max_manifests: usize,
    dry_run: bool,
) -> Result<ManifestRewriteOutcome, IcebergError> {
    let file_io = destination.file_io();
    let mut outcome = ManifestRewriteOutcome::default();
    for round in 1..=MAX_PLANS {
        let metadata = handle.metadata();
        let Some(snapshot) = metadata.current_snapshot() else {
            return Ok(outcome);
        };
        let manifests = manifests_of(file_io, metadata, snapshot).await?;
        outcome.manifests_before = manifests.len() as u64;
        outcome.manifests_after = manifests.len() as u64;
        if manifests.len() <= max_manifests || dry_run {
            return Ok(outcome);
        }
        let pending = PendingManifests {
            snapshot_id: new_snapshot_id(metadata),
            commit_id: uuid::Uuid::new_v4().to_string(),
            base: snapshot.snapshot_id(),
            summary_extra: BTreeMap::new(),
            written: None,
        };
        let commit_id = pending.commit_id.clone();
        match destination
            .commit_with_retry(handle, pending, DEFAULT_COMMIT_ATTEMPTS)
            .await
        {
            Ok(committed) => {
                outcome.snapshot_id = Some(committed.snapshot_id);
                let metadata = handle.metadata();
                if let Some(current) = metadata.current_snapshot() {
                    let after = manifests_of(file_io, metadata, current).await?;
                    outcome.manifests_after = after.len() as u64;
                    outcome.entries = after
                        .iter()
                        .map(|m| {
                            m.added_files_count.unwrap_or(0) as u64
                                + m.existing_files_count.unwrap_or(0) as u64
                        })
                        .sum();
                }
                return Ok(outcome);
            }
            Err(e) if e.kind == IcebergErrorKind::CommitStateUnknown => return Err(e),
            Err(e) => {
                if let Err(cleanup) = destination.delete_commit_metadata(handle, &commit_id).await {
                    tracing::warn!(error = %cleanup, "could not delete a stale manifest rewrite's manifests");
                }
                if !super::is_stale_replace(&e) {
                    return Err(e);
                }
                tracing::info!(table = %handle.name(), round, reason = %e.detail, "manifest rewrite made stale by another writer; reading again");
                outcome.replanned += 1;
                *handle = destination.reload_patiently(handle).await?;
            }
        }
    }
    outcome.skipped = Some(format!(
        "another writer committed during the manifest rewrite {MAX_PLANS} times; left for the \
         next run"
    ));
    Ok(outcome)
}

/// A manifest rewrite being committed.
struct PendingManifests {
    snapshot_id: i64,
    commit_id: String,
    /// The snapshot whose manifests are rewritten.
    base: i64,
    summary_extra: BTreeMap<String, String>,
    /// The manifests written (once).
    written: Option<Vec<ManifestFile>>,
}

impl PendingManifests {
    async fn write(
        &self,
        file_io: &FileIO,
        metadata: &TableMetadata,
    ) -> Result<Vec<ManifestFile>, IcebergError> {
        let Some(current) = metadata.current_snapshot() else {
            return Err(stale(metadata, "the table has no snapshot".to_string()));
        };
        let mut groups: BTreeMap<(i32, bool), Vec<Entry>> = BTreeMap::new();
        for manifest in manifests_of(file_io, metadata, current).await? {
            let deletes = manifest.content == ManifestContentType::Deletes;
            for entry in entries_of(file_io, &manifest).await? {
                if entry.is_live() {
                    groups
                        .entry((manifest.partition_spec_id, deletes))
                        .or_default()
                        .push(entry);
                }
            }
        }
        let mut out = Vec::new();
        for ((spec_id, deletes), entries) in groups {
            let spec = metadata
                .partition_spec_by_id(spec_id)
                .cloned()
                .ok_or_else(|| {
                    stale(
                        metadata,
                        format!("a manifest names partition spec {spec_id}, which the table does not have"),
                    )
                })?;
            for chunk in entries.chunks(ENTRIES_PER_MANIFEST) {
                let location = format!(
                    "{}/metadata/{}-r{}.avro",
                    metadata.location(),
                    self.commit_id,
                    out.len()
                );
                let err = |e: iceberg::Error| {
                    from_iceberg(
                        format!("writing manifest {location}"),
                        e,
                        IcebergErrorKind::Data,
                    )
                };
                let mut writer = manifest_writer(
                    file_io,
                    metadata,
                    &location,
                    self.snapshot_id,
                    deletes,
                    &spec,
                )
                .map_err(err)?;
                for entry in chunk {
                    let file = entry.file_with_row_ids()?;
                    writer
                        .add_existing_file(
                            file,
                            entry.snapshot_id,
                            entry.sequence_number,
                            Some(entry.file_sequence_number),
                        )
                        .map_err(err)?;
                }
                out.push(writer.write_manifest_file().await.map_err(err)?);
            }
        }
        Ok(out)
    }
}

impl PendingCommit for PendingManifests {
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
        // Written for the base only: any commit since makes it stale.
        if metadata.current_snapshot_id() != Some(self.base) {
            return Err(stale(
                metadata,
                format!(
                    "the table moved from snapshot {} during a manifest rewrite",
                    self.base
                ),
            ));
        }
        if metadata
            .snapshots()
            .any(|s| s.snapshot_id() == self.snapshot_id)
        {
            return Err(stale(
                metadata,
                "another writer took the rewrite's snapshot id".to_string(),
            ));
        }
        if self.written.is_none() {
            self.written = Some(self.write(file_io, metadata).await?);
        }
        let manifests = self.written.clone().unwrap_or_default();
        let mut summary = summary(
            metadata.current_snapshot().map(|p| p.summary()),
            &[],
            &[],
            &[],
            &self.summary_extra,
            &self.commit_id,
        );
        summary.operation = Operation::Replace;
        summary
            .additional_properties
            .insert("manifests-created".to_string(), manifests.len().to_string());
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
