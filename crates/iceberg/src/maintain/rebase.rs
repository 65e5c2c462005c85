//! A compaction carried over the deletes that landed while it rewrote.
//!
//! Under a steady upsert load every commit deletes rows in every data
//! file, so a compaction that is planned again whenever a commit's deletes
//! reach its files (`replace.rs`) never lands. Instead, the deletes that
//! reached the rewritten files since the plan ("late" deletes) are carried
//! onto the files the compaction wrote, in the same `replace` snapshot:
//!
//! - each late deleted row is found by its `_olake_id` key: read from the
//!   rewritten file at the deleted position, then looked up in the new
//!   files, where it must be exactly once (an upsert table holds one live
//!   row per key); anything else (a row without a key, a key found twice
//!   or not at all) leaves the replace stale, planned again as before;
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
}

/// Deletes committed on `main` since the plan that reach rewritten files.
#[derive(Debug, Default)]
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
}

/// The late deleted rows' positions in the new files, found by key;
/// [`Uncarried`] when a row cannot be found exactly once (plan again).
pub(crate) async fn translate(
    file_io: &FileIO,
    rebase: &Rebase,
    late: &LateDeletes,
    written: &[DataFile],
) -> Result<Result<BTreeMap<String, RoaringTreemap>, Uncarried>, IcebergError> {
    let mut wanted: HashSet<[u8; 16]> = HashSet::new();
    for (path, positions) in &late.positions {
        let mut fresh = positions.clone();
        if let Some(applied) = rebase.applied.get(path) {
            fresh -= applied;
        }
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
