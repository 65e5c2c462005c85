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

use iceberg::spec::{DataContentType, FormatVersion, TableMetadata};

use crate::commit::manifest_entries::Entry;
use crate::deletes::partitions::FilePartition;
use crate::table_metadata::is_deletion_vector;

use super::plan::{CompactionOptions, Plan, Targets};

/// The data files left whose deletes get one merged position delete file
/// each (their positions in `Plan::positions`): (partition, path).
pub(crate) type MergedDeletes = Vec<(FilePartition, String)>;

/// The share of a data file's rows its deletes retire.
fn deleted_share(plan: &Plan, entry: &Entry) -> f64 {
    let deleted = plan.positions.get(entry.path()).map_or(0, |p| p.len());
    deleted as f64 / entry.file.record_count().max(1) as f64
}

/// The large data files of the default spec with deletes due that the
/// budget leaves for a later pass (none without a budget).
pub(crate) fn over_budget(
    plan: &Plan,
    metadata: &TableMetadata,
    options: &CompactionOptions,
    data: &[Entry],
    small: u64,
) -> HashSet<String> {
    let Some(budget) = options.rewrite_budget.filter(|_| plan.equality.is_empty()) else {
        return HashSet::new();
    };
    let current = metadata.default_partition_spec().spec_id();
    let mut large: Vec<(&Entry, f64)> = data
        .iter()
        .filter(|e| e.spec_id == current && e.file.file_size_in_bytes() >= small)
        .filter(|e| plan.deletes_due(e, options.min_deleted_percent))
        .map(|e| (e, deleted_share(plan, e)))
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

/// On a format 2 table, adds to `plan` the position delete files to merge
/// (to `removed_deletes`) and the data files left that get one merged
/// file each (`merged`): see the module doc.
pub(crate) fn merge_deletes(
    plan: &mut Plan,
    metadata: &TableMetadata,
    data: &[Entry],
    deletes: &[Entry],
    targets: &Targets,
) {
    if metadata.format_version() != FormatVersion::V2
        || !plan.equality.is_empty()
        || plan.groups.is_empty()
    {
        return;
    }
    let removed: HashSet<&str> = plan.removed_deletes.iter().map(Entry::path).collect();
    let rewritten: HashSet<&str> = plan.rewritten().map(Entry::path).collect();
    let kept: HashMap<&str, &Entry> = data
        .iter()
        .filter(|e| !rewritten.contains(e.path()))
        .map(|e| (e.path(), e))
        .collect();
    // The position delete files left, with the data files left they name.
    let mut left: Vec<(&Entry, Vec<&str>)> = Vec::new();
    let mut files_naming: HashMap<&str, usize> = HashMap::new();
    for (delete, named) in deletes.iter().zip(targets) {
        let position_file = delete.file.content_type() == DataContentType::PositionDeletes
            && !is_deletion_vector(&delete.file);
        let Some(named) = named.as_ref().filter(|_| position_file) else {
            continue;
        };
        if removed.contains(delete.path()) {
            continue;
        }
        let named: Vec<&str> = named
            .iter()
            .map(String::as_str)
            .filter(|p| kept.contains_key(p))
            .collect();
        for path in &named {
            *files_naming.entry(path).or_default() += 1;
        }
        left.push((delete, named));
    }
    let mut merged: BTreeSet<&str> = BTreeSet::new();
    for (delete, named) in left {
        if !named.iter().any(|p| files_naming[p] >= 2) {
            continue;
        }
        merged.extend(named);
        plan.removed_deletes.push(delete.clone());
    }
    plan.merged = merged
        .into_iter()
        .filter(|path| plan.positions.contains_key(*path))
        .map(|path| {
            let entry = kept[path];
            let partition = FilePartition {
                spec_id: entry.spec_id,
                value: entry.file.partition().clone(),
            };
            (partition, path.to_string())
        })
        .collect();
}
