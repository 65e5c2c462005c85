//! What a follower did: its totals from its start, and each table's
//! figures (what the service's metrics and live view show per table).

use serde::Serialize;

use crate::sync::report::{SyncReport, TableReport, TableStatus};

/// What a follower did, from its start to its stop.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FollowReport {
    /// The job name.
    pub job: String,
    /// Rounds run (each a bounded sync).
    pub rounds: u64,
    /// Rounds in which at least one table committed a snapshot.
    pub committing_rounds: u64,
    /// Snapshots committed, over all tables.
    pub snapshots: u64,
    /// Messages written as rows.
    pub records: u64,
    /// Tables whose round found that another sync of the job (a second
    /// follower, a scheduled sync) had committed those messages first:
    /// nothing committed for them, nothing duplicated.
    pub superseded: u64,
    /// Rounds that failed as a whole or in a table (retried).
    pub failed_rounds: u64,
    /// The last failure, if the last round failed.
    pub last_error: Option<String>,
    /// Whether the last round was cancelled by the stop timeout (what it
    /// read is read again at the next start).
    pub stop_timed_out: bool,
    /// The consumer group protocol the follower's membership spoke:
    /// `consumer` (KIP-848) or `classic`; `None` if it never joined.
    pub group_protocol: Option<topicberg_kafka::GroupProtocol>,
    /// When the follower started (ms since the epoch).
    pub started_ms: u64,
    /// The job's `sync.commit_interval` (ms).
    pub commit_interval_ms: u64,
    /// When the last round that succeeded ended (committing or idle):
    /// the follower is healthy while this keeps moving.
    pub last_success_ms: Option<u64>,
    /// When the last round that committed a snapshot ended.
    pub last_commit_ms: Option<u64>,
    /// Background maintenance passes run (`maintain.follow_every`).
    pub maintenance_passes: u64,
    /// Passes in which a table's maintenance failed (tried again at the
    /// next pass).
    pub maintenance_failed_passes: u64,
    /// Data files the passes' compactions rewrote.
    pub files_compacted: u64,
    /// Snapshots the passes expired.
    pub snapshots_expired: u64,
    /// Bytes in the local spill now: messages read ahead while the
    /// catalog or the store was down, not yet committed (`sync.spill_mb`).
    pub buffered_bytes: u64,
    /// The spill's bound (`sync.spill_mb`, in bytes; 0: no spill).
    pub spill_limit_bytes: u64,
    /// Each table's figures, by table name.
    pub tables: Vec<FollowTable>,
    /// The last round's warnings (a topic the job names that the cluster
    /// lacks under `missing_topics = "wait"`, a pattern matching nothing):
    /// what holds now, not every round's.
    pub warnings: Vec<String>,
}

/// One table's figures over a follower's rounds.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct FollowTable {
    /// `namespace.table`.
    pub table: String,
    /// Its topic.
    pub topic: String,
    /// Snapshots committed.
    pub snapshots: u64,
    /// Messages written as rows.
    pub records: u64,
    /// Key and value bytes of those messages.
    pub bytes: u64,
    /// Data files written.
    pub data_files: u64,
    /// Bytes of those data files.
    pub data_file_bytes: u64,
    /// Commit attempts beyond the first (conflicts with another writer,
    /// unconfirmed commits checked again).
    pub commit_retries: u64,
    /// Rounds in which another sync of the job committed the messages
    /// first (nothing committed, nothing duplicated).
    pub superseded: u64,
    /// Rounds whose files this worker handed to the table's committer
    /// (another worker of the job) instead of committing them.
    pub handed: u64,
    /// Rounds in which the table failed (retried).
    pub failures: u64,
    /// Invalid messages written to the dead-letter table.
    pub dead_letters: u64,
    /// Invalid messages skipped (`on_invalid = "skip"`).
    pub skipped: u64,
    /// The newest Kafka timestamp among the committed messages (ms since
    /// the epoch): the visibility lag is now minus this.
    pub newest_committed_ms: Option<i64>,
    /// When the table last committed a snapshot (ms since the epoch).
    pub last_commit_ms: Option<u64>,
    /// How long that commit took (ms).
    pub last_commit_duration_ms: Option<u64>,
    /// Bytes of the table's topic in the follower's local spill after the
    /// last round (read ahead, not yet committed).
    pub buffered_bytes: u64,
}

