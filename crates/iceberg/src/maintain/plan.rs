//! Which files a compaction rewrites, and the deletes it applies on the
//! way: read from the table's current snapshot.
//!
//! - every delete is read: deletion vectors and position delete files
//!   (positions per data file, each applying to data files with a data
//!   sequence number <= its own), equality delete files on `_olake_id`
//!   (keys, applying to data files with a lower data sequence number);
//! - data files are grouped by (partition spec, partition); in a group,
//!   the files whose deletes are due (equality deletes apply, or position
//!   deletes retire at least `min_deleted_percent` of their rows: any, by
//!   default) and the small ones (under three quarters of the target size)
//!   are candidates, rewritten when one of them has deletes due or there
//!   are at least `min_input_files` of them;
//! - `tiered` (a follower's passes): of the small files without deletes,
//!   the largest ones that are each more than twice all the smaller ones
//!   together are left; the rest are merged ([`tiered_picks`]). A pass then rewrites the new small files, not the
//!   file the last passes built: each row is rewritten about log2(target /
//!   first size) times instead of once per pass, and a partition holds
//!   about that many files at most between passes;
//! - with a rewrite budget (a follower's passes), the large files with
//!   deletes past it are left for a later pass; on format 2 the position
//!   delete files of each data file left are merged into one
//!   (`leftover.rs`);
//! - a delete file is removed with the rewrite when every data file it
//!   can apply to is rewritten (or no longer live).
//!
//! A group of the table's default spec is rewritten into files of the
//! same partition: its spec id and partition values as the manifests have
//! them. A group of an older spec (written before another engine changed
//! the spec, e.g. Spark's `ADD PARTITION FIELD`) is re-partitioned: every
//! file of it is a candidate whatever its size, the group is always worth
//! rewriting, and its rows are written into files of the current default
//! spec, split by their partition values in it. A default-spec group the
//! current schema can no longer bind (a source column dropped) is left
//! alone and reported.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, FormatVersion, PartitionSpecRef, Struct, TableMetadata};
use roaring::RoaringTreemap;

use crate::commit::manifest_entries::{live_entries, Entry};
use crate::deletes::deletion_vectors::read_deletion_vector;
use crate::error::IcebergError;
use crate::key_index::scan::{read_keys, read_position_deletes, KEY_COLUMN};
use crate::table_metadata::is_deletion_vector;

use super::leftover::{self, MergedDeletes};

/// The sizes a compaction aims at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionOptions {
    /// Data files are written at about this size (bytes); smaller than
    /// three quarters of it is small.
    pub target_file_size: u64,
    /// Small files that make a group worth rewriting.
    pub min_input_files: usize,
    /// A data file with position deletes is a candidate once at least
    /// this percentage of its rows are deleted (0: any delete).
    pub min_deleted_percent: u8,
    /// zstd level of the files written.
    pub zstd_level: i32,
    /// Merge small files of about the same size only (a follower's
    /// frequent passes); `false`: every small file of a group at once.
    pub tiered: bool,
    /// The bytes of large data files with deletes rewritten at most,
    /// those with the largest share of deleted rows first (a follower's
    /// passes, `leftover.rs`); `None`: every one.
    pub rewrite_budget: Option<u64>,
}

/// What one compaction of a table will do.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// The snapshot it read.
    pub base: Option<i64>,
    /// Data files to rewrite, per (spec, partition) group.
    pub groups: Vec<Group>,
    /// Delete files that go with them, and those merged into `merged`.
    pub removed_deletes: Vec<Entry>,
    /// The data files left whose deletes get one merged position delete
    /// file each (`leftover.rs`).
    pub merged: MergedDeletes,
    /// Deleted positions per data file (those that apply).
    pub positions: HashMap<String, RoaringTreemap>,
    /// Equality deletes: (data sequence number, keys).
    pub equality: Vec<(i64, HashSet<[u8; 16]>)>,
    /// The `_olake_id` field id, when the table has one.
    pub key_field: Option<i32>,
    /// Why files were left alone.
    pub skipped: Vec<String>,
}

/// The files of one partition rewritten together.
#[derive(Debug)]
pub(crate) struct Group {
    /// The partition spec the new files are written under (the table's
    /// default spec).
    pub spec: PartitionSpecRef,
    /// Their partition values (the new files carry them), unless
    /// `repartition`.
    pub partition: Struct,
    /// The files are of an older spec: their rows are split by their
    /// partition values in `spec`.
    pub repartition: bool,
    pub files: Vec<Entry>,
}

impl Plan {
    /// The data files rewritten.
    pub fn rewritten(&self) -> impl Iterator<Item = &Entry> {
        self.groups.iter().flat_map(|g| &g.files)
    }

