//! What a sync did, per table: printed at the end and written as JSON with
//! `--report-json`.

use serde::Serialize;

/// How a table's part of the sync ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableStatus {
    /// New data committed in one snapshot.
    Committed,
    /// Nothing new to read: no snapshot.
    Unchanged,
    /// Failed: nothing committed for this table, its offsets did not move.
    Failed,
    /// The sync was cancelled before its commit phase: nothing committed for
    /// this table, its offsets did not move, the files it wrote were deleted.
    Cancelled,
    /// Another sync of the job (running at the same time) committed the
    /// offsets this one started from first: the messages are in the table
    /// from that sync; this one committed nothing for the table (committing
    /// would duplicate them) and deleted its files. Not a failure; `note`
    /// says which offsets.
    Superseded,
    /// A worker of a job that shares its partitions with others read and
    /// wrote its partitions' messages and handed the files to the table's
    /// committer (the worker that owns the topic's partition 0), which
    /// commits them with its next round: the table's offsets move then.
    Handed,
}

impl TableStatus {
    /// The status as in the JSON report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Committed => "committed",
            Self::Unchanged => "unchanged",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Superseded => "superseded",
            Self::Handed => "handed",
        }
    }
}

/// One table's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TableReport {
    /// The source topic.
    pub topic: String,
    /// `namespace.table`.
    pub table: String,
    /// How it ended.
    pub status: TableStatus,
    /// Messages read and written as rows.
    pub records: u64,
    /// Key and value bytes read.
    pub bytes: u64,
    /// Data files added.
    pub data_files: usize,
    /// Bytes of data files added.
    pub data_file_bytes: u64,
    /// The committed snapshot, if any.
    pub snapshot_id: Option<i64>,
    /// Messages lost to retention before this sync could read them.
    pub expired_messages: i64,
    /// Invalid messages skipped (`on_invalid = "skip"`).
    pub skipped_records: u64,
    /// Invalid messages written to the dead-letter table (`on_invalid = "dlq"`).
    pub dead_letter_records: u64,
    /// The dead-letter table, when this sync wrote to it.
    pub dead_letter_table: Option<String>,
    /// Columns added or widened by this sync (`added column coupon (string)`).
    pub schema_changes: Vec<String>,
    /// Files this sync wrote but did not commit and could not delete (after
    /// a failure); safe to delete by hand.
    pub orphan_files: Vec<String>,
    /// Wall time for this table, from plan to commit.
    pub duration_ms: u64,
    /// Wall time of the commit stage (dead letters, files of an upsert,
    /// the snapshot's commit with its retries).
    pub commit_ms: u64,
    /// Commit attempts beyond the first: refused because another writer
    /// committed first (a conflict), or unconfirmed and checked again
    /// (0 when the first attempt landed).
    pub commit_retries: u32,
    /// The newest Kafka timestamp among the messages read (ms since the
    /// epoch); what the table shows once committed.
    pub newest_timestamp_ms: Option<i64>,
    /// The commit report of the snapshot, if one was committed.
    pub commit: Option<CommitReport>,
    /// File sets other workers of the job handed over that this snapshot
    /// committed (their messages are counted by the workers that read
    /// them, not in `records`).
    #[serde(skip_serializing_if = "is_zero")]
    pub handed_sets: u64,
    /// Messages those sets held as rows.
    #[serde(skip_serializing_if = "is_zero")]
    pub handed_records: u64,
    /// Upsert keys whose newest message this sync read was older than the
    /// table's row of the key, which came from another partition (see
    /// the upsert chapter's ordering rule): the table's row stays, the
    /// message is not written.
    #[serde(skip_serializing_if = "is_zero")]
    pub older_than_table: u64,
    /// What the user should know that is not a failure (a superseded
    /// table's offsets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// A follower's round read only `commit_records` of the messages
    /// waiting: more are (its next round starts at once).
    #[serde(skip)]
    pub more_waiting: bool,
    /// The table failed on the catalog or the object store (unreachable,
    /// or a server error a retry may not meet): a follower reads its topic
    /// ahead into the local spill until the table commits again.
    #[serde(skip)]
    pub waits_on_destination: bool,
    /// Bytes a follower's local spill holds of the table's topic after the
    /// round (read ahead while the table could not commit).
    #[serde(skip)]
    pub buffered_bytes: u64,
    /// A change stream's events read, by operation (`change_events`
    /// tables only; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_operations: Option<ChangeOperations>,
}

impl ChangeOperations {
    /// `created=N read=N updated=N deleted=N truncated=N` (and
    /// `unstated=N` when there are some).
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "created={} read={} updated={} deleted={} truncated={}",
            self.created, self.read, self.updated, self.deleted, self.truncated
        );
        if self.unstated > 0 {
            text.push_str(&format!(" unstated={}", self.unstated));
        }
        text
    }
}

