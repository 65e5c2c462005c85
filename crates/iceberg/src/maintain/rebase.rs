//! A compaction carried over the deletes that landed while it rewrote.
//!
//! Under a steady upsert load every commit deletes rows in every data
//! file, so a compaction that is planned again whenever a commit's deletes
//! reach its files (`replace.rs`) never lands. Instead, the deletes that
//! reached the rewritten files since the plan ("late" deletes) are carried
//! onto the files the compaction wrote, in the same `replace` snapshot:
//!
//! - where the rewrite wrote a group's rows in the order it read them (one
//!   partition, no sort order: [`RowMap`]), a late deleted row's new place
//!   is counted: the rows of the files before it in the group, plus its
//!   position, minus the rows the rewrite left out before it; nothing is
//!   read;
//! - elsewhere each late deleted row is found by its `_olake_id` key: read
//!   from the rewritten file at the deleted position, then looked up in the
//!   new files, where it must be exactly once (an upsert table holds one
//!   live row per key); anything else (a row without a key, a key found
//!   twice or not at all) leaves the replace stale, planned again as
//!   before;
//! - the positions found become delete files of the new files, written
//!   as the table writes deletes (deletion vectors on v3, one position
//!   delete file per data file on v2); they take the replace's sequence
//!   number, which is the new files', so they apply to them;
//! - the late delete files that name rewritten files only are removed
//!   with them (a later deletion vector that replaced one the plan read is
//!   fine: its positions are the late ones).
//!
//! Only tables with the key column and without equality deletes are
//! carried over (a row an equality delete retired is not in the new files,
//! and its key may be another row's there); others are planned again.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, TableMetadata};
use roaring::RoaringTreemap;

use crate::commit::manifest_entries::Entry;
use crate::deletes::deletion_vectors::write_deletion_vectors;
use crate::deletes::partitions::FilePartition;
use crate::deletes::position::write_position_delete_file;
use crate::error::IcebergError;
use crate::key_index::scan::read_keys;
use crate::table_metadata::spec_id;

/// What carrying deletes over needs from the compaction.
#[derive(Debug)]
pub(crate) struct Rebase {
    /// The deleted positions its rewrite left out, per rewritten file.
    pub applied: HashMap<String, RoaringTreemap>,
    /// The table's `_olake_id` field id.
    pub key_field: i32,
    /// zstd level of position delete files.
    pub zstd_level: i32,
    /// Where the rows of groups written in read order went.
    pub rows: RowMap,
}

/// Where each rewritten file's live rows went, for the groups the rewrite
/// wrote in the order it read them: each file's first row in the group's
/// output, and the group's new files in order with the row each ends at.
#[derive(Debug, Default)]
pub(crate) struct RowMap {
    /// Rewritten file -> (group, its first row, the row after its last).
    inputs: HashMap<String, (usize, u64, u64)>,
    /// Per group: each new file and the group's row its rows end at.
    outputs: Vec<Vec<(String, u64)>>,
}

impl RowMap {
    /// Records a group: `inputs` are its rewritten files with the output
    /// row each started at, `rows` the rows written, `files` the new files
    /// in the order they were written. A group whose files do not hold
    /// exactly `rows` rows is left out (its deletes are found by key).
    pub fn add_group(&mut self, inputs: &[(String, u64)], rows: u64, files: &[DataFile]) {
        let mut end = 0;
        let outputs: Vec<(String, u64)> = files
            .iter()
            .map(|f| {
                end += f.record_count();
                (f.file_path().to_string(), end)
            })
            .collect();
        if end != rows {
            return;
        }
        let group = self.outputs.len();
        self.outputs.push(outputs);
        for (i, (path, start)) in inputs.iter().enumerate() {
            let next = inputs.get(i + 1).map_or(rows, |(_, s)| *s);
            self.inputs.insert(path.clone(), (group, *start, next));
        }
    }

    /// Whether `path`'s rows are mapped.
    fn maps(&self, path: &str) -> bool {
        self.inputs.contains_key(path)
    }

    /// The new file and position of the `kept`-th live row of `path`.
    fn place(&self, path: &str, kept: u64) -> Option<(&str, u64)> {
        let &(group, start, next) = self.inputs.get(path)?;
        let row = start + kept;
        if row >= next {
            return None;
        }
        locate(&self.outputs[group], row).map(|(file, pos)| (file.as_str(), pos))
    }
}