    /// Whether a data file's deletes make it worth rewriting: equality
    /// deletes apply to it, or position deletes retire at least
    /// `percent` of its rows (and one at least).
    pub fn deletes_due(&self, entry: &Entry, percent: u8) -> bool {
        let deleted = self.positions.get(entry.path()).map_or(0, |p| p.len());
        let rows = entry.file.record_count();
        let due = deleted > 0 && deleted * 100 >= u64::from(percent) * rows;
        due || self
            .equality
            .iter()
            .any(|(seq, _)| *seq > entry.sequence_number)
    }

    /// The equality key sets that apply to a data file.
    pub fn equality_for(&self, entry: &Entry) -> Vec<&HashSet<[u8; 16]>> {
        self.equality
            .iter()
            .filter(|(seq, _)| *seq > entry.sequence_number)
            .map(|(_, keys)| keys)
            .collect()
    }
}

/// Each delete file's targets, in the order of the delete files: data file
/// paths, or `None` for an equality delete (every older data file).
type Targets = Vec<Option<HashSet<String>>>;

/// Reads the table's current snapshot and decides what to rewrite.
pub(crate) async fn plan(
    file_io: &FileIO,
    metadata: &TableMetadata,
    options: &CompactionOptions,
) -> Result<Plan, IcebergError> {
    let mut plan = Plan {
        base: metadata.current_snapshot_id(),
        key_field: metadata
            .current_schema()
            .field_by_name(KEY_COLUMN)
            .map(|f| f.id),
        ..Plan::default()
    };
    let Some(snapshot) = metadata.current_snapshot() else {
        return Ok(plan);
    };
    let entries = live_entries(file_io, metadata, snapshot).await?;
    let (data, deletes): (Vec<Entry>, Vec<Entry>) = entries.into_iter().partition(Entry::is_data);
    let seq_of: HashMap<&str, i64> = data.iter().map(|e| (e.path(), e.sequence_number)).collect();
    let Some(targets) = read_deletes(file_io, &mut plan, &deletes, &seq_of).await? else {
        return Ok(plan);
    };
    group(&mut plan, metadata, options, &data);
    remove_deletes(&mut plan, &data, &deletes, &targets, &seq_of);
    merge_deletes(&mut plan, metadata, &data, &deletes, &targets);
    Ok(plan)
}

/// Whether a delete of data sequence number `seq` applies to the live data
/// file `path`.
fn applies(seq_of: &HashMap<&str, i64>, path: &str, seq: i64) -> bool {
    seq_of.get(path).is_some_and(|s| *s <= seq)
}

/// Reads every delete file into `plan` (positions per data file, equality
/// key sets) and returns their targets; `None` when an equality delete is
/// on other columns than `_olake_id` (the table is not compacted, `plan`
/// says why).
async fn read_deletes(
    file_io: &FileIO,
    plan: &mut Plan,
    deletes: &[Entry],
    seq_of: &HashMap<&str, i64>,
) -> Result<Option<Targets>, IcebergError> {
    let mut targets: Targets = Vec::with_capacity(deletes.len());
    for delete in deletes {
        match delete.file.content_type() {
            DataContentType::PositionDeletes if is_deletion_vector(&delete.file) => {
                let target = delete.file.referenced_data_file().unwrap_or_default();
                if applies(seq_of, &target, delete.sequence_number) {
                    let bitmap = read_deletion_vector(file_io, &delete.file).await?;
                    *plan.positions.entry(target.clone()).or_default() |= bitmap;
                }
                targets.push(Some(HashSet::from([target])));
            }
            DataContentType::PositionDeletes => {
                let mut found = HashMap::new();
                read_position_deletes(file_io, delete.path(), |_| true, &mut found).await?;
                let mut paths = HashSet::new();
                for (path, bitmap) in found {
                    if applies(seq_of, &path, delete.sequence_number) {
                        *plan.positions.entry(path.clone()).or_default() |= bitmap;
                    }
                    paths.insert(path);
                }
                targets.push(Some(paths));
            }
            _ => {
                let Some(keys) = equality_keys(file_io, plan, delete).await? else {
                    return Ok(None);
                };
                plan.equality.push((delete.sequence_number, keys));
                targets.push(None);
            }
        }
    }
    Ok(Some(targets))
}

