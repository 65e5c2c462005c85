//! The per-table families: what each table of a run added (committed,
//! superseded or failed), and two gauges computed when scraped: the
//! visibility lag (now minus the newest committed message's Kafka
//! timestamp) and the seconds since the table's last commit.

use std::collections::BTreeMap;

use topicberg_sync::follow::FollowTable;
use topicberg_sync::sync::report::{TableReport, TableStatus};

use super::{family, histogram_samples, sample, Histogram};

/// Upper bounds (seconds) of the commit duration histogram's buckets: a
/// follower commits every second or so, a scheduled sync once per run.
pub const COMMIT_BUCKETS: [f64; 11] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0];

/// One table's figures since the process started: the follower's
/// per-table totals (the same sums from the same reports), and the commit
/// duration histogram.
#[derive(Debug, Default)]
pub(super) struct TableFigures {
    totals: FollowTable,
    commit_seconds: Histogram,
}

impl TableFigures {
    /// Adds a run's report of this table, finished at `finished_ms`.
    pub(super) fn record(&mut self, t: &TableReport, finished_ms: i64) {
        self.totals.add(t, finished_ms.max(0) as u64);
        if t.status == TableStatus::Committed {
            self.commit_seconds
                .observe(&COMMIT_BUCKETS, t.commit_ms as f64 / 1000.0);
        }
    }
}

type Tables = BTreeMap<(String, String), TableFigures>;

/// Every per-table family, as of `now_ms`.
pub(super) fn render(out: &mut String, tables: &Tables, now_ms: i64) {
    let committed = |f: &TableFigures| f.totals.snapshots > 0;
    counter(
        out,
        tables,
        "topicberg_records_total",
        "Records written to Iceberg tables (committed), per job and table.",
        |f| committed(f).then_some(f.totals.records as f64),
    );
    counter(
        out,
        tables,
        "topicberg_bytes_total",
        "Kafka key and value bytes read into committed snapshots, per job and table.",
        |f| committed(f).then_some(f.totals.bytes as f64),
    );
    counter(
        out,
        tables,
        "topicberg_data_files_total",
        "Data files committed, per job and table.",
        |f| committed(f).then_some(f.totals.data_files as f64),
    );
    counter(
        out,
        tables,
        "topicberg_data_file_bytes_total",
        "Bytes of the data files committed, per job and table.",
        |f| committed(f).then_some(f.totals.data_file_bytes as f64),
    );
    gauge(
        out,
        tables,
        "topicberg_data_file_average_bytes",
        "Average size of the data files committed since the process started, per job and table.",
        |f| {
            (f.totals.data_files > 0)
                .then(|| f.totals.data_file_bytes as f64 / f.totals.data_files as f64)
        },
    );
    commits(out, tables);
    counter(out, tables, "topicberg_commit_retries_total",
        "Commit attempts beyond the first: another writer committed first, or an unconfirmed commit was checked again.",
        |f| Some(f.totals.commit_retries as f64));
    commit_durations(out, tables);
    counter(
        out,
        tables,
        "topicberg_dead_letters_total",
        "Invalid messages written to the dead-letter table, per job and table.",
        |f| committed(f).then_some(f.totals.dead_letters as f64),
    );
    counter(
        out,
        tables,
        "topicberg_skipped_records_total",
        "Invalid messages skipped (on_invalid = \"skip\"), per job and table.",
        |f| committed(f).then_some(f.totals.skipped as f64),
    );
    gauge(out, tables, "topicberg_visibility_lag_seconds",
        "Now minus the Kafka timestamp of the newest message committed to the table (grows while a topic is idle; read it with the consumer lag).",
        |f| f.totals.newest_committed_ms.map(|ms| (now_ms - ms).max(0) as f64 / 1000.0));
    gauge(out, tables, "topicberg_buffered_bytes",
        "Bytes of the table's topic in the follower's local spill: read ahead while the catalog or the object store was down, not yet committed (sync.spill_mb).",
        |f| Some(f.totals.buffered_bytes as f64));
    gauge(
        out,
        tables,
        "topicberg_seconds_since_last_commit",
        "Seconds since the table's last committed snapshot (absent before its first).",
        |f| {
            f.totals
                .last_commit_ms
                .map(|ms| (now_ms - ms as i64).max(0) as f64 / 1000.0)
        },
    );
}

/// A family with one sample per job and table that has a value.
fn per_table(
    out: &mut String,
    tables: &Tables,
    (name, kind, help): (&str, &str, &str),
    value: impl Fn(&TableFigures) -> Option<f64>,
) {
    family(out, name, kind, help);
    for ((job, table), f) in tables {
        if let Some(v) = value(f) {
            sample(out, name, &[("job", job), ("table", table)], v);
        }
    }
}

fn counter(
    out: &mut String,
    tables: &Tables,
    name: &str,
    help: &str,
    value: impl Fn(&TableFigures) -> Option<f64>,
) {
    per_table(out, tables, (name, "counter", help), value);
}

fn gauge(
    out: &mut String,
    tables: &Tables,
    name: &str,
    help: &str,
    value: impl Fn(&TableFigures) -> Option<f64>,
) {
    per_table(out, tables, (name, "gauge", help), value);
}

/// `topicberg_commits_total`: per job, table and outcome.
fn commits(out: &mut String, tables: &Tables) {
    let name = "topicberg_commits_total";
    family(out, name, "counter",
        "Table commits per job, table and outcome (committed; superseded: another sync of the job committed those messages first; handed: a worker's files handed to the table's committer, another worker of the job; failed).");
    for ((job, table), f) in tables {
        for (outcome, n) in [
            ("committed", f.totals.snapshots),
            ("superseded", f.totals.superseded),
            ("handed", f.totals.handed),
            ("failed", f.totals.failures),
        ] {
            sample(
                out,
                name,
                &[("job", job), ("table", table), ("outcome", outcome)],
                n as f64,
            );
        }
    }
}

/// `topicberg_commit_duration_seconds`: each table's histogram.
fn commit_durations(out: &mut String, tables: &Tables) {
    let name = "topicberg_commit_duration_seconds";
    family(out, name, "histogram",
        "Wall time of a table's commit stage (dead letters, an upsert's files, the snapshot with its retries), per job and table.");
    for ((job, table), f) in tables.iter().filter(|(_, f)| f.totals.snapshots > 0) {
        histogram_samples(
            out,
            name,
            &[("job", job), ("table", table)],
            &COMMIT_BUCKETS,
            &f.commit_seconds,
        );
    }
}