/// The new file holding a group's `row` and the row's position in it, of
/// a group's new files in order with the group row each ends at.
fn locate<F>(outputs: &[(F, u64)], row: u64) -> Option<(&F, u64)> {
    let i = outputs.partition_point(|(_, end)| *end <= row);
    let first = if i == 0 { 0 } else { outputs[i - 1].1 };
    outputs.get(i).map(|(file, _)| (file, row - first))
}

/// Where a committed compaction moved the rows of the files it rewrote,
/// when every group was written in read order: what lets this process's
/// key index follow the compaction by counting instead of reading the new
/// files' keys (`key_index/build.rs`).
#[derive(Debug)]
pub(crate) struct RowMoves {
    rows: RowMap,
    /// Per rewritten file: the rows the rewrite left out.
    applied: HashMap<String, Arc<RoaringTreemap>>,
    /// Per rewritten file: the rows deleted meanwhile, carried over.
    late: HashMap<String, Arc<RoaringTreemap>>,
}

impl RowMoves {
    /// The moves of a compaction with `rebase` whose commit carried `late`
    /// over; `None` when a rewritten file's rows were not written in read
    /// order.
    pub(crate) fn new<'a>(
        rebase: Rebase,
        late: BTreeMap<String, RoaringTreemap>,
        mut rewritten: impl Iterator<Item = &'a str>,
    ) -> Option<Self> {
        if !rewritten.all(|path| rebase.rows.maps(path)) {
            return None;
        }
        let shared = |(path, rows)| (path, Arc::new(rows));
        Some(Self {
            rows: rebase.rows,
            applied: rebase.applied.into_iter().map(shared).collect(),
            late: late.into_iter().map(shared).collect(),
        })
    }

    /// The rows the compaction wrote: every live row of the files it
    /// rewrote, each at its new place.
    pub(crate) fn rows(&self) -> u64 {
        let ends = self.rows.outputs.iter().filter_map(|group| group.last());
        ends.map(|(_, end)| *end).sum()
    }

    /// The new files.
    pub(crate) fn new_files(&self) -> impl Iterator<Item = &str> {
        self.rows
            .outputs
            .iter()
            .flatten()
            .map(|(path, _)| path.as_str())
    }

    /// `positions` (live rows before the compaction, per data file) at
    /// their places after it; `None` when one of them is not a row the
    /// compaction moved as live (it left it out or carried a delete of
    /// it over): the positions were not computed on the rows it read.
    pub(crate) fn carry(
        &self,
        positions: &BTreeMap<String, RoaringTreemap>,
    ) -> Option<BTreeMap<String, RoaringTreemap>> {
        let mut out: HashMap<&str, RoaringTreemap> = HashMap::new();
        for (path, rows) in positions {
            let Some(&(group, start, next)) = self.rows.inputs.get(path) else {
                *out.entry(path.as_str()).or_default() |= rows;
                continue;
            };
            let applied = self.applied.get(path).map(Arc::as_ref);
            let late = self.late.get(path).map(Arc::as_ref);
            for pos in rows {
                if applied.is_some_and(|a| a.contains(pos)) || late.is_some_and(|l| l.contains(pos))
                {
                    return None;
                }
                let row = start + pos - applied.map_or(0, |a| a.rank(pos));
                if row >= next {
                    return None;
                }
                let (file, at) = locate(&self.rows.outputs[group], row)?;
                out.entry(file.as_str()).or_default().insert(at);
            }
        }
        Some(out.into_iter().map(|(p, r)| (p.to_string(), r)).collect())
    }

    /// The moves with files named by the caller's ids: `old` gives the id
    /// of a rewritten file (`None`: the caller has no such file), `new`
    /// the id of a new file. What a pass over millions of rows looks up.
    pub(crate) fn by_id(
        &self,
        old: impl Fn(&str) -> Option<u32>,
        new: impl Fn(&str) -> u32,
    ) -> MovesById {
        let mut files: Vec<Option<FileMove>> = Vec::new();
        for (path, &(group, start, next)) in &self.rows.inputs {
            let Some(id) = old(path) else { continue };
            let id = id as usize;
            if files.len() <= id {
                files.resize_with(id + 1, || None);
            }
            files[id] = Some(FileMove {
                applied: self.applied.get(path).cloned(),
                late: self.late.get(path).cloned(),
                group,
                start,
                next,
            });
        }
        let groups = self
            .rows
            .outputs
            .iter()
            .map(|outputs| outputs.iter().map(|(p, end)| (new(p), *end)).collect())
            .collect();
        MovesById { files, groups }
    }
}

