//! Filling the index from the table: a full rebuild from the current
//! snapshot, or an update from the snapshots committed since the one the
//! index reflects.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileFormat, ManifestStatus, Operation, SnapshotRef, TableMetadata,
};
use roaring::RoaringTreemap;

use super::scan::{
    read_deletion_vector, read_keys, read_position_deletes, read_stamped_keys, snapshot_files,
    FileEntry, KeyFields,
};
use super::store::{store_err, Blocks, Op, Store, FLUSH_OPS};
use super::IndexedRow;
use crate::error::IcebergError;
use crate::maintain::rebase::RowMoves;

/// The row moves of this process's compaction committed as a snapshot.
pub(crate) type MovesOf<'a> = &'a (dyn Fn(i64) -> Option<Arc<RowMoves>> + Sync);

/// Counts of a rebuild or update.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BuildStats {
    /// Data files whose key column was read.
    pub data_files_read: u64,
    /// Rows read from them.
    pub rows_read: u64,
    /// Rows skipped because a delete file or deletion vector deletes them.
    pub deleted_rows_skipped: u64,
    /// Rows with a null or malformed `_olake_id` (not indexed).
    pub unkeyed_rows: u64,
    /// Keys found on more than one live row (kept: the later one, by data
    /// sequence number, then file, then position). Should stay 0 in an
    /// upsert table.
    pub duplicate_keys: u64,
    /// Keys removed because a delete retired their row.
    pub keys_removed: u64,
    /// Rows moved by this process's compactions, followed by counting
    /// rather than by reading the new files (`maintain/rebase.rs`): kept
    /// as moves that lookups go through until a merge folds them in.
    pub rows_moved: u64,
}

/// Buffers index changes and writes them as runs of bounded size.
struct Writer<'a> {
    store: &'a mut Store,
    ops: Vec<Op>,
    step: &'a str,
    stats: BuildStats,
    /// A rebuild's puts: written without looking keys up; a `Put` replacing
    /// a present key counts as a duplicate.
    rebuild: bool,
    /// `Put`s that replaced a present key, and rows put, so far.
    replaced: u64,
    puts: u64,
}

impl<'a> Writer<'a> {
    fn new(store: &'a mut Store, step: &'a str, rebuild: bool) -> Self {
        Self {
            store,
            ops: Vec::new(),
            step,
            stats: BuildStats::default(),
            rebuild,
            replaced: 0,
            puts: 0,
        }
    }