impl FollowTable {
    /// Adds one round's (or sync's) report of this table, ended at
    /// `now_ms` (the service's metrics keep the same sums per table).
    pub fn add(&mut self, t: &TableReport, now_ms: u64) {
        self.topic.clone_from(&t.topic);
        match t.status {
            TableStatus::Committed => {
                self.snapshots += 1;
                self.add_written(t);
                self.newest_committed_ms = self.newest_committed_ms.max(t.newest_timestamp_ms);
                self.last_commit_ms = Some(now_ms);
                self.last_commit_duration_ms = Some(t.commit_ms);
            }
            TableStatus::Handed => {
                // Read and written here, committed by the table's committer.
                self.handed += 1;
                self.add_written(t);
            }
            TableStatus::Superseded => self.superseded += 1,
            TableStatus::Failed => self.failures += 1,
            _ => {}
        }
        self.commit_retries += u64::from(t.commit_retries);
        self.buffered_bytes = t.buffered_bytes;
    }

    /// What a round read and wrote of the table (committed here, or
    /// handed to the table's committer).
    fn add_written(&mut self, t: &TableReport) {
        self.records += t.records;
        self.bytes += t.bytes;
        self.data_files += t.data_files as u64;
        self.data_file_bytes += t.data_file_bytes;
        self.dead_letters += t.dead_letter_records;
        self.skipped += t.skipped_records;
    }
}

impl FollowReport {
    /// True when the follower stopped after a round that succeeded.
    pub fn succeeded(&self) -> bool {
        self.last_error.is_none() && !self.stop_timed_out
    }

    /// The figures of `table`, added in name order when new.
    fn table_mut(&mut self, table: &str) -> &mut FollowTable {
        let at = match self
            .tables
            .binary_search_by(|t| t.table.as_str().cmp(table))
        {
            Ok(at) => at,
            Err(at) => {
                let new = FollowTable {
                    table: table.to_owned(),
                    ..FollowTable::default()
                };
                self.tables.insert(at, new);
                at
            }
        };
        &mut self.tables[at]
    }

    pub(crate) fn count(&mut self, report: &SyncReport) {
        self.rounds += 1;
        let snapshots = report
            .tables
            .iter()
            .filter(|t| t.status == TableStatus::Committed)
            .count() as u64;
        self.snapshots += snapshots;
        self.committing_rounds += u64::from(snapshots > 0);
        self.superseded += report
            .tables
            .iter()
            .filter(|t| t.status == TableStatus::Superseded)
            .count() as u64;
        self.records += report
            .tables
            .iter()
            .filter(|t| matches!(t.status, TableStatus::Committed | TableStatus::Handed))
            .map(|t| t.records)
            .sum::<u64>();
        self.stop_timed_out = report.cancelled;
        self.warnings.clone_from(&report.warnings);
        self.last_error = if report.succeeded() || report.cancelled {
            None
        } else {
            Some(round_failure(report))
        };
        self.failed_rounds += u64::from(self.last_error.is_some());
        let now = now_ms();
        for table in &report.tables {
            self.table_mut(&table.table).add(table, now);
        }
        if self.last_error.is_none() && !report.cancelled {
            self.last_success_ms = Some(now);
        }
        if snapshots > 0 {
            self.last_commit_ms = Some(now);
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    (crate::sync::now_micros() / 1000) as u64
}

/// What failed in a round that returned a report.
fn round_failure(report: &SyncReport) -> String {
    let failed: Vec<String> = report
        .tables
        .iter()
        .filter(|t| t.status == TableStatus::Failed)
        .map(|t| format!("{}: {}", t.table, t.error.as_deref().unwrap_or("failed")))
        .collect();
    if failed.is_empty() {
        "the consumer group's offsets were not committed".to_owned()
    } else {
        failed.join("; ")
    }
}