/// The keys an equality delete file removes, or `None` (noted in
/// `plan.skipped`) when it is not on `_olake_id` alone.
async fn equality_keys(
    file_io: &FileIO,
    plan: &mut Plan,
    delete: &Entry,
) -> Result<Option<HashSet<[u8; 16]>>, IcebergError> {
    let on_key = plan
        .key_field
        .is_some_and(|k| delete.file.equality_ids() == Some(vec![k]));
    let Some(key_field) = plan.key_field.filter(|_| on_key) else {
        plan.skipped.push(format!(
            "equality delete file {} is on columns other than {KEY_COLUMN}: the table is not \
             compacted",
            delete.path()
        ));
        return Ok(None);
    };
    let mut keys = HashSet::new();
    read_keys(file_io, delete.path(), key_field, |_, key| {
        keys.extend(key);
        Ok(())
    })
    .await?;
    Ok(Some(keys))
}

/// Groups the data files by (spec, partition) and keeps, per group, the
/// candidates worth rewriting into `plan.groups`; each group is rewritten
/// into its own partition of the table's default spec.
fn group(plan: &mut Plan, metadata: &TableMetadata, options: &CompactionOptions, data: &[Entry]) {
    let schema = metadata.current_schema();
    let small = options.target_file_size / 4 * 3;
    let over = over_budget(plan, metadata, options, data, small);
    let mut groups: BTreeMap<(i32, String), Vec<Entry>> = BTreeMap::new();
    for entry in data {
        let partition = format!("{:?}", entry.file.partition());
        groups
            .entry((entry.spec_id, partition))
            .or_default()
            .push(entry.clone());
    }
    let current = metadata.default_partition_spec();
    for ((spec_id, partition), files) in groups {
        let due = |e: &Entry| plan.deletes_due(e, options.min_deleted_percent);
        let repartition = spec_id != current.spec_id();
        let mut candidates: Vec<Entry> = files
            .into_iter()
            .filter(|e| repartition || due(e) || e.file.file_size_in_bytes() < small)
            .filter(|e| !over.contains(e.path()))
            .collect();
        if options.tiered && !repartition {
            let sizes: Vec<(u64, bool)> = candidates
                .iter()
                .map(|e| (e.file.file_size_in_bytes(), due(e)))
                .collect();
            let picks = tiered_picks(&sizes);
            let mut at = 0;
            candidates.retain(|_| {
                at += 1;
                picks.contains(&(at - 1))
            });
        }
        let worth = repartition
            || candidates.len() >= options.min_input_files
            || candidates.iter().any(due);
        if !worth || candidates.is_empty() {
            continue;
        }
        if current.partition_type(schema).is_err() {
            plan.skipped.push(format!(
                "{} files of partition {partition} of spec {spec_id}: the source columns of \
                 the table's partition spec {} are gone; not compacted",
                candidates.len(),
                current.spec_id()
            ));
            continue;
        }
        plan.groups.push(Group {
            spec: current.clone(),
            partition: candidates[0].file.partition().clone(),
            repartition,
            files: candidates,
        });
    }
}

/// Which of a group's small files (size, has deletes) a tiered pass
/// rewrites: every file with deletes (they must go), and of the others
/// every one but the largest files that are each more than
/// [`TIER_RATIO`] times all the smaller ones together (the files the
/// last passes built). Counted from the largest down, so one tiny file
/// (a round that read a few messages) does not keep the others out.
/// Indexes into `files`, ascending.
pub(crate) const TIER_RATIO: u64 = 2;

pub(crate) fn tiered_picks(files: &[(u64, bool)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..files.len()).filter(|&i| !files[i].1).collect();
    order.sort_by_key(|&i| files[i].0);
    let mut smaller: Vec<u64> = Vec::with_capacity(order.len());
    let mut total = 0u64;
    for &i in &order {
        smaller.push(total);
        total += files[i].0;
    }
    let kept_large = (0..order.len())
        .rev()
        .take_while(|&at| at > 0 && files[order[at]].0 > smaller[at].saturating_mul(TIER_RATIO))
        .count();
    order.truncate(order.len() - kept_large);
    let mut picks: Vec<usize> = (0..files.len()).filter(|&i| files[i].1).collect();
    picks.extend(order);
    picks.sort_unstable();
    picks
}

/// The delete files removed with the rewrite: those whose every target is
/// rewritten (or no longer live).
fn remove_deletes(
    plan: &mut Plan,
    data: &[Entry],
    deletes: &[Entry],
    targets: &Targets,
    seq_of: &HashMap<&str, i64>,
) {
    let rewritten: HashSet<String> = plan.rewritten().map(|e| e.path().to_string()).collect();
    let kept_data: Vec<&Entry> = data
        .iter()
        .filter(|e| !rewritten.contains(e.path()))
        .collect();
    for (delete, targets) in deletes.iter().zip(targets) {
        let removable = match targets {
            Some(paths) => paths
                .iter()
                .all(|p| rewritten.contains(p) || !seq_of.contains_key(p.as_str())),
            None => !kept_data
                .iter()
                .any(|e| e.sequence_number < delete.sequence_number),
        };
        if removable && !rewritten.is_empty() {
            plan.removed_deletes.push(delete.clone());
        }
    }
}

