//! What a compaction leaves: the large files with deletes past a pass's
//! rewrite budget, and their deletes merged.
//!
//! - **Budget** (`CompactionOptions::rewrite_budget`, a follower's passes):
//!   of the large data files whose deletes are due, a pass rewrites those
//!   with the largest share of deleted rows first, while their bytes fit
//!   the budget (the first one always); the others wait for a later pass.
//!   Under updates spread over every key every file has deletes, and
//!   without a bound each pass would rewrite the whole table: its commit
//!   check and the key index's update after it would grow with the table.
//!   The new small files are merged whatever their size (they are the
//!   inflow since the last pass). No budget with equality deletes: they
//!   apply to every older file, so only rewriting all removes them.
//! - **Merged deletes** (format 2): a position delete file goes with a
//!   compaction only when every data file it names is rewritten, and a
//!   follower's round writes one per data file it deletes from; so the
//!   files left would gather one delete file per round. Each data file
//!   left that two or more position delete files name gets one file of
//!   its own instead, holding its deleted positions (those that apply: a
//!   delete never applies to a file committed after it), and every delete
//!   file naming it is removed (with the other data files those name
//!   getting theirs too). Only rows already deleted are named, so a merged
//!   file can neither bring back nor remove a row; a position that applied
//!   to no live file is dropped. Like a deletion vector, one delete file
//!   per data file, which a reader applies to that file only. Format 3
//!   tables keep one deletion vector per data file anyway.

use std::collections::{BTreeSet, HashMap, HashSet};

use roaring::RoaringTreemap;

use crate::commit::manifest_entries::Entry;
use crate::deletes::partitions::FilePartition;

/// The data files left whose deletes get one merged position delete file
/// each (their positions in the plan's `positions`): (partition, path).
pub(crate) type MergedDeletes = Vec<(FilePartition, String)>;

/// The share of a data file's rows its deletes retire.
fn deleted_share(positions: &HashMap<String, RoaringTreemap>, entry: &Entry) -> f64 {
    let deleted = positions.get(entry.path()).map_or(0, |p| p.len());
    deleted as f64 / entry.file.record_count().max(1) as f64
}

/// Of `large_due` (the large data files with deletes due), those the
/// budget leaves for a later pass: the files are taken by their share of
/// deleted rows, largest first, while their bytes fit (the first always).
pub(crate) fn over_budget(
    budget: u64,
    positions: &HashMap<String, RoaringTreemap>,
    large_due: Vec<&Entry>,
) -> HashSet<String> {
    let mut large: Vec<(&Entry, f64)> = large_due
        .into_iter()
        .map(|e| (e, deleted_share(positions, e)))
        .collect();
    large.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.path().cmp(b.0.path())));
    let mut spent = 0u64;
    let mut over = HashSet::new();
    for (at, (entry, _)) in large.into_iter().enumerate() {
        let size = entry.file.file_size_in_bytes();
        if at > 0 && spent.saturating_add(size) > budget {
            over.insert(entry.path().to_string());
        } else {
            spent += size;
        }
    }
    over
}

/// Of the position delete files a compaction leaves (each with the data
/// files it names), those merged away, and the data files left (`kept`)
/// that get one merged file each: see the module doc.
pub(crate) fn merge_deletes(
    kept: &HashMap<&str, &Entry>,
    left: &[(&Entry, &HashSet<String>)],
    positions: &HashMap<String, RoaringTreemap>,
) -> (Vec<Entry>, MergedDeletes) {
    let named_by: Vec<Vec<&str>> = left
        .iter()
        .map(|(_, named)| {
            named
                .iter()
                .map(String::as_str)
                .filter(|p| kept.contains_key(p))
                .collect()
        })
        .collect();
    let mut files_naming: HashMap<&str, usize> = HashMap::new();
    for path in named_by.iter().flatten() {
        *files_naming.entry(path).or_default() += 1;
    }
    let mut merged: BTreeSet<&str> = BTreeSet::new();
    let mut removed = Vec::new();
    for ((delete, _), named) in left.iter().zip(named_by) {
        if named.iter().any(|p| files_naming[p] >= 2) {
            merged.extend(named);
            removed.push((*delete).clone());
        }
    }
    let merged = merged
        .into_iter()
        .filter(|path| positions.contains_key(*path))
        .map(|path| {
            let entry = kept[path];
            let partition = FilePartition {
                spec_id: entry.spec_id,
                value: entry.file.partition().clone(),
            };
            (partition, path.to_string())
        })
        .collect();
    (removed, merged)
}