/// One rewritten file's rows in [`MovesById`].
#[derive(Debug)]
struct FileMove {
    applied: Option<Arc<RoaringTreemap>>,
    late: Option<Arc<RoaringTreemap>>,
    group: usize,
    start: u64,
    next: u64,
}

/// [`RowMoves`] by file id.
#[derive(Debug)]
pub(crate) struct MovesById {
    /// By the rewritten file's id.
    files: Vec<Option<FileMove>>,
    /// Per group: each new file's id and the group's row its rows end at.
    groups: Vec<Vec<(u32, u64)>>,
}

/// Where a row is after a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moved {
    /// Its file was not rewritten.
    Stayed,
    /// At this file id and position.
    To(u32, u64),
    /// The compaction left it out or deleted it (a live row never is).
    Gone,
}

impl MovesById {
    /// The ids of the new files.
    pub(crate) fn new_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.groups.iter().flatten().map(|(id, _)| *id)
    }

    /// Where row `pos` of file `file` is now.
    pub(crate) fn place(&self, file: u32, pos: u64) -> Moved {
        let Some(Some(m)) = self.files.get(file as usize) else {
            return Moved::Stayed;
        };
        let (applied, late) = (m.applied.as_deref(), m.late.as_deref());
        if applied.is_some_and(|a| a.contains(pos)) || late.is_some_and(|l| l.contains(pos)) {
            return Moved::Gone;
        }
        let row = m.start + pos - applied.map_or(0, |a| a.rank(pos));
        if row >= m.next {
            return Moved::Gone;
        }
        match locate(&self.groups[m.group], row) {
            Some((&id, pos)) => Moved::To(id, pos),
            None => Moved::Gone,
        }
    }
}

/// Deletes committed on `main` since the plan that reach rewritten files.
#[derive(Debug, Clone, Default)]
pub(crate) struct LateDeletes {
    /// Deleted positions per rewritten data file.
    pub positions: BTreeMap<String, RoaringTreemap>,
    /// Late delete files that name rewritten files only.
    pub scoped: Vec<Entry>,
}

impl LateDeletes {
    pub fn add(&mut self, path: &str, positions: &RoaringTreemap) {
        *self.positions.entry(path.to_string()).or_default() |= positions;
    }

    /// Adds `other`'s late deletes, taking them.
    pub fn absorb(&mut self, other: LateDeletes) {
        for (path, positions) in other.positions {
            match self.positions.get_mut(&path) {
                Some(mine) => *mine |= positions,
                None => {
                    self.positions.insert(path, positions);
                }
            }
        }
        self.scoped.extend(other.scoped);
    }

    /// Adds another snapshot's late deletes.
    pub fn merge(&mut self, other: &LateDeletes) {
        self.absorb(other.clone());
    }
}

/// Why late deletes cannot be carried over (the compaction plans again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Uncarried {
    #[error("row {pos} of {path} has no key")]
    Keyless { path: String, pos: u64 },
    #[error("row {pos} of {path} repeats a deleted key")]
    RepeatedKey { path: String, pos: u64 },
    #[error("a deleted key is in the new files twice")]
    TwiceInNewFiles,
    #[error("{missing} of {wanted} deleted rows are not in the new files")]
    Missing { missing: usize, wanted: usize },
    #[error("row {pos} of {path} is past the rows the compaction wrote for it")]
    PastRewrite { path: String, pos: u64 },
}