/// A change stream's events by operation: what the run read, committed
/// or not with the table (a failed table's events are read again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ChangeOperations {
    /// `op` `c`: rows inserted in the source.
    pub created: u64,
    /// `op` `r`: rows of the connector's snapshot.
    pub read: u64,
    /// `op` `u`: rows updated.
    pub updated: u64,
    /// `op` `d`: rows deleted (Kafka tombstones not counted).
    pub deleted: u64,
    /// `op` `t`: truncates.
    pub truncated: u64,
    /// Rows whose event names no operation (a flattened record without
    /// `__op`).
    pub unstated: u64,
}

impl TableReport {
    /// A table's report before the sync did anything to it.
    pub fn new(topic: &str, table: &str) -> Self {
        Self {
            topic: topic.to_string(),
            table: table.to_string(),
            status: TableStatus::Unchanged,
            records: 0,
            bytes: 0,
            data_files: 0,
            data_file_bytes: 0,
            snapshot_id: None,
            expired_messages: 0,
            skipped_records: 0,
            dead_letter_records: 0,
            dead_letter_table: None,
            schema_changes: Vec::new(),
            orphan_files: Vec::new(),
            duration_ms: 0,
            commit_ms: 0,
            commit_retries: 0,
            newest_timestamp_ms: None,
            commit: None,
            handed_sets: 0,
            handed_records: 0,
            older_than_table: 0,
            note: None,
            error: None,
            more_waiting: false,
            waits_on_destination: false,
            buffered_bytes: 0,
            change_operations: None,
        }
    }
}

/// What a snapshot added, from its summary, under the names users of the
/// product pages know from their commit reports.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitReport {
    /// The snapshot id.
    pub snapshot_id: i64,
    /// Data files added.
    pub added_data_files: u64,
    /// Rows added.
    pub added_records: u64,
    /// Position delete files added (v2 upsert).
    pub added_positional_delete_files: u64,
    /// Positions deleted by them (and by deletion vectors).
    pub added_positional_deletes: u64,
    /// Deletion vectors added (v3 upsert).
    #[serde(rename = "addedDVs")]
    pub added_dvs: u64,
    /// Equality delete files added.
    pub added_equality_delete_files: u64,
    /// Rows deleted by them.
    pub added_equality_deletes: u64,
    /// Bytes of every file the snapshot added (data and delete files).
    pub added_files_size: u64,
}

impl CommitReport {
    /// Reads the standard summary properties.
    pub fn from_summary(
        snapshot_id: i64,
        summary: &std::collections::BTreeMap<String, String>,
    ) -> Self {
        let get = |k: &str| summary.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
        let dvs = get("added-dvs");
        Self {
            snapshot_id,
            added_data_files: get("added-data-files"),
            added_records: get("added-records"),
            // The summary counts deletion vectors under `added-dvs` only.
            added_positional_delete_files: get("added-position-delete-files"),
            added_positional_deletes: get("added-position-deletes"),
            added_dvs: dvs,
            added_equality_delete_files: get("added-equality-delete-files"),
            added_equality_deletes: get("added-equality-deletes"),
            added_files_size: get("added-files-size"),
        }
    }

    /// `addedDataFiles=1, addedRecords=8, ...` as the log line shows it.
    pub fn to_text(&self) -> String {
        format!(
            "addedDataFiles={}, addedRecords={}, addedPositionalDeleteFiles={}, addedPositionalDeletes={}, addedDVs={}, addedEqualityDeleteFiles={}, addedEqualityDeletes={}",
            self.added_data_files,
            self.added_records,
            self.added_positional_delete_files,
            self.added_positional_deletes,
            self.added_dvs,
            self.added_equality_delete_files,
            self.added_equality_deletes
        )
    }
}

