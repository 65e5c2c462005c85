//! The `replace` snapshot a compaction commits (Java's `RewriteFiles`):
//! the new data files added, the rewritten data files and the delete files
//! that went with them removed, the position delete files merged for the
//! files left replacing theirs (`leftover.rs`), nothing else changed (the table's
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
//!
//! A replace given a [`Rebase`] carries position deletes and deletion
//! vectors that reached its files meanwhile onto the files it wrote
//! instead (`rebase.rs`); equality deletes and removed data files still
//! make it stale.

use std::collections::{BTreeMap, HashMap, HashSet};

use futures::StreamExt;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, ManifestContentType, ManifestFile, Operation, TableMetadata,
};
use roaring::RoaringTreemap;

use crate::commit::manifest_entries::{
    entries_of, file_identity, live_entries_of, Entry, ManifestRewrite,
};
use crate::commit::offsets::OffsetsAdvance;
use crate::commit::snapshot_commit::{
    build_snapshot, new_snapshot_id, renew_snapshot_id_if_taken, write_new_manifests,
    BuiltSnapshot, PendingCommit,
};
use crate::commit::summary::summary;
use crate::deletes::deletion_vectors::read_deletion_vector;
use crate::error::{CatalogErrorKind, IcebergError, IcebergErrorKind};
use crate::key_index::scan::read_position_deletes;
use crate::table_metadata::{has_live_files, is_deletion_vector, manifests_of};

use super::rebase::{translate, write_carried, LateDeletes, Rebase, RowMoves};

/// Late delete files read at once by a commit check.
const CHECK_READS: usize = 16;

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
    /// The position delete files merged from removed ones
    /// (`leftover.rs`).
    merged: Vec<DataFile>,
    /// Replaced data files and removed delete files, by identity.
    removed: HashMap<(String, i64), Entry>,
    removed_data: HashSet<String>,
    /// The manifests of `added` and of `merged`, once written.
    new_manifests: Option<Vec<ManifestFile>>,
    summary_extra: BTreeMap<String, String>,
    /// Carry late deletes over instead of going stale.
    rebase: Option<Rebase>,
    /// The late deletes of each snapshot checked so far (a snapshot does
    /// not change: a later attempt reads only the snapshots since).
    checked: HashMap<i64, LateDeletes>,
    /// The delete files written for late deletes (on v2, an attempt adds
    /// those of the snapshots since the last one; on v3 it writes them
    /// all again: one deletion vector per data file).
    pub(crate) carried: Vec<DataFile>,
    /// The snapshots whose late deletes `carried` holds.
    carried_from: HashSet<i64>,
    /// The late deleted rows carried over.
    pub(crate) carried_rows: u64,
    /// The current snapshot's manifests an earlier attempt read, by path
    /// (a manifest never changes): kept as they were (`None`), or
    /// rewritten without the removed files (the new manifest and the
    /// files it removed).
    forwarded: HashMap<String, Option<(ManifestFile, Vec<DataFile>)>>,
    /// The late deletes the last attempt found, per rewritten file.
    late: BTreeMap<String, RoaringTreemap>,
}

