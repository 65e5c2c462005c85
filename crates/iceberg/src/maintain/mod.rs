//! Table maintenance: what keeps a table fast to read as syncs add small
//! files and deletes, safe alongside syncs and other engines.
//!
//! | file | what it owns |
//! |---|---|
//! | `plan.rs` | which data files a compaction rewrites and the deletes it applies |
//! | `leftover.rs` | a pass's rewrite budget, and the deletes of the files it leaves merged |
//! | `rewrite.rs` | the rewrite: live rows into new target-size files without deletes |
//! | `replace.rs` | the `replace` snapshot and when it still applies (never resurrecting a row) |
//! | `rebase.rs` | deletes that reached rewritten files meanwhile, carried onto the new files |
//! | `expire.rs` | snapshot expiry, the offsets record kept, files only expired snapshots reached deleted |
//! | `orphans.rs` | files nothing references, older than a safety window, deleted |
//! | `manifests.rs` | many manifests rewritten into few (a `replace` that changes no data) |
//! | `files.rs` | manifests and their entries as maintenance reads them |
//!
//! The steps in the order `topicberg maintain` runs them: [`compact`],
//! then [`rewrite_manifests`], then [`expire_snapshots`], then
//! [`remove_orphans`]. Each takes the
//! table as last loaded and leaves the handle as committed.

mod expire;
pub(crate) mod leftover;
mod manifests;
mod orphans;
pub(crate) mod plan;
pub(crate) mod rebase;
pub(crate) mod replace;
pub(crate) mod rewrite;
pub(crate) mod stitch;

use futures::future::BoxFuture;
use serde::Serialize;

pub use expire::{expire_snapshots, ExpiryOutcome};
pub use manifests::{rewrite_manifests, ManifestRewriteOutcome, ENTRIES_PER_MANIFEST};
pub use orphans::{remove_orphans, OrphanOutcome};
pub use plan::CompactionOptions;
pub use replace::{is_stale_replace, STALE_REPLACE_STEP};

use crate::commit::manifest_entries;
use crate::destination::DEFAULT_COMMIT_ATTEMPTS;
use crate::error::{IcebergError, IcebergErrorKind};
use crate::table::TableHandle;
use crate::Destination;

/// Compactions planned again after another writer's deletes made one
/// stale, before the table is left for the next run.
const MAX_PLANS: u32 = 3;

/// The size of a table's current snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TableStats {
    /// Data files.
    pub data_files: u64,
    /// Their bytes.
    pub data_bytes: u64,
    /// Delete files (deletion vectors counted one each).
    pub delete_files: u64,
    /// Their bytes.
    pub delete_bytes: u64,
    /// Manifests.
    pub manifests: u64,
    /// Snapshots in the metadata.
    pub snapshots: u64,
}

impl TableStats {
    /// Reads the current snapshot's manifests.
    pub async fn of(destination: &Destination, handle: &TableHandle) -> Result<Self, IcebergError> {
        let metadata = handle.metadata();
        let mut stats = TableStats {
            snapshots: metadata.snapshots().len() as u64,
            ..TableStats::default()
        };
        let Some(snapshot) = metadata.current_snapshot() else {
            return Ok(stats);
        };
        let file_io = destination.file_io();
        for manifest in crate::table_metadata::manifests_of(file_io, metadata, snapshot).await? {
            stats.manifests += 1;
            for entry in manifest_entries::entries_of(file_io, &manifest).await? {
                if !entry.is_live() {
                    continue;
                }
                if entry.is_data() {
                    stats.data_files += 1;
                    stats.data_bytes += entry.file.file_size_in_bytes();
                } else {
                    stats.delete_files += 1;
                    stats.delete_bytes += entry
                        .file
                        .content_size_in_bytes()
                        .map(|s| s.max(0) as u64)
                        .unwrap_or(entry.file.file_size_in_bytes());
                }
            }
        }
        Ok(stats)
    }
}

/// What carrying late deletes over needs, when the table allows it: the
/// `_olake_id` key and no equality deletes (see `rebase.rs`).
pub(crate) fn rebase_of(
    plan: &plan::Plan,
    options: &CompactionOptions,
    rows: rebase::RowMap,
) -> Option<rebase::Rebase> {
    let key_field = plan.key_field.filter(|_| plan.equality.is_empty())?;
    let applied = plan
        .rewritten()
        .filter_map(|e| Some((e.path().to_string(), plan.positions.get(e.path())?.clone())))
        .collect();
    Some(rebase::Rebase {
        applied,
        key_field,
        zstd_level: options.zstd_level,
        rows,
    })
}

/// What a compaction did to one table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CompactionOutcome {
    /// Data files rewritten (removed from the table).
    pub data_files_rewritten: usize,
    /// Their bytes.
    pub bytes_rewritten: u64,
    /// Delete files removed with them.
    pub delete_files_removed: usize,
    /// Of the rewritten files, those stitched: their row groups copied
    /// into the new files as they were, not decoded (`stitch.rs`).
    pub data_files_stitched: usize,
    /// Data files written.
    pub data_files_written: usize,
    /// Their bytes.
    pub bytes_written: u64,
    /// Rows written.
    pub rows_written: u64,
    /// Deleted rows left out.
    pub rows_dropped: u64,
    /// The replace snapshot committed (none: nothing to do, dry run, or
    /// skipped).
    pub snapshot_id: Option<i64>,
    /// Plans made again because another writer's commit made one stale.
    pub replanned: u32,
    /// Rows another writer deleted from the rewritten files meanwhile,
    /// deleted in the new files by the same snapshot (`rebase.rs`).
    pub rows_carried: u64,
    /// The delete files that carry them.
    pub delete_files_carried: u64,
    /// Position delete files written for the deletes of the files left
    /// (`leftover.rs`), replacing more of them.
    pub delete_files_merged: u64,
    /// Why files were left alone.
    pub skipped: Vec<String>,
}

