//! `[maintain]`: what `topicberg maintain` does to the job's tables
//! (compaction, snapshot expiry, orphan-file removal, manifest rewrite);
//! its durations are parsed by `interval.rs`.
use schemars::JsonSchema;
use serde::Deserialize;

use super::defaults;

/// `[maintain]`: what `topicberg maintain` does (compaction, snapshot
/// expiry, orphan-file removal, manifest rewrite); the defaults suit most
/// jobs. Durations are a whole number and a unit, `s`, `m`, `h` or `d`
/// (`"90s"`, `"12h"`, `"7d"`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = super::schema::field_order::<Self>)]
pub struct MaintainConfig {
    /// Compaction writes data files of about this size, in MiB; data files
    /// smaller than three quarters of it are "small".
    #[serde(default = "defaults::maintain_target_file_size_mb")]
    #[schemars(range(min = 1))]
    #[schemars(extend(
        "x-label" = "Compacted file size (MiB)",
        "x-help" = "compaction writes files of about this size; smaller than three quarters of it is small"
    ))]
    pub target_file_size_mb: u64,
    /// A partition's small files are rewritten once there are at least this
    /// many of them; files with deletes are rewritten whatever their number.
    #[serde(default = "defaults::maintain_min_input_files")]
    #[schemars(range(min = 1))]
    #[schemars(extend(
        "x-label" = "Small files before compacting",
        "x-help" = "a partition's small files are rewritten once there are this many; files with deletes always are"
    ))]
    pub min_input_files: usize,
    /// A data file with deletes is rewritten (its deletes applied) once at
    /// least this percentage of its rows are deleted; below it, its deletes
    /// stay in delete files, which readers apply as they read. 0 (the
    /// default): any delete makes a file worth rewriting. Equality deletes
    /// always do.
    #[serde(default = "defaults::maintain_min_deleted_percent")]
    #[schemars(range(max = 100))]
    #[schemars(extend(
        "x-label" = "Deleted rows before rewriting (%)",
        "x-help" = "a file is rewritten once this share of its rows is deleted; 0: any delete"
    ))]
    pub min_deleted_percent: u8,
    /// Snapshots of each branch kept whatever their age (the newest ones,
    /// the branch's head included).
    #[serde(default = "defaults::maintain_keep_snapshots")]
    #[schemars(range(min = 1))]
    #[schemars(extend(
        "x-label" = "Snapshots kept",
        "x-help" = "each branch's newest snapshots kept whatever their age (2 or more keeps the key index incremental)"
    ))]
    pub keep_snapshots: usize,
    /// Snapshots older than this (beyond `keep_snapshots`) are expired, and
    /// the files only they reference deleted.
    #[serde(default = "defaults::maintain_max_snapshot_age")]
    #[schemars(regex(pattern = super::schema::DURATION_PATTERN))]
    #[schemars(extend(
        "x-label" = "Oldest snapshot kept",
        "x-type" = "duration",
        "x-help" = "older snapshots beyond those kept are expired, e.g. 5d, 12h"
    ))]
    pub max_snapshot_age: String,
    /// Files under a table's location that nothing references are deleted
    /// only once older than this, so that a commit in flight is never hit.
    #[serde(default = "defaults::maintain_orphan_min_age")]
    #[schemars(regex(pattern = super::schema::DURATION_PATTERN))]
    #[schemars(extend(
        "x-label" = "Orphan safety window",
        "x-type" = "duration",
        "x-help" = "unreferenced files are deleted only when older than this, e.g. 1d (a commit in flight is never hit)"
    ))]
    pub orphan_min_age: String,
    /// The manifests of a table's current snapshot are rewritten into one
    /// per partition spec and content when there are more than this many.
    #[serde(default = "defaults::maintain_max_manifests")]
    #[schemars(range(min = 1))]
    #[schemars(extend(
        "x-label" = "Most manifests",
        "x-help" = "a snapshot with more manifests has them rewritten into few"
    ))]
    pub max_manifests: usize,
    /// How often a follower (`sync --follow`, a continuous job in serve)
    /// maintains its tables in the background, with these settings, while
    /// it follows; `0s` turns it off.
    #[serde(default = "defaults::maintain_follow_every")]
    #[schemars(regex(pattern = super::schema::DURATION_PATTERN))]
    #[schemars(extend(
        "x-label" = "Maintenance while following",
        "x-type" = "duration",
        "x-help" = "a follower compacts and expires its tables this often, e.g. 5m; 0s: never (run maintain yourself)"
    ))]
    pub follow_every: String,
    /// A follower's background maintenance expires snapshots older than
    /// this (beyond `keep_snapshots`) instead of `max_snapshot_age`: a
    /// follower commits every few seconds, and days of its snapshots
    /// would make every commit rewrite a huge metadata file.
    #[serde(default = "defaults::maintain_follow_max_snapshot_age")]
    #[schemars(regex(pattern = super::schema::DURATION_PATTERN))]
    #[schemars(extend(
        "x-label" = "Oldest snapshot kept while following",
        "x-type" = "duration",
        "x-help" = "a follower's maintenance expires older snapshots, e.g. 30m (its commits come every few seconds)"
    ))]
    pub follow_max_snapshot_age: String,
    /// A follower's pass rewrites at most about this many MiB of large
    /// data files for their deletes, those with the largest share of
    /// deleted rows first (the new small files are merged whatever their
    /// size); the deletes of the others stay, each file's merged into one
    /// position delete file on format 2 tables. Keeps a pass, and the
    /// key index's update after it, from growing with the table under
    /// updates spread over every key. `0`: no bound (every file with
    /// deletes, as `topicberg maintain` does).
    #[serde(default = "defaults::maintain_follow_rewrite_mb")]
    #[schemars(extend(
        "x-label" = "Rewrite per pass while following (MiB)",
        "x-help" = "a follower's pass rewrites at most this much of the large files with deletes, the most deleted first; 0: no bound"
    ))]
    pub follow_rewrite_mb: u64,
}

impl Default for MaintainConfig {
    fn default() -> Self {
        Self {
            target_file_size_mb: defaults::maintain_target_file_size_mb(),
            min_input_files: defaults::maintain_min_input_files(),
            min_deleted_percent: defaults::maintain_min_deleted_percent(),
            keep_snapshots: defaults::maintain_keep_snapshots(),
            max_snapshot_age: defaults::maintain_max_snapshot_age(),
            orphan_min_age: defaults::maintain_orphan_min_age(),
            max_manifests: defaults::maintain_max_manifests(),
            follow_every: defaults::maintain_follow_every(),
            follow_max_snapshot_age: defaults::maintain_follow_max_snapshot_age(),
            follow_rewrite_mb: defaults::maintain_follow_rewrite_mb(),
        }
    }
}
