//! Snapshot expiry: old snapshots removed from the table's metadata (one
//! `remove-snapshots` commit, REST or embedded), then the files only they
//! reached deleted.
//!
//! Kept, whatever their age: every branch's and tag's snapshot, the
//! newest `keep_snapshots` snapshots of each branch's history; kept while
//! younger than `max_snapshot_age`: any snapshot. The rest expire.
//!
//! The offsets record survives: a topic recorded only in a snapshot
//! summary (a table written before the table properties existed) has its
//! offsets written into its `topicberg.offsets.<topic>` property in the
//! same commit, so that expiring that snapshot loses nothing.
//!
//! The commit requires `main` to be where expiry read it (another
//! writer's commit: reload, decide again). Files deleted afterwards are
//! those of the expired snapshots' manifests (and the manifests and
//! manifest lists themselves) that no live entry of a kept snapshot's
//! manifests names.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use iceberg::io::FileIO;
use iceberg::spec::{ManifestFile, SnapshotRef, TableMetadata, MAIN_BRANCH};
use iceberg::{TableRequirement, TableUpdate};
use serde::Serialize;

use crate::commit::manifest_entries::entries_of;
use crate::commit::offsets::{TableOffsets, OFFSETS_TABLE_PROPERTY_PREFIX};
use crate::error::{IcebergError, IcebergErrorKind};
use crate::table::TableHandle;
use crate::table_metadata::manifests_of;
use crate::{CatalogErrorKind, Destination};

/// What expiry did to one table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExpiryOutcome {
    /// Snapshots removed from the metadata.
    pub snapshots_expired: usize,
    /// Snapshots the table keeps.
    pub snapshots_kept: usize,
    /// Files deleted (manifest lists, manifests, data and delete files).
    pub files_deleted: usize,
    /// Files that could not be deleted (left to orphan removal).
    pub files_not_deleted: usize,
    /// Topics whose offsets moved from a snapshot summary into the table
    /// property before the snapshot expired.
    pub offsets_migrated: Vec<String>,
}

/// Refs as the metadata's JSON has them (the `iceberg` crate keeps them
/// private): name -> (snapshot id, is a branch).
fn refs(metadata: &TableMetadata) -> HashMap<String, (i64, bool)> {
    let json = serde_json::to_value(metadata).unwrap_or_default();
    let mut out = HashMap::new();
    if let Some(map) = json.get("refs").and_then(|r| r.as_object()) {
        for (name, r) in map {
            if let Some(id) = r.get("snapshot-id").and_then(|v| v.as_i64()) {
                let branch = r.get("type").and_then(|t| t.as_str()) != Some("tag");
                out.insert(name.clone(), (id, branch));
            }
        }
    }
    if let Some(id) = metadata.current_snapshot_id() {
        out.entry(MAIN_BRANCH.to_string()).or_insert((id, true));
    }
    out
}

/// The snapshots to expire, oldest first.
pub(crate) fn to_expire(
    metadata: &TableMetadata,
    keep: usize,
    max_age: Duration,
    now_ms: i64,
) -> Vec<i64> {
    let cutoff = now_ms - max_age.as_millis() as i64;
    let mut kept: HashSet<i64> = HashSet::new();
    for (id, branch) in refs(metadata).into_values() {
        kept.insert(id);
        if !branch {
            continue;
        }
        let mut next = Some(id);
        let mut count = 0;
        while let Some(snapshot) = next.and_then(|id| metadata.snapshot_by_id(id)) {
            count += 1;
            if count <= keep || snapshot.timestamp_ms() >= cutoff {
                kept.insert(snapshot.snapshot_id());
            }
            next = snapshot.parent_snapshot_id();
        }
    }
    let mut expired: Vec<&SnapshotRef> = metadata
        .snapshots()
        .filter(|s| !kept.contains(&s.snapshot_id()) && s.timestamp_ms() < cutoff)
        .collect();
    expired.sort_by_key(|s| (s.timestamp_ms(), s.sequence_number()));
    expired.iter().map(|s| s.snapshot_id()).collect()
}

/// Table properties by name, with their values.
type Properties = HashMap<String, String>;

/// The table properties that carry the offsets of topics recorded only in
/// a snapshot summary.
fn offsets_to_migrate(metadata: &TableMetadata) -> Result<Properties, IcebergError> {
    let recorded = TableOffsets::of_metadata(metadata).map_err(|e| {
        IcebergError::new(
            IcebergErrorKind::Data,
            format!("reading the offsets of {}", metadata.location()),
            e.to_string(),
        )
        .with_source(e)
    })?;
    let mut out = HashMap::new();
    for (topic, partitions) in recorded.0 {
        let key = format!("{OFFSETS_TABLE_PROPERTY_PREFIX}{topic}");
        if !metadata.properties().contains_key(&key) {
            let value = serde_json::to_string(&partitions).expect("offsets serialise");
            out.insert(key, value);
        }
    }
    Ok(out)
}