/// The late deleted rows' positions in the new files: counted where the
/// rows were written in read order, else found by key; [`Uncarried`] when
/// a row cannot be placed exactly once (plan again).
pub(crate) async fn translate(
    file_io: &FileIO,
    rebase: &Rebase,
    late: &LateDeletes,
    written: &[DataFile],
) -> Result<Result<BTreeMap<String, RoaringTreemap>, Uncarried>, IcebergError> {
    let mut found: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    let mut by_key = LateDeletes::default();
    for (path, positions) in &late.positions {
        let mut fresh = positions.clone();
        let applied = rebase.applied.get(path);
        if let Some(applied) = applied {
            fresh -= applied;
        }
        if !rebase.rows.maps(path) {
            by_key.add(path, &fresh);
            continue;
        }
        for pos in fresh {
            let dropped = applied.map_or(0, |a| a.rank(pos));
            let Some((file, new_pos)) = rebase.rows.place(path, pos - dropped) else {
                let path = path.clone();
                return Ok(Err(Uncarried::PastRewrite { path, pos }));
            };
            found.entry(file.to_string()).or_default().insert(new_pos);
        }
    }
    if by_key.positions.values().all(RoaringTreemap::is_empty) {
        return Ok(Ok(found));
    }
    let by_key = match translate_by_key(file_io, rebase, &by_key, written).await? {
        Ok(by_key) => by_key,
        Err(uncarried) => return Ok(Err(uncarried)),
    };
    for (file, positions) in by_key {
        *found.entry(file).or_default() |= positions;
    }
    Ok(Ok(found))
}

/// The late deleted rows (the rewrite's own deletes already taken out)
/// found in the new files by key.
async fn translate_by_key(
    file_io: &FileIO,
    rebase: &Rebase,
    late: &LateDeletes,
    written: &[DataFile],
) -> Result<Result<BTreeMap<String, RoaringTreemap>, Uncarried>, IcebergError> {
    let mut wanted: HashSet<[u8; 16]> = HashSet::new();
    for (path, fresh) in &late.positions {
        if fresh.is_empty() {
            continue;
        }
        let mut keyless = None;
        let mut twice = None;
        read_keys(file_io, path, rebase.key_field, |pos, key| {
            if fresh.contains(pos) {
                match key {
                    None => keyless = Some(pos),
                    Some(k) if !wanted.insert(k) => twice = Some(pos),
                    Some(_) => {}
                }
            }
            Ok(())
        })
        .await?;
        if let Some(pos) = keyless {
            let path = path.clone();
            return Ok(Err(Uncarried::Keyless { path, pos }));
        }
        if let Some(pos) = twice {
            let path = path.clone();
            return Ok(Err(Uncarried::RepeatedKey { path, pos }));
        }
    }
    let mut found: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    let mut seen: HashSet<[u8; 16]> = HashSet::with_capacity(wanted.len());
    let mut repeated = false;
    for file in written {
        let path = file.file_path();
        let mut hits = RoaringTreemap::new();
        read_keys(file_io, path, rebase.key_field, |pos, key| {
            if let Some(k) = key.filter(|k| wanted.contains(k)) {
                repeated |= !seen.insert(k);
                hits.insert(pos);
            }
            Ok(())
        })
        .await?;
        if !hits.is_empty() {
            found.insert(path.to_string(), hits);
        }
    }
    if repeated {
        return Ok(Err(Uncarried::TwiceInNewFiles));
    }
    if seen.len() != wanted.len() {
        return Ok(Err(Uncarried::Missing {
            missing: wanted.len() - seen.len(),
            wanted: wanted.len(),
        }));
    }
    Ok(Ok(found))
}

/// Writes the carried deletes of the new files: deletion vectors on a v3
/// table, one position delete file per data file on v2.
pub(crate) async fn write_carried(
    file_io: &FileIO,
    metadata: &TableMetadata,
    zstd_level: i32,
    carried: BTreeMap<String, RoaringTreemap>,
    written: &[DataFile],
) -> Result<Vec<DataFile>, IcebergError> {
    let partitions: HashMap<String, FilePartition> = written
        .iter()
        .filter(|f| carried.contains_key(f.file_path()))
        .map(|f| {
            let partition = FilePartition {
                spec_id: spec_id(f),
                value: f.partition().clone(),
            };
            (f.file_path().to_string(), partition)
        })
        .collect();
    if metadata.format_version() == iceberg::spec::FormatVersion::V3 {
        let vectors: Vec<(String, RoaringTreemap)> = carried.into_iter().collect();
        return write_deletion_vectors(file_io, metadata, &vectors, &partitions).await;
    }
    let mut files = Vec::with_capacity(carried.len());
    for (path, positions) in carried {
        let deletes = [(path.clone(), positions.into_iter().collect::<Vec<u64>>())];
        let partition = &partitions[&path];
        if let Some(file) =
            write_position_delete_file(file_io, metadata, &deletes, partition, zstd_level).await?
        {
            files.push(file);
        }
    }
    Ok(files)
}