/// Called between a compaction's rewrite and its commit (a test hook: a
/// sync committing in between).
pub type BeforeCommit<'a> = &'a (dyn Fn() -> BoxFuture<'static, ()> + Send + Sync);

/// Reloads the table once a compaction's files are written: what other
/// writers committed while it rewrote (a follower's rounds: dozens) is
/// read by its first commit attempt, which holds no commit of theirs up,
/// as its second does; the later ones hold the gate
/// (`PendingReplace::gated_from`) and read only what came since. On
/// failure its files are deleted.
async fn reload_before_commit(
    destination: &Destination,
    handle: &mut TableHandle,
    written: &[iceberg::spec::DataFile],
) -> Result<(), IcebergError> {
    match destination.reload_patiently(handle).await {
        Ok(reloaded) => {
            *handle = reloaded;
            Ok(())
        }
        Err(e) => {
            destination.delete_uncommitted(written).await;
            Err(e)
        }
    }
}

/// Rewrites the table's small files and files with deletes into
/// target-size files without deletes and commits them as one `replace`
/// snapshot (see `plan.rs`, `replace.rs`). Position deletes and deletion
/// vectors another writer added to the rewritten files meanwhile are
/// carried onto the new files when the table has the `_olake_id` key and
/// no equality deletes (`rebase.rs`); otherwise, and when they cannot be
/// carried, a replace made stale by another writer's deletes is planned
/// again from the new state, at most [`MAX_PLANS`] times; then the table
/// is skipped (reported). Files of a replace that did not land are
/// deleted.
pub async fn compact(
    destination: &Destination,
    handle: &mut TableHandle,
    options: &CompactionOptions,
    dry_run: bool,
    before_commit: Option<BeforeCommit<'_>>,
) -> Result<CompactionOutcome, IcebergError> {
    let file_io = destination.file_io();
    let mut outcome = CompactionOutcome::default();
    for round in 1..=MAX_PLANS {
        let plan = plan::plan(file_io, handle.metadata(), options).await?;
        outcome.skipped = plan.skipped.clone();
        outcome.data_files_rewritten = plan.rewritten().count();
        outcome.bytes_rewritten = plan.rewritten().map(|e| e.file.file_size_in_bytes()).sum();
        outcome.delete_files_removed = plan.removed_deletes.len();
        if plan.groups.is_empty() || dry_run {
            return Ok(outcome);
        }
        let mut written = match rewrite::rewrite(file_io, handle.metadata(), &plan, options).await {
            Ok(written) => written,
            Err((e, files)) => {
                destination.delete_uncommitted(&files).await;
                return Err(e);
            }
        };
        if let Some(hook) = before_commit {
            hook().await;
        }
        reload_before_commit(destination, handle, &written.all_files()).await?;
        let removed = plan
            .rewritten()
            .cloned()
            .chain(plan.removed_deletes.iter().cloned())
            .collect();
        let mut pending = replace::PendingReplace::new(
            handle.metadata(),
            plan.base,
            written.files.clone(),
            written.merged_deletes.clone(),
            removed,
            rebase_of(&plan, options, std::mem::take(&mut written.row_map)),
        );
        let commit_id = pending.commit_id.clone();
        match destination
            .commit_with_retry(handle, &mut pending, DEFAULT_COMMIT_ATTEMPTS)
            .await
        {
            Ok(committed) => {
                outcome.rows_carried = pending.carried_rows;
                outcome.delete_files_carried = pending.carried.len() as u64;
                outcome.delete_files_merged = written.merged_deletes.len() as u64;
                if let Some(moves) = pending.into_moves() {
                    let uuid = handle.metadata().uuid().to_string();
                    destination.record_moves(&uuid, committed.snapshot_id, moves);
                }
                outcome.snapshot_id = Some(committed.snapshot_id);
                outcome.data_files_written = written.files.len();
                outcome.data_files_stitched = written.stitched;
                outcome.bytes_written = written.files.iter().map(|f| f.file_size_in_bytes()).sum();
                outcome.rows_written = written.rows;
                outcome.rows_dropped = written.rows_dropped;
                return Ok(outcome);
            }
            // It may have landed: its files may be live.
            Err(e) if e.kind == IcebergErrorKind::CommitStateUnknown => return Err(e),
            Err(e) => {
                destination.delete_uncommitted(&written.all_files()).await;
                if let Err(cleanup) = destination.delete_commit_metadata(handle, &commit_id).await {
                    tracing::warn!(error = %cleanup, "could not delete a stale compaction's manifests");
                }
                if !is_stale_replace(&e) {
                    return Err(e);
                }
                tracing::info!(table = %handle.name(), round, reason = %e.detail, "compaction made stale by another writer; planning again");
                outcome.replanned += 1;
                match destination.reload_patiently(handle).await {
                    Ok(reloaded) => *handle = reloaded,
                    Err(e) => {
                        destination.delete_uncommitted(&written.all_files()).await;
                        return Err(e);
                    }
                }
            }
        }
    }
    outcome.skipped.push(format!(
        "another writer changed the files being compacted {MAX_PLANS} times; left for the next run"
    ));
    outcome.snapshot_id = None;
    Ok(outcome)
}