/// Expires the table's old snapshots (see the module doc); `dry_run`:
/// only says which.
pub async fn expire_snapshots(
    destination: &Destination,
    handle: &mut TableHandle,
    keep: usize,
    max_age: Duration,
    dry_run: bool,
) -> Result<ExpiryOutcome, IcebergError> {
    let file_io = destination.file_io();
    let mut outcome = ExpiryOutcome::default();
    let Some((expired, before)) =
        commit_expiry(destination, handle, keep, max_age, dry_run, &mut outcome).await?
    else {
        return Ok(outcome);
    };
    let kept = KeptFiles::of(file_io, handle.metadata()).await?;
    let doomed = doomed_files(file_io, &before, &expired, &kept).await?;
    // In bulk: a follower expires thousands of round files a pass, and
    // one request each loaded the store beside the rounds.
    let doomed: Vec<String> = doomed.into_iter().collect();
    let done = destination.storage().delete_all(&doomed).await;
    outcome.files_deleted += done.deleted;
    outcome.files_not_deleted += done.failures.len();
    if let Some(first) = done.failures.first() {
        let failed = done.failures.len();
        tracing::warn!(failed, first = %first, "could not delete some of the expired snapshots' files");
    }
    Ok(outcome)
}

/// Removes the snapshots to expire from the table (migrating the offsets
/// only their summaries record to table properties), retrying on a
/// concurrent change; returns them with the metadata they were removed
/// from, or `None` when there are none or on a dry run. Counts go into
/// `outcome`.
async fn commit_expiry(
    destination: &Destination,
    handle: &mut TableHandle,
    keep: usize,
    max_age: Duration,
    dry_run: bool,
    outcome: &mut ExpiryOutcome,
) -> Result<Option<(Vec<i64>, TableMetadata)>, IcebergError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let metadata = handle.metadata().clone();
        let now_ms = crate::commit::snapshot_commit::now_ms();
        let expired = to_expire(&metadata, keep.max(1), max_age, now_ms);
        outcome.snapshots_kept = metadata.snapshots().len() - expired.len();
        outcome.snapshots_expired = expired.len();
        if expired.is_empty() || dry_run {
            return Ok(None);
        }
        let updates = expiry_updates(&metadata, &expired, outcome)?;
        let requirements = vec![
            TableRequirement::UuidMatch {
                uuid: metadata.uuid(),
            },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: MAIN_BRANCH.to_string(),
                snapshot_id: metadata.current_snapshot_id(),
            },
        ];
        match destination
            .catalog()
            .commit_table(&handle.namespace, &handle.name, &requirements, &updates)
            .await
        {
            Ok(committed) => {
                *handle =
                    TableHandle::new(handle.namespace.clone(), handle.name.clone(), committed)?;
                return Ok(Some((expired, metadata)));
            }
            Err(e) if e.kind == CatalogErrorKind::Conflict && attempt < 5 => {
                *handle = destination.reload_patiently(handle).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The table updates that expire `expired`: the offsets to migrate to
/// table properties (named in `outcome`), then the snapshots' removal.
fn expiry_updates(
    metadata: &TableMetadata,
    expired: &[i64],
    outcome: &mut ExpiryOutcome,
) -> Result<Vec<TableUpdate>, IcebergError> {
    let migrate = offsets_to_migrate(metadata)?;
    outcome.offsets_migrated = migrate
        .keys()
        .map(|k| {
            k.trim_start_matches(OFFSETS_TABLE_PROPERTY_PREFIX)
                .to_string()
        })
        .collect();
    outcome.offsets_migrated.sort();
    let mut updates = Vec::new();
    if !migrate.is_empty() {
        updates.push(TableUpdate::SetProperties { updates: migrate });
    }
    updates.push(TableUpdate::RemoveSnapshots {
        snapshot_ids: expired.to_vec(),
    });
    Ok(updates)
}

/// The files the kept snapshots need, read from the metadata committed.
#[derive(Default)]
struct KeptFiles {
    manifests: HashSet<String>,
    /// Live data and delete files.
    live: HashSet<String>,
    manifest_lists: HashSet<String>,
}

impl KeptFiles {
    async fn of(file_io: &FileIO, after: &TableMetadata) -> Result<Self, IcebergError> {
        let mut kept = Self::default();
        for snapshot in after.snapshots() {
            kept.manifest_lists
                .insert(snapshot.manifest_list().to_string());
            for manifest in manifests_of(file_io, after, snapshot).await? {
                if kept.manifests.insert(manifest.manifest_path.clone()) {
                    for entry in entries_of(file_io, &manifest).await? {
                        if entry.is_live() {
                            kept.live.insert(entry.path().to_string());
                        }
                    }
                }
            }
        }
        Ok(kept)
    }
}

/// The manifest lists, manifests and files of the `expired` snapshots of
/// `before` that no kept snapshot needs.
async fn doomed_files(
    file_io: &FileIO,
    before: &TableMetadata,
    expired: &[i64],
    kept: &KeptFiles,
) -> Result<BTreeSet<String>, IcebergError> {
    let mut doomed: BTreeSet<String> = BTreeSet::new();
    let mut seen: HashSet<String> = HashSet::new();
    for id in expired {
        let Some(snapshot) = before.snapshot_by_id(*id) else {
            continue;
        };
        if !kept.manifest_lists.contains(snapshot.manifest_list()) {
            doomed.insert(snapshot.manifest_list().to_string());
        }
        let manifests: Vec<ManifestFile> = match manifests_of(file_io, before, snapshot).await {
            Ok(m) => m,
            // Already gone (another engine's cleanup): nothing to add.
            Err(e) if e.kind == IcebergErrorKind::Storage => continue,
            Err(e) => return Err(e),
        };
        for manifest in manifests {
            if kept.manifests.contains(&manifest.manifest_path)
                || !seen.insert(manifest.manifest_path.clone())
            {
                continue;
            }
            doomed.insert(manifest.manifest_path.clone());
            for entry in entries_of(file_io, &manifest).await? {
                if !kept.live.contains(entry.path()) {
                    doomed.insert(entry.path().to_string());
                }
            }
        }
    }
    Ok(doomed)
}
