//! `/metrics` in the Prometheus text format (version 0.0.4): what the
//! runner recorded after each run, plus the seconds since each job's last
//! successful sync, computed when scraped.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `topicberg_records_total` | counter | `job`, `table` |
//! | `topicberg_bytes_total` | counter | `job`, `table` |
//! | `topicberg_data_files_total` | counter | `job`, `table` |
//! | `topicberg_data_file_bytes_total` | counter | `job`, `table` |
//! | `topicberg_data_file_average_bytes` | gauge | `job`, `table` |
//! | `topicberg_commits_total` | counter | `job`, `table`, `outcome` (`committed`, `superseded`, `failed`) |
//! | `topicberg_commit_retries_total` | counter | `job`, `table` |
//! | `topicberg_commit_duration_seconds` | histogram | `job`, `table` |
//! | `topicberg_dead_letters_total` | counter | `job`, `table` |
//! | `topicberg_skipped_records_total` | counter | `job`, `table` |
//! | `topicberg_visibility_lag_seconds` | gauge | `job`, `table` |
//! | `topicberg_seconds_since_last_commit` | gauge | `job`, `table` |
//! | `topicberg_buffered_bytes` | gauge | `job`, `table` |
//! | `topicberg_syncs_total` | counter | `job`, `outcome` (`succeeded`, `failed`, `cancelled`) |
//! | `topicberg_sync_duration_seconds` | histogram | `job` |
//! | `topicberg_seconds_since_last_success` | gauge | `job` |
//! | `topicberg_consumer_lag_messages` | gauge | `job`, `topic`, `partition` |
//!
//! Counters count since the process started (Prometheus handles resets).
//! The per-table families are in [`tables`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::run_store::RunStatus;
use topicberg_sync::sync::report::SyncReport;

mod tables;
use tables::TableFigures;

/// Upper bounds (seconds) of the sync duration histogram's buckets.
pub const DURATION_BUCKETS: [f64; 11] = [
    1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0,
];

/// One partition's consumer lag after a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Messages not yet in the table: the high watermark minus the consumer
    /// group's committed offset (or minus the low watermark when the group
    /// has none yet).
    pub lag: i64,
}

