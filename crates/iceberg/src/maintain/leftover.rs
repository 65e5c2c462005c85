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
//! - **Merged deletes** (format 2): a position delete file is removed with
//!   a compaction only when every data file it names is rewritten, and a
//!   follower's round writes one naming most files; so the delete files of
//!   the files left would pile up, one per round. When a partition keeps
//!   two or more position delete files after the plan, they are replaced
//!   by one holding the deleted positions of the partition's files left
//!   (those that apply: a delete never applies to a file committed after
//!   it). Only rows already deleted are named, so the merged file can
//!   neither bring back nor remove a row; a position that applied to no
//!   live file is dropped. Format 3 tables keep one deletion vector per
//!   data file anyway.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{DataContentType, FormatVersion, TableMetadata};

use crate::commit::manifest_entries::Entry;
use crate::deletes::partitions::FilePartition;
use crate::table_metadata::is_deletion_vector;

use super::plan::{CompactionOptions, Plan};

/// Deleted positions of the data files left, one merged delete file per
/// partition: (partition, data file path -> positions).
pub(crate) type MergedDeletes = Vec<(FilePartition, Vec<(String, Vec<u64>)>)>;

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

/// On a format 2 table, adds to `plan` the position delete files of each
/// partition that keeps two or more after it (to `removed_deletes`) and
/// the one file replacing them (`merged`): see the module doc.
pub(crate) fn merge_deletes(
    plan: &mut Plan,
    metadata: &TableMetadata,
    data: &[Entry],
    deletes: &[Entry],
) {
    if metadata.format_version() != FormatVersion::V2
        || !plan.equality.is_empty()
        || plan.groups.is_empty()
    {
        return;
    }
    let key = |e: &Entry| (e.spec_id, format!("{:?}", e.file.partition()));
    let removed: HashSet<&str> = plan.removed_deletes.iter().map(Entry::path).collect();
    let mut leftover: BTreeMap<(i32, String), Vec<&Entry>> = BTreeMap::new();
    for delete in deletes {
        let position_file = delete.file.content_type() == DataContentType::PositionDeletes
            && !is_deletion_vector(&delete.file);
        if position_file && !removed.contains(delete.path()) {
            leftover.entry(key(delete)).or_default().push(delete);
        }
    }
    leftover.retain(|_, files| files.len() >= 2);
    if leftover.is_empty() {
        return;
    }
    let rewritten: HashSet<&str> = plan.rewritten().map(Entry::path).collect();
    let mut kept: HashMap<(i32, String), Vec<&Entry>> = HashMap::new();
    for entry in data.iter().filter(|e| !rewritten.contains(e.path())) {
        kept.entry(key(entry)).or_default().push(entry);
    }
    let mut merged: MergedDeletes = Vec::new();
    let mut to_remove = Vec::new();
    for (partition, files) in leftover {
        let positions: Vec<(String, Vec<u64>)> = kept
            .get(&partition)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let deleted = plan.positions.get(e.path())?;
                Some((e.path().to_string(), deleted.iter().collect()))
            })
            .collect();
        let first = files[0];
        if !positions.is_empty() {
            let partition = FilePartition {
                spec_id: first.spec_id,
                value: first.file.partition().clone(),
            };
            merged.push((partition, positions));
        }
        to_remove.extend(files.into_iter().cloned());
    }
    plan.removed_deletes.extend(to_remove);
    plan.merged = merged;
}