    fn push(&mut self, op: Op) -> Result<(), IcebergError> {
        self.ops.push(op);
        if self.ops.len() >= FLUSH_OPS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IcebergError> {
        if self.ops.is_empty() {
            return Ok(());
        }
        let done = self
            .store
            .write(&mut self.ops, !self.rebuild)
            .map_err(|e| store_err(self.step, e))?;
        if self.rebuild {
            self.stats.duplicate_keys += done.replaced;
        }
        self.replaced += done.replaced;
        self.stats.keys_removed += done.removed;
        self.ops.clear();
        Ok(())
    }

    /// Ids for data file paths.
    fn file_ids(&mut self, paths: &[&str]) -> Vec<u32> {
        paths.iter().map(|p| self.store.file_id(p)).collect()
    }

    /// Reads a data file's keys and records each row not in `deleted`.
    async fn index_file(
        &mut self,
        file_io: &FileIO,
        path: &str,
        id: u32,
        fields: KeyFields,
        deleted: Option<&RoaringTreemap>,
    ) -> Result<(), IcebergError> {
        self.stats.data_files_read += 1;
        read_stamped_keys(file_io, path, fields, |pos, key, stamp| {
            self.stats.rows_read += 1;
            if deleted.is_some_and(|d| d.contains(pos)) {
                self.stats.deleted_rows_skipped += 1;
                return Ok(());
            }
            match key {
                Some(key) => {
                    self.puts += 1;
                    let row = IndexedRow {
                        file: id,
                        pos,
                        stamp,
                    };
                    self.push(Op::Put(key, row))
                }
                None => {
                    self.stats.unkeyed_rows += 1;
                    Ok(())
                }
            }
        })
        .await
    }
}

/// A `replace` this process committed with known row moves: followed by
/// keeping the moves (`true`), reading no file; else (`false`) it is
/// replayed by reading.
fn replay_by_counting(
    writer: &mut Writer<'_>,
    snapshot: &SnapshotRef,
    moves: MovesOf<'_>,
) -> Result<bool, IcebergError> {
    if snapshot.summary().operation != Operation::Replace {
        return Ok(false);
    }
    let Some(moves) = moves(snapshot.snapshot_id()) else {
        return Ok(false);
    };
    // The ops so far are about the files before the compaction: their run
    // is one the moves apply to.
    writer.flush()?;
    let store = &mut *writer.store;
    let new_ids: HashMap<&str, u32> = moves
        .new_files()
        .map(|path| (path, store.file_id(path)))
        .collect();
    let by_id = moves.by_id(|p| store.known_file_id(p), |p| new_ids[p]);
    store.add_moves(by_id);
    writer.stats.rows_moved += moves.rows();
    Ok(true)
}

/// Adds the deletes of the delete files in `entries` to `out`, keeping
/// only those `applies(data file path, delete sequence number)` accepts.
async fn collect_deletes(
    file_io: &FileIO,
    entries: &[&FileEntry],
    applies: impl Fn(&str, i64) -> bool,
    out: &mut HashMap<String, RoaringTreemap>,
) -> Result<(), IcebergError> {
    for entry in entries {
        if entry.content != DataContentType::PositionDeletes {
            continue;
        }
        if entry.format == DataFileFormat::Puffin {
            let Some(target) = entry.referenced_data_file.as_deref() else {
                continue;
            };
            if applies(target, entry.seq) {
                let bitmap = read_deletion_vector(file_io, entry).await?;
                *out.entry(target.to_string()).or_default() |= bitmap;
            }
        } else {
            let seq = entry.seq;
            read_position_deletes(file_io, &entry.path, |p| applies(p, seq), out).await?;
        }
    }
    Ok(())
}

/// Fills an empty index from the table's current snapshot (not committed:
/// the caller commits).
pub(crate) async fn rebuild(
    store: &mut Store,
    step: &str,
    metadata: &TableMetadata,
    file_io: &FileIO,
    fields: KeyFields,
) -> Result<BuildStats, IcebergError> {
    let mut writer = Writer::new(store, step, true);
    let Some(snapshot) = metadata.current_snapshot() else {
        return Ok(writer.stats);
    };
    let entries = snapshot_files(file_io, metadata, snapshot, None).await?;
    let mut data: Vec<&FileEntry> = entries
        .iter()
        .filter(|e| e.content == DataContentType::Data)
        .collect();
    // Later rows win: data sequence number, then path, then position.
    data.sort_by(|a, b| (a.seq, &a.path).cmp(&(b.seq, &b.path)));
    let seqs: HashMap<&str, i64> = data.iter().map(|e| (e.path.as_str(), e.seq)).collect();
    let delete_files: Vec<&FileEntry> = entries
        .iter()
        .filter(|e| e.content != DataContentType::Data)
        .collect();
    let mut deletes = HashMap::new();
    // A position delete or DV applies to data files with a sequence number
    // <= its own.
    let applies = |path: &str, seq: i64| seqs.get(path).is_some_and(|s| *s <= seq);
    collect_deletes(file_io, &delete_files, applies, &mut deletes).await?;

    let paths: Vec<&str> = data.iter().map(|e| e.path.as_str()).collect();
    let ids = writer.file_ids(&paths);
    for (entry, id) in data.iter().zip(&ids) {
        let deleted = deletes.get(&entry.path);
        writer
            .index_file(file_io, &entry.path, *id, fields, deleted)
            .await?;
    }
    writer.flush()?;
    // One run; keys on more than one run's entry were duplicates.
    let shadowed = writer.store.merge_all().map_err(|e| store_err(step, e))?;
    writer.stats.duplicate_keys += shadowed;
    writer.rebuild = false;
    // Equality deletes on the key column retire older rows of their keys.
    let file_seq: HashMap<u32, i64> = ids
        .iter()
        .copied()
        .zip(data.iter().map(|e| e.seq))
        .collect();
    for eq in delete_files
        .iter()
        .filter(|e| e.content == DataContentType::EqualityDeletes)
    {
        if eq.equality_ids.as_deref() != Some(&[fields.key]) {
            return Err(IcebergError::new(
                crate::IcebergErrorKind::Data,
                format!("rebuilding the key index from {}", eq.path),
                "an equality delete file on columns other than _olake_id",
            ));
        }
        let mut keys = Vec::new();
        read_keys(file_io, &eq.path, fields.key, |_, key| {
            keys.extend(key);
            Ok(())
        })
        .await?;
        keys.sort_unstable();
        let mut blocks = Blocks::default();
        for key in keys {
            let found = writer
                .store
                .get(&key, &mut blocks)
                .map_err(|e| store_err(step, e))?;
            if let Some(row) = found {
                if file_seq.get(&row.file).is_some_and(|s| *s < eq.seq) {
                    writer.push(Op::RemoveIfAt(key, row.file, row.pos))?;
                }
            }
        }
        writer.flush()?;
    }
    Ok(writer.stats)
}

/// Main's snapshots after `recorded` up to the current one, oldest first;
/// `None` when `recorded` is not an ancestor of the current snapshot.
pub(crate) fn snapshots_since(
    metadata: &TableMetadata,
    recorded: Option<i64>,
) -> Option<Vec<SnapshotRef>> {
    let mut chain = Vec::new();
    let mut next = metadata.current_snapshot_id();
    while let Some(id) = next {
        if Some(id) == recorded {
            chain.reverse();
            return Some(chain);
        }
        let snapshot = metadata.snapshot_by_id(id)?;
        next = snapshot.parent_snapshot_id();
        chain.push(snapshot.clone());
    }
    // Reached the first snapshot: fine only if the index reflects an empty
    // table.
    recorded.is_none().then(|| {
        chain.reverse();
        chain
    })
}

/// Why the snapshots since the index's cannot be replayed into it (the
/// index is rebuilt instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayRefused {
    /// A snapshot removes a data file outside a `replace` (an overwrite).
    #[error("snapshot {snapshot} removes data file {file} (an overwrite)")]
    Overwrite { snapshot: i64, file: String },
    /// A snapshot adds equality deletes.
    #[error("snapshot {snapshot} adds equality deletes")]
    EqualityDeletes { snapshot: i64 },
    /// A `replace` moved rows the index did not have where it thought.
    #[error("snapshot {snapshot} (replace) moved {moved} rows, {found} of them indexed before")]
    RowsMoved {
        snapshot: i64,
        moved: u64,
        found: u64,
    },
}