/// Observations counted per bucket of a list of upper bounds.
#[derive(Debug, Default, Clone)]
struct Histogram {
    /// Per bucket of its bounds (not cumulative).
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, bounds: &[f64], seconds: f64) {
        self.buckets.resize(bounds.len(), 0);
        if let Some(i) = bounds.iter().position(|b| seconds <= *b) {
            self.buckets[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
struct State {
    /// By job and table.
    tables: BTreeMap<(String, String), TableFigures>,
    syncs: BTreeMap<(String, &'static str), u64>,
    durations: BTreeMap<String, Histogram>,
    last_success_ms: BTreeMap<String, i64>,
    lag: BTreeMap<String, Vec<PartitionLag>>,
}

/// The service's metrics; cheap to clone (one shared state).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    state: Arc<Mutex<State>>,
}

impl Metrics {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a finished run of `job`: its outcome and duration, and from
    /// its report (when the sync got that far) the records and bytes of
    /// every committed table. A succeeded run also sets the job's last
    /// success to `finished_ms`.
    pub fn record_run(
        &self,
        job: &str,
        status: RunStatus,
        duration: Duration,
        finished_ms: i64,
        report: Option<&SyncReport>,
    ) {
        let mut state = self.state();
        *state
            .syncs
            .entry((job.to_string(), status.as_str()))
            .or_default() += 1;
        state
            .durations
            .entry(job.to_string())
            .or_default()
            .observe(&DURATION_BUCKETS, duration.as_secs_f64());
        if status == RunStatus::Succeeded {
            state.last_success_ms.insert(job.to_string(), finished_ms);
        }
        for table in report.map_or(&[][..], |r| &r.tables[..]) {
            let key = (job.to_string(), table.table.clone());
            state
                .tables
                .entry(key)
                .or_default()
                .record(table, finished_ms);
        }
    }

    /// Sets when `job` last succeeded (ms since the epoch), e.g. from the
    /// run history at start, so the gauge survives a restart. Keeps a later
    /// success already recorded.
    pub fn set_last_success(&self, job: &str, finished_ms: i64) {
        let mut state = self.state();
        let entry = state.last_success_ms.entry(job.to_string()).or_default();
        *entry = (*entry).max(finished_ms);
    }

    /// Replaces the consumer lag of `job`'s partitions.
    pub fn set_lag(&self, job: &str, mut lag: Vec<PartitionLag>) {
        lag.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        self.state().lag.insert(job.to_string(), lag);
    }

    /// The consumer lag of `job`'s partitions, as `/metrics` shows it;
    /// `None` before a run of it in this process reached Kafka.
    pub fn lag(&self, job: &str) -> Option<Vec<PartitionLag>> {
        self.state().lag.get(job).cloned()
    }

    /// The metrics in the Prometheus text format, now.
    pub fn render(&self) -> String {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        self.render_at(now_ms)
    }

    /// The metrics in the Prometheus text format, with `now_ms` as the
    /// current time (ms since the epoch).
    pub fn render_at(&self, now_ms: i64) -> String {
        let state = self.state();
        let mut out = String::new();
        tables::render(&mut out, &state.tables, now_ms);
        family(
            &mut out,
            "topicberg_syncs_total",
            "counter",
            "Finished syncs per job and outcome (succeeded, failed, cancelled).",
        );
        for ((job, outcome), n) in &state.syncs {
            sample(
                &mut out,
                "topicberg_syncs_total",
                &[("job", job), ("outcome", outcome)],
                *n as f64,
            );
        }
        durations(&mut out, &state.durations);
        since_last_success(&mut out, &state.last_success_ms, now_ms);
        consumer_lag(&mut out, &state.lag);
        out
    }
}

/// `topicberg_sync_duration_seconds`: each job's histogram.
fn durations(out: &mut String, durations: &BTreeMap<String, Histogram>) {
    let name = "topicberg_sync_duration_seconds";
    family(out, name, "histogram", "Wall time of a sync, per job.");
    for (job, h) in durations {
        histogram_samples(out, name, &[("job", job)], &DURATION_BUCKETS, h);
    }
}

/// The `_bucket` (cumulative), `_sum` and `_count` samples of one
/// histogram with `labels`.
fn histogram_samples(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    bounds: &[f64],
    h: &Histogram,
) {
    let bucket = format!("{name}_bucket");
    let mut cumulative = 0;
    let counts = h.buckets.iter().copied().chain(std::iter::repeat(0));
    for (bound, n) in bounds.iter().zip(counts) {
        cumulative += n;
        let le = format_value(*bound);
        let with_le: Vec<(&str, &str)> = labels
            .iter()
            .copied()
            .chain([("le", le.as_str())])
            .collect();
        sample(out, &bucket, &with_le, cumulative as f64);
    }
    let with_le: Vec<(&str, &str)> = labels.iter().copied().chain([("le", "+Inf")]).collect();
    sample(out, &bucket, &with_le, h.count as f64);
    sample(out, &format!("{name}_sum"), labels, h.sum);
    sample(out, &format!("{name}_count"), labels, h.count as f64);
}

/// `topicberg_seconds_since_last_success`, as of `now_ms`.
fn since_last_success(out: &mut String, last_success_ms: &BTreeMap<String, i64>, now_ms: i64) {
    family(
        out,
        "topicberg_seconds_since_last_success",
        "gauge",
        "Seconds since the job's last successful sync (absent before its first).",
    );
    for (job, ms) in last_success_ms {
        let seconds = (now_ms - ms).max(0) as f64 / 1000.0;
        sample(
            out,
            "topicberg_seconds_since_last_success",
            &[("job", job)],
            seconds,
        );
    }
}

/// `topicberg_consumer_lag_messages`: each job's partitions.
fn consumer_lag(out: &mut String, lag: &BTreeMap<String, Vec<PartitionLag>>) {
    family(
        out,
        "topicberg_consumer_lag_messages",
        "gauge",
        "Messages not yet synced per partition after the job's last run: high watermark minus the consumer group's committed offset.",
    );
    for (job, partitions) in lag {
        for p in partitions {
            let partition = p.partition.to_string();
            sample(
                out,
                "topicberg_consumer_lag_messages",
                &[("job", job), ("topic", &p.topic), ("partition", &partition)],
                p.lag as f64,
            );
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{key}=\"{}\"", escape_label(value));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {}", format_value(value));
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Integers without a fraction, other values as Rust prints them
/// (`0.25`), infinities as `+Inf`/`-Inf`.
fn format_value(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests;