impl PendingReplace {
    pub(crate) fn new(
        metadata: &TableMetadata,
        base: Option<i64>,
        added: Vec<DataFile>,
        merged: Vec<DataFile>,
        removed: Vec<Entry>,
        rebase: Option<Rebase>,
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
            merged,
            removed: removed
                .into_iter()
                .map(|e| (file_identity(&e.file), e))
                .collect(),
            removed_data,
            new_manifests: None,
            summary_extra: BTreeMap::new(),
            rebase,
            checked: HashMap::new(),
            carried: Vec::new(),
            carried_from: HashSet::new(),
            carried_rows: 0,
            forwarded: HashMap::new(),
            late: BTreeMap::new(),
        }
    }

    /// Where the committed replace moved the rewritten rows, when every
    /// group was written in read order (see [`RowMoves`]).
    pub(crate) fn into_moves(self) -> Option<RowMoves> {
        let rebase = self.rebase?;
        RowMoves::new(
            rebase,
            self.late,
            self.removed_data.iter().map(String::as_str),
        )
    }

    /// Writes the manifests of the new data files and, apart (a manifest
    /// holds data or deletes), of the merged delete files.
    async fn write_new_manifests(
        &self,
        file_io: &FileIO,
        metadata: &TableMetadata,
    ) -> Result<Vec<ManifestFile>, IcebergError> {
        let mut out = Vec::new();
        for (files, suffix) in [(&self.added, "m0"), (&self.merged, "x0")] {
            if !files.is_empty() {
                let (id, commit) = (self.snapshot_id, &self.commit_id);
                let written =
                    write_new_manifests(file_io, metadata, id, commit, files.clone(), suffix);
                out.extend(written.await?);
            }
        }
        Ok(out)
    }

    /// Fails when a snapshot on `main` since the base removed a replaced
    /// file or added a delete that applies to a replaced data file; when
    /// rebasing, returns the position deletes and deletion vectors instead.
    async fn check_still_applies(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
    ) -> Result<(LateDeletes, Vec<i64>), IcebergError> {
        let mut late = LateDeletes::default();
        let mut chain = Vec::new();
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
            if !self.checked.contains_key(&id) {
                let mut added = Vec::new();
                for manifest in manifests_of(file_io, metadata, snapshot).await? {
                    if manifest.added_snapshot_id != id {
                        continue;
                    }
                    let entries = entries_of(file_io, &manifest).await?;
                    added.extend(entries.into_iter().filter(|e| e.snapshot_id == id));
                }
                // A round adds a delete file per data file it deletes from:
                // read them CHECK_READS at a time, folded in list order.
                let checks = added
                    .iter()
                    .map(|entry| self.check_entry(file_io, metadata, id, entry));
                let mut found = LateDeletes::default();
                let mut each = futures::stream::iter(checks).buffered(CHECK_READS);
                while let Some(late) = each.next().await {
                    found.absorb(late?);
                }
                drop(each);
                self.checked.insert(id, found);
            }
            late.merge(&self.checked[&id]);
            chain.push(id);
            next = snapshot.parent_snapshot_id();
        }
        Ok((late, chain))
    }

    /// What one entry snapshot `id` added means for the replace: an error
    /// when it makes the replace stale, else the late deletes it holds for
    /// the rewritten files (none for most).
    async fn check_entry(
        &self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        id: i64,
        entry: &Entry,
    ) -> Result<LateDeletes, IcebergError> {
        let mut late = LateDeletes::default();
        self.check_entry_into(file_io, metadata, id, entry, &mut late)
            .await?;
        Ok(late)
    }

    async fn check_entry_into(
        &self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        id: i64,
        entry: &Entry,
        late: &mut LateDeletes,
    ) -> Result<(), IcebergError> {
        if !entry.is_live() {
            // A delete file the plan read, replaced meanwhile (a deletion
            // vector merged into a newer one): the newer one is late.
            let replaced_delete = self.rebase.is_some() && !entry.is_data();
            if self.removed.contains_key(&file_identity(&entry.file)) && !replaced_delete {
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
                    Some(target) if self.rebase.is_some() => {
                        late.add(&target, &read_deletion_vector(file_io, &entry.file).await?);
                        late.scoped.push(entry.clone());
                        Ok(())
                    }
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
                    |p| self.rebase.is_some() || self.removed_data.contains(p),
                    &mut hits,
                )
                .await?;
                let scoped = hits.keys().all(|p| self.removed_data.contains(p));
                let mut reached = hits.iter().filter(|(p, _)| self.removed_data.contains(*p));
                match (reached.next(), &self.rebase) {
                    (None, _) => Ok(()),
                    (Some((hit, _)), None) => Err(stale(
                        metadata,
                        format!("snapshot {id} added position deletes for rewritten file {hit}"),
                    )),
                    (Some(first), Some(_)) => {
                        for (path, positions) in std::iter::once(first).chain(reached) {
                            late.add(path, positions);
                        }
                        if scoped {
                            late.scoped.push(entry.clone());
                        }
                        Ok(())
                    }
                }
            }
        }
    }

    /// The current snapshot's manifests, those holding removed files
    /// rewritten (removed entries DELETED, the others EXISTING), and the
    /// files removed: the replaced ones and the late delete files `scoped`
    /// that are still live.
    async fn carry_forward(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        attempt: u32,
        scoped: &HashSet<(String, i64)>,
    ) -> Result<(Vec<ManifestFile>, Vec<DataFile>), IcebergError> {
        let Some(current) = metadata.current_snapshot() else {
            return Err(stale(metadata, "the table has no snapshot".to_string()));
        };
        let removes_deletes = self.removed.len() > self.removed_data.len() || !scoped.is_empty();
        let is_removed = |f: &DataFile| {
            let id = file_identity(f);
            self.removed.contains_key(&id) || scoped.contains(&id)
        };
        let mut found: Vec<DataFile> = Vec::new();
        let mut out = Vec::new();
        let mut rewritten = 0;
        for manifest in manifests_of(file_io, metadata, current).await? {
            // Any engine's manifest of removals only (its snapshot recorded
            // them): a compaction replaces manifests anyway.
            if !has_live_files(&manifest) {
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
            // The files a later attempt removes beyond an earlier one's
            // (late delete files) were added after it: in other manifests.
            if let Some(forwarded) = self.forwarded.get(&manifest.manifest_path) {
                match forwarded {
                    None => out.push(manifest),
                    Some((rewritten, removed)) => {
                        found.extend(removed.iter().cloned());
                        out.push(rewritten.clone());
                    }
                }
                continue;
            }
            let entries = live_entries_of(file_io, &manifest).await?;
            if !entries.iter().any(|e| is_removed(&e.file)) {
                self.forwarded.insert(manifest.manifest_path.clone(), None);
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
            let (new, removed) = rewrite
                .write(&manifest, entries, is_removed, |d| stale(metadata, d))
                .await?;
            found.extend(removed.iter().cloned());
            out.push(new.clone());
            self.forwarded
                .insert(manifest.manifest_path.clone(), Some((new, removed)));
        }
        // Rebasing, a planned delete file may have been replaced (its
        // positions are late deletes); the data files must all be live.
        let needed = match self.rebase {
            Some(_) => self.removed_data.len(),
            None => self.removed.len(),
        };
        let present = found
            .iter()
            .filter(|f| self.removed.contains_key(&file_identity(f)))
            .filter(|f| self.rebase.is_none() || f.content_type() == DataContentType::Data)
            .count();
        if present != needed {
            return Err(stale(
                metadata,
                format!(
                    "{} of the {needed} files the compaction replaces are no longer live",
                    needed - present,
                ),
            ));
        }
        Ok((out, found))
    }

    /// Carries the late deletes onto the new files: writes their delete
    /// files and the manifests listing them. On v2 the delete files an
    /// earlier attempt wrote stay, and only the late deletes of the
    /// snapshots since are written (a data file may have several position
    /// delete files); on v3 (one deletion vector per data file) the earlier
    /// ones are deleted and all are written again.
    async fn carry_over(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        attempt: u32,
        (late, chain): (&LateDeletes, &[i64]),
    ) -> Result<Vec<ManifestFile>, IcebergError> {
        let adds = metadata.format_version() < iceberg::spec::FormatVersion::V3;
        let mut fresh = LateDeletes::default();
        if adds {
            for id in chain.iter().filter(|id| !self.carried_from.contains(id)) {
                fresh.merge(&self.checked[id]);
            }
        } else {
            for file in std::mem::take(&mut self.carried) {
                // Not committed: best effort, a later orphan pass catches it.
                let _ = file_io.delete(file.file_path()).await;
            }
            self.carried_rows = 0;
            self.carried_from.clear();
        }
        let fresh = if adds { &fresh } else { late };
        self.carried_from.extend(chain.iter().copied());
        self.carry(file_io, metadata, fresh).await?;
        if self.carried.is_empty() {
            return Ok(Vec::new());
        }
        write_new_manifests(
            file_io,
            metadata,
            self.snapshot_id,
            &self.commit_id,
            self.carried.clone(),
            &format!("d{attempt}"),
        )
        .await
    }

    /// Writes the delete files of `late` on the new files, adding them to
    /// `carried`.
    async fn carry(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        late: &LateDeletes,
    ) -> Result<(), IcebergError> {
        let Some(rebase) = self.rebase.as_ref().filter(|_| !late.positions.is_empty()) else {
            return Ok(());
        };
        let carried = match translate(file_io, rebase, late, &self.added).await? {
            Ok(carried) => carried,
            Err(detail) => {
                return Err(stale(
                    metadata,
                    format!("carrying late deletes over: {detail}"),
                ))
            }
        };
        self.carried_rows += carried.values().map(RoaringTreemap::len).sum::<u64>();
        let written = write_carried(file_io, metadata, rebase.zstd_level, carried, &self.added);
        self.carried.extend(written.await?);
        Ok(())
    }
}

/// The commit attempts of a compaction that do not hold the rounds'
/// commits up. With one, the second attempt held the rounds while it read
/// the deletes of every round that landed during the first (at 100,000
/// msg/s: five rounds, 1-3 s); with two, the held third reads those of the
/// one or two rounds that landed during the second.
const UNGATED_ATTEMPTS: u32 = 2;

// On `&mut`: the caller keeps the replace to read what its last attempt
// carried over and moved.
impl PendingCommit for &mut PendingReplace {
    fn commit_id(&self) -> &str {
        &self.commit_id
    }

    fn offsets(&self) -> Option<&OffsetsAdvance> {
        None
    }

    fn summary_extra_mut(&mut self) -> &mut BTreeMap<String, String> {
        &mut self.summary_extra
    }

    /// The first attempt reads every snapshot since the plan, the second
    /// those since the first, without holding the rounds up; the later
    /// ones hold the gate, with only a round or two to read.
    fn gated_from(&self) -> u32 {
        UNGATED_ATTEMPTS + 1
    }

    async fn build(
        &mut self,
        file_io: &FileIO,
        metadata: &TableMetadata,
        attempt: u32,
    ) -> Result<BuiltSnapshot, IcebergError> {
        let started = std::time::Instant::now();
        let (late, chain) = self.check_still_applies(file_io, metadata).await?;
        let checked = started.elapsed();
        if renew_snapshot_id_if_taken(metadata, &mut self.snapshot_id) {
            // Written with the old id.
            self.new_manifests = None;
            self.forwarded.clear();
        }
        if self.new_manifests.is_none() {
            self.new_manifests = Some(self.write_new_manifests(file_io, metadata).await?);
        }
        let mut manifests: Vec<ManifestFile> =
            self.new_manifests.iter().flatten().cloned().collect();
        let carried = self.carry_over(file_io, metadata, attempt, (&late, &chain));
        manifests.extend(carried.await?);
        let carried = started.elapsed();
        let scoped: HashSet<(String, i64)> =
            late.scoped.iter().map(|e| file_identity(&e.file)).collect();
        self.late = late.positions;
        let (carried_forward, removed) = self
            .carry_forward(file_io, metadata, attempt, &scoped)
            .await?;
        tracing::info!(
            attempt,
            late_rows = self.carried_rows,
            check_ms = checked.as_millis() as u64,
            carry_over_ms = (carried - checked).as_millis() as u64,
            manifests_ms = (started.elapsed() - carried).as_millis() as u64,
            "compaction commit attempt built"
        );
        manifests.extend(carried_forward);
        let added_deletes: Vec<DataFile> =
            self.carried.iter().chain(&self.merged).cloned().collect();
        let mut summary = summary(
            metadata.current_snapshot().map(|p| p.summary()),
            &self.added,
            &added_deletes,
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
