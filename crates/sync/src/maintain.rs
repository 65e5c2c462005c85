//! `topicberg maintain`: the job's tables kept healthy, one table at a
//! time, each step in order: compaction (small files and files with
//! deletes rewritten into target-size files without deletes, a `replace`
//! snapshot), manifest rewrite (more than `max_manifests` -> few, a
//! `replace` that changes no data), snapshot expiry, orphan-file removal. Settings come from
//! the job's `[maintain]` table ([`topicberg_core::MaintainSettings`]).
//!
//! The job's tables are the tables of its namespace whose offsets record
//! names a topic the job selects (so its dead-letter tables too); Kafka is
//! not contacted. Maintenance runs safely beside a sync of the job: every
//! commit is guarded by the catalog's requirements, a compaction whose
//! files a sync's deletes reached meanwhile is planned again, and a sync
//! whose deletes a compaction made stale computes them again.
//!
//! [`run_maintain`] is the API the CLI calls, and the service can.

use std::time::Instant;

use serde::Serialize;
use topicberg_core::Job;
use topicberg_iceberg::maintain::{
    compact, expire_snapshots, remove_orphans, rewrite_manifests, BeforeCommit, CompactionOptions,
    CompactionOutcome, ExpiryOutcome, ManifestRewriteOutcome, OrphanOutcome, TableStats,
};
use topicberg_iceberg::{Destination, IcebergError, TableHandle, TableOffsets};

use crate::destination::{connect_destination, SetupError};
use crate::hooks::{fault_point, pause_point};

/// What to maintain.
#[derive(Debug, Clone, Default)]
pub struct MaintainOptions {
    /// Only this table (its name, or `<namespace>.<name>`).
    pub table: Option<String>,
    /// Decide and report, change nothing.
    pub dry_run: bool,
    /// Merge small files of about the same size only (a follower's
    /// passes, see `CompactionOptions::tiered`).
    pub tiered: bool,
    /// The bytes of large data files with deletes a compaction rewrites at
    /// most (a follower's passes, `maintain.follow_rewrite_mb`); `None`:
    /// every one.
    pub rewrite_budget: Option<u64>,
    /// Only the tables this worker leads: those whose first topic (the
    /// first in name order of the topics the job selects that the table
    /// records offsets of) has its partition 0 assigned to this worker, so
    /// that in a job run by several workers each table is maintained in
    /// one place. `None`: every table (a scheduled `maintain`).
    pub leading: Option<std::collections::BTreeSet<String>>,
}

/// What `maintain` did to one table.
#[derive(Debug, Clone, Serialize)]
pub struct TableMaintenance {
    /// `<namespace>.<table>`.
    pub table: String,
    /// The current snapshot before.
    pub before: TableStats,
    /// The current snapshot after.
    pub after: TableStats,
    /// Compaction (none when an earlier error stopped the table).
    pub compaction: Option<CompactionOutcome>,
    /// Manifest rewrite.
    pub manifests: Option<ManifestRewriteOutcome>,
    /// Snapshot expiry.
    pub expiry: Option<ExpiryOutcome>,
    /// Orphan-file removal.
    pub orphans: Option<OrphanOutcome>,
    /// The error that stopped this table's maintenance, if any.
    pub error: Option<String>,
    /// Seconds the table took.
    pub seconds: f64,
}

/// What `maintain` did.
#[derive(Debug, Clone, Serialize)]
pub struct MaintainReport {
    /// The job.
    pub job: String,
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// One entry per table.
    pub tables: Vec<TableMaintenance>,
    /// Seconds the whole run took.
    pub seconds: f64,
}

impl MaintainReport {
    /// Whether every table was maintained without an error.
    pub fn succeeded(&self) -> bool {
        self.tables.iter().all(|t| t.error.is_none())
    }

    /// One line per table.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for t in &self.tables {
            let c = t.compaction.clone().unwrap_or_default();
            let m = t.manifests.clone().unwrap_or_default();
            let e = t.expiry.clone().unwrap_or_default();
            let o = t.orphans.clone().unwrap_or_default();
            out.push_str(&format!(
                "{}: data files {} -> {}, delete files {} -> {}, bytes {} -> {}; rewrote {} files \
                 into {}; manifests {} -> {}; expired {} snapshots ({} files deleted); removed {} orphan files{}\n",
                t.table,
                t.before.data_files,
                t.after.data_files,
                t.before.delete_files,
                t.after.delete_files,
                t.before.data_bytes + t.before.delete_bytes,
                t.after.data_bytes + t.after.delete_bytes,
                c.data_files_rewritten,
                c.data_files_written,
                m.manifests_before,
                m.manifests_after,
                e.snapshots_expired,
                e.files_deleted,
                o.orphans_removed,
                t.error
                    .as_ref()
                    .map(|e| format!("; FAILED: {e}"))
                    .unwrap_or_default(),
            ));
        }
        if self.dry_run {
            out.push_str("(dry run: nothing was changed)\n");
        }
        out
    }
}

/// Maintains the job's tables (see the module doc). Errors before any
/// table (the catalog unreachable) are the `Err`; a table's own error is
/// in its report entry, and the other tables go on.
pub async fn run_maintain(
    job: &Job,
    options: &MaintainOptions,
) -> Result<MaintainReport, SetupError> {
    let destination = connect_destination(job).await?;
    run_maintain_on(job, options, &destination).await
}