/// Brings the index from the snapshot it reflects to the table's current
/// one by replaying `chain`. `Ok(Err(reason))`: a snapshot cannot be
/// replayed (it removes data files outside a `replace`, or adds equality
/// deletes): rebuild.
///
/// A `replace` (a compaction: ours or another engine's) moves every live
/// row of the files it removes into the files it adds: their keys are
/// indexed at their new place. Each one must replace a key the index had;
/// one that does not (the rows were not where the index thought) means a
/// rebuild. A `replace` this process committed with known row moves
/// (`moves`) is followed without reading a file: the index keeps the moves
/// ([`replay_by_counting`], `moves.rs`).
pub(crate) async fn update(
    store: &mut Store,
    step: &str,
    metadata: &TableMetadata,
    file_io: &FileIO,
    fields: KeyFields,
    chain: &[SnapshotRef],
    moves: MovesOf<'_>,
) -> Result<Result<BuildStats, ReplayRefused>, IcebergError> {
    // Not committed here: a crash in between leaves the index as it was.
    let mut writer = Writer::new(store, step, false);
    for snapshot in chain {
        let id = snapshot.snapshot_id();
        if replay_by_counting(&mut writer, snapshot, moves)? {
            continue;
        }
        let entries = snapshot_files(file_io, metadata, snapshot, Some(id)).await?;
        let replace = snapshot.summary().operation == Operation::Replace;
        for entry in &entries {
            if entry.status == ManifestStatus::Deleted
                && entry.content == DataContentType::Data
                && !replace
            {
                return Ok(Err(ReplayRefused::Overwrite {
                    snapshot: id,
                    file: entry.path.clone(),
                }));
            }
            if entry.content == DataContentType::EqualityDeletes
                && entry.status == ManifestStatus::Added
            {
                return Ok(Err(ReplayRefused::EqualityDeletes { snapshot: id }));
            }
        }
        let (replaced_before, puts_before) = (writer.replaced, writer.puts);
        let added: Vec<&FileEntry> = entries
            .iter()
            .filter(|e| e.status == ManifestStatus::Added)
            .collect();
        let mut deletes = HashMap::new();
        collect_deletes(file_io, &added, |_, _| true, &mut deletes).await?;
        let new_data: Vec<&FileEntry> = added
            .iter()
            .copied()
            .filter(|e| e.content == DataContentType::Data)
            .collect();
        let paths: Vec<&str> = new_data.iter().map(|e| e.path.as_str()).collect();
        let ids = writer.file_ids(&paths);
        for (entry, id) in new_data.iter().zip(ids) {
            let deleted = deletes.get(&entry.path);
            writer
                .index_file(file_io, &entry.path, id, fields, deleted)
                .await?;
        }
        writer.flush()?;
        if replace {
            let moved = writer.puts - puts_before;
            let found = writer.replaced - replaced_before;
            if moved != found {
                return Ok(Err(ReplayRefused::RowsMoved {
                    snapshot: id,
                    moved,
                    found,
                }));
            }
        }
        // Deletes of older rows: forget a key whose row they retire (unless
        // the key already points at a newer row).
        let new_paths: HashSet<&str> = paths.iter().copied().collect();
        for (path, positions) in &deletes {
            if new_paths.contains(path.as_str()) {
                continue;
            }
            let Some(file) = writer.store.known_file_id(path) else {
                continue;
            };
            let mut ops = Vec::new();
            read_keys(file_io, path, fields.key, |pos, key| {
                if let Some(key) = key.filter(|_| positions.contains(pos)) {
                    ops.push(Op::RemoveIfAt(key, file, pos));
                }
                Ok(())
            })
            .await?;
            for op in ops {
                writer.push(op)?;
            }
        }
        writer.flush()?;
    }
    Ok(Ok(writer.stats))
}