/// The whole sync.
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    /// The job name.
    pub job: String,
    /// The consumer group.
    pub consumer_group: String,
    /// Wall time of the sync.
    pub duration_ms: u64,
    /// Whether the consumer-group offsets were committed after the snapshots.
    pub group_offsets_committed: bool,
    /// The broker refused the group's offsets because the group has
    /// members (a follower of the job, which commits them at its next
    /// round): the tables hold the offsets, nothing is lost, and the sync
    /// still succeeded.
    pub group_offsets_left_to_members: bool,
    /// Cancelled before the commit phase: nothing was committed (every table
    /// not failed is `cancelled`).
    pub cancelled: bool,
    /// Per table, sorted by table name.
    pub tables: Vec<TableReport>,
    /// Said before any table, on every run: a topic the job names that the
    /// cluster does not have (`missing_topics = "wait"`), a `topic_pattern`
    /// that matches no topic.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl SyncReport {
    /// True when every table committed or had nothing new.
    pub fn succeeded(&self) -> bool {
        !self.cancelled
            && (self.group_offsets_committed || self.group_offsets_left_to_members)
            && self.tables.iter().all(|t| t.status != TableStatus::Failed)
    }

    /// What became of the consumer group's offsets, in words: a sync that
    /// committed no table moved none (its group commit had nothing to do).
    fn group_offsets_text(&self) -> &'static str {
        if self.group_offsets_left_to_members {
            "left to the group's members"
        } else if !self.group_offsets_committed {
            "NOT committed"
        } else if self
            .tables
            .iter()
            .any(|t| t.status == TableStatus::Committed)
        {
            "committed"
        } else {
            "not moved"
        }
    }

    /// The human summary: one line per table.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for warning in &self.warnings {
            out.push_str(&format!("warning: {warning}\n"));
        }
        for t in &self.tables {
            let snapshot = t.snapshot_id.map_or("-".to_string(), |s| s.to_string());
            out.push_str(&format!(
                "{:<40} {:<10} records={} bytes={} data_files={} snapshot={} duration={:.2}s",
                t.table,
                format!("{:?}", t.status).to_lowercase(),
                t.records,
                t.bytes,
                t.data_files,
                snapshot,
                t.duration_ms as f64 / 1000.0
            ));
            if t.expired_messages > 0 {
                out.push_str(&format!(
                    " EXPIRED={} (lost to retention)",
                    t.expired_messages
                ));
            }
            if t.skipped_records > 0 {
                out.push_str(&format!(" SKIPPED={} (invalid)", t.skipped_records));
            }
            if let Some(dlq) = &t.dead_letter_table {
                out.push_str(&format!(" dead_letters={} -> {dlq}", t.dead_letter_records));
            }
            if let Some(ops) = &t.change_operations {
                out.push_str(&format!("\n    changes: {}", ops.to_text()));
            }
            for change in &t.schema_changes {
                out.push_str(&format!("\n    schema: {change}"));
            }
            if let Some(c) = &t.commit {
                out.push_str(&format!("\n    commit report: {}", c.to_text()));
            }
            if let Some(note) = &t.note {
                out.push_str(&format!("\n    note: {note}"));
            }
            if let Some(e) = &t.error {
                out.push_str(&format!("\n    error: {e}"));
            }
            if !t.orphan_files.is_empty() {
                out.push_str(&format!(
                    "\n    uncommitted files left behind (safe to delete): {}",
                    t.orphan_files.join(", ")
                ));
            }
            out.push('\n');
        }
        if self.cancelled {
            out.push_str(&format!(
                "sync CANCELLED after {:.2}s: nothing committed; consumer group {} offsets not moved\n",
                self.duration_ms as f64 / 1000.0,
                self.consumer_group
            ));
            return out;
        }
        out.push_str(&format!(
            "sync {} in {:.2}s; consumer group {} offsets {}\n",
            if self.succeeded() {
                "succeeded"
            } else {
                "FAILED"
            },
            self.duration_ms as f64 / 1000.0,
            self.consumer_group,
            self.group_offsets_text()
        ));
        out
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: TableStatus, cancelled: bool) -> SyncReport {
        SyncReport {
            job: "j".into(),
            consumer_group: "topicberg_j".into(),
            duration_ms: 1500,
            group_offsets_committed: !cancelled,
            group_offsets_left_to_members: false,
            cancelled,
            tables: vec![TableReport {
                status,
                ..TableReport::new("t", "j_topics.t")
            }],
            warnings: Vec::new(),
        }
    }

    #[test]
    fn a_cancelled_report_is_not_a_success_and_says_so() {
        let r = report(TableStatus::Cancelled, true);
        assert!(!r.succeeded());
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["cancelled"], true);
        assert_eq!(json["tables"][0]["status"], "cancelled");
        let text = r.to_text();
        assert!(
            text.contains("j_topics.t") && text.contains("cancelled"),
            "{text}"
        );
        assert!(
            text.ends_with("sync CANCELLED after 1.50s: nothing committed; consumer group topicberg_j offsets not moved\n"),
            "{text}"
        );
        // An ordinary report keeps its fields, with `cancelled: false`.
        let ok = report(TableStatus::Committed, false);
        assert!(ok.succeeded());
        let json = serde_json::to_value(&ok).unwrap();
        assert_eq!(json["cancelled"], false);
        assert_eq!(json["group_offsets_committed"], true);
        assert!(ok.to_text().contains("sync succeeded in 1.50s"));
        assert!(ok.to_text().ends_with("offsets committed\n"));
    }

    /// Found in a benchmark run whose only table failed: the summary said
    /// the group's offsets were committed, though none moved.
    #[test]
    fn a_sync_that_committed_no_table_says_the_offsets_did_not_move() {
        for status in [
            TableStatus::Failed,
            TableStatus::Unchanged,
            TableStatus::Superseded,
        ] {
            let text = report(status, false).to_text();
            assert!(
                text.ends_with("consumer group topicberg_j offsets not moved\n"),
                "{text}"
            );
        }
        let mut lost = report(TableStatus::Committed, false);
        lost.group_offsets_committed = false;
        assert!(lost.to_text().ends_with("offsets NOT committed\n"));
    }
}