/// [`run_maintain`] through a catalog already connected (a follower's).
pub async fn run_maintain_on(
    job: &Job,
    options: &MaintainOptions,
    destination: &Destination,
) -> Result<MaintainReport, SetupError> {
    let started = Instant::now();
    let namespace = job.namespace_path();
    let names = destination
        .catalog()
        .list_tables(&namespace)
        .await
        .map_err(IcebergError::from)?;
    let mut tables = Vec::new();
    for name in names {
        if let Some(only) = &options.table {
            let qualified = format!("{}.{name}", job.namespace);
            if only != &name && only != &qualified {
                continue;
            }
        }
        let handle = match destination.load_table(&namespace, &name).await {
            Ok(handle) => handle,
            Err(e) => {
                tracing::warn!(table = %name, error = %e, "could not load a table of the namespace");
                continue;
            }
        };
        let first_topic = TableOffsets::of_metadata(handle.metadata())
            .ok()
            .and_then(|o| o.0.keys().find(|topic| job.selects(topic)).cloned());
        if first_topic.is_none() && options.table.is_none() {
            continue;
        }
        if let (Some(leading), Some(topic)) = (&options.leading, &first_topic) {
            if !leading.contains(topic) {
                continue;
            }
        }
        tables.push(maintain_table(job, destination, handle, options).await);
    }
    Ok(MaintainReport {
        job: job.name.clone(),
        dry_run: options.dry_run,
        tables,
        seconds: started.elapsed().as_secs_f64(),
    })
}

async fn maintain_table(
    job: &Job,
    destination: &Destination,
    mut handle: TableHandle,
    options: &MaintainOptions,
) -> TableMaintenance {
    let started = Instant::now();
    let table = format!("{}.{}", job.namespace, handle.name());
    let mut report = TableMaintenance {
        table: table.clone(),
        before: TableStats::default(),
        after: TableStats::default(),
        compaction: None,
        manifests: None,
        expiry: None,
        orphans: None,
        error: None,
        seconds: 0.0,
    };
    if let Err(e) = steps(job, destination, &mut handle, options, &mut report).await {
        tracing::error!(table = %table, error = %e, "maintenance failed");
        report.error = Some(e.to_string());
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

async fn steps(
    job: &Job,
    destination: &Destination,
    handle: &mut TableHandle,
    options: &MaintainOptions,
    report: &mut TableMaintenance,
) -> Result<(), IcebergError> {
    let settings = &job.maintain;
    let table = report.table.clone();
    report.before = TableStats::of(destination, handle).await?;

    let compacted = compaction(job, destination, handle, options, &table).await?;
    report.compaction = Some(compacted);
    fault_point("after_compaction_commit");

    let manifests =
        rewrite_manifests(destination, handle, settings.max_manifests, options.dry_run).await?;
    tracing::info!(
        table = %table,
        before = manifests.manifests_before,
        after = manifests.manifests_after,
        entries = manifests.entries,
        snapshot = %manifests.snapshot_id.map_or_else(|| "none".to_string(), |id| id.to_string()),
        replanned = manifests.replanned,
        skipped = manifests.skipped.as_deref().unwrap_or("-"),
        "manifest rewrite"
    );
    report.manifests = Some(manifests);

    let expired = expire_snapshots(
        destination,
        handle,
        settings.keep_snapshots,
        settings.max_snapshot_age,
        options.dry_run,
    )
    .await?;
    tracing::info!(
        table = %table,
        expired = expired.snapshots_expired,
        kept = expired.snapshots_kept,
        files_deleted = expired.files_deleted,
        offsets_migrated = %expired.offsets_migrated.join(", "),
        "snapshot expiry"
    );
    report.expiry = Some(expired);

    let orphans = remove_orphans(
        destination,
        handle,
        settings.orphan_min_age,
        options.dry_run,
    )
    .await?;
    tracing::info!(
        table = %table,
        listed = orphans.files_listed,
        removed = orphans.orphans_removed,
        too_young = orphans.orphans_too_young,
        "orphan files"
    );
    report.orphans = Some(orphans);

    destination.refresh(handle).await?;
    report.after = TableStats::of(destination, handle).await?;
    Ok(())
}

/// The compaction step of [`steps`], logged.
async fn compaction(
    job: &Job,
    destination: &Destination,
    handle: &mut TableHandle,
    options: &MaintainOptions,
    table: &str,
) -> Result<CompactionOutcome, IcebergError> {
    let settings = &job.maintain;
    let compaction = CompactionOptions {
        target_file_size: settings.target_file_size_bytes,
        min_input_files: settings.min_input_files,
        min_deleted_percent: settings.min_deleted_percent,
        zstd_level: job.tuning.zstd_level,
        tiered: options.tiered,
        rewrite_budget: options.rewrite_budget,
    };
    let hook = || -> futures::future::BoxFuture<'static, ()> {
        fault_point("before_compaction_commit");
        Box::pin(pause_point("before_compaction_commit"))
    };
    let before_commit: BeforeCommit<'_> = &hook;
    let compacted = compact(
        destination,
        handle,
        &compaction,
        options.dry_run,
        Some(before_commit),
    )
    .await?;
    tracing::info!(
        table = %table,
        rewritten = compacted.data_files_rewritten,
        written = compacted.data_files_written,
        stitched = compacted.data_files_stitched,
        delete_files_removed = compacted.delete_files_removed,
        merged_deletes = compacted.delete_files_merged,
        rows = compacted.rows_written,
        snapshot = ?compacted.snapshot_id,
        replanned = compacted.replanned,
        rows_carried = compacted.rows_carried,
        skipped = ?compacted.skipped,
        "compaction"
    );
    Ok(compacted)
}