/// The large data files of the default spec with deletes due that a
/// rewrite budget leaves for a later pass (`leftover.rs`; none without a
/// budget, or with equality deletes: only rewriting every older file
/// removes those).
fn over_budget(
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
    let large_due = data
        .iter()
        .filter(|e| e.spec_id == current && e.file.file_size_in_bytes() >= small)
        .filter(|e| plan.deletes_due(e, options.min_deleted_percent))
        .collect();
    leftover::over_budget(budget, &plan.positions, large_due)
}

/// On a format 2 table with position deletes only, merges the position
/// delete files each data file left keeps (`leftover.rs`).
fn merge_deletes(
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
    let left: Vec<(&Entry, &HashSet<String>)> = deletes
        .iter()
        .zip(targets)
        .filter(|(d, _)| !is_deletion_vector(&d.file) && !removed.contains(d.path()))
        .filter(|(d, _)| d.file.content_type() == DataContentType::PositionDeletes)
        .filter_map(|(d, named)| Some((d, named.as_ref()?)))
        .collect();
    let (merged_away, merged) = leftover::merge_deletes(&kept, &left, &plan.positions);
    plan.removed_deletes.extend(merged_away);
    plan.merged = merged;
}

/// The field ids of the table's current top-level columns: a data file's
/// column outside them (dropped by another engine) is not carried over.
pub(crate) fn table_field_ids(metadata: &TableMetadata) -> HashSet<i32> {
    metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::tiered_picks;

    #[test]
    fn a_tiered_pass_merges_the_new_small_files_and_leaves_the_large_one() {
        // The last passes' 40 MB file and 60 new files of 100 KB: only the
        // new ones (6 MB together) are merged.
        let mut files = vec![(40_000_000, false)];
        files.extend(std::iter::repeat_n((100_000, false), 60));
        let picks = tiered_picks(&files);
        assert_eq!(picks, (1..=60).collect::<Vec<_>>());
        // Once the new files add up to half the large one, it joins them.
        let mut files = vec![(12_000_000, false)];
        files.extend(std::iter::repeat_n((100_000, false), 60));
        assert_eq!(tiered_picks(&files).len(), 61);
        // New files of unequal sizes are merged together.
        let files: Vec<(u64, bool)> = (0..60).map(|i| (40_000 + i * 1_000, false)).collect();
        assert_eq!(tiered_picks(&files).len(), 60);
        // A file with deletes is always rewritten, whatever its size.
        let files = [
            (1_000, false),
            (40_000_000, true),
            (1_500, false),
            (50_000, false),
        ];
        assert_eq!(tiered_picks(&files), [0, 1, 2]);
    }

    #[test]
    fn a_tiny_first_file_does_not_keep_a_tiered_pass_from_merging_the_others() {
        // A follower's first round read a few messages; then 150 rounds
        // of about 4.4 MB each: all of them are merged.
        let mut files = vec![(30_000, false)];
        files.extend(std::iter::repeat_n((4_400_000, false), 150));
        assert_eq!(tiered_picks(&files).len(), 151);
        // And the large file the last pass built stays out.
        files.push((2_000_000_000, false));
        assert_eq!(tiered_picks(&files), (0..151).collect::<Vec<_>>());
    }

    #[test]
    fn passes_of_a_tiered_compaction_rewrite_each_row_a_logarithmic_number_of_times() {
        // 100 passes, each after 60 new files of 50-150 KB: the bytes
        // rewritten stay within a small multiple of the bytes written, and
        // the files left after each pass stay few.
        let mut files: Vec<u64> = Vec::new();
        let (mut written, mut rewritten) = (0u64, 0u64);
        let mut seed = 7u64;
        for _ in 0..100 {
            for _ in 0..60 {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let size = 50_000 + (seed >> 33) % 100_000;
                files.push(size);
                written += size;
            }
            let sizes: Vec<(u64, bool)> = files.iter().map(|&s| (s, false)).collect();
            let picks = tiered_picks(&sizes);
            let merged: u64 = picks.iter().map(|&i| files[i]).sum();
            rewritten += merged;
            let mut at = 0;
            files.retain(|_| {
                at += 1;
                !picks.contains(&(at - 1))
            });
            files.push(merged);
            assert!(files.len() <= 10, "{files:?}");
        }
        assert!(
            rewritten <= written * 9,
            "{rewritten} rewritten for {written} written"
        );
    }
}
