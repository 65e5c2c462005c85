//! `/metrics` in the Prometheus text format (version 0.0.4): what the
//! runner recorded after each run, plus the seconds since each job's last
//! successful sync, computed when scraped.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `topicberg_records_total` | counter | `job`, `table` |
//! | `topicberg_bytes_total` | counter | `job`, `table` |
//! | `topicberg_syncs_total` | counter | `job`, `outcome` (`succeeded`, `failed`, `cancelled`) |
//! | `topicberg_sync_duration_seconds` | histogram | `job` |
//! | `topicberg_seconds_since_last_success` | gauge | `job` |
//! | `topicberg_consumer_lag_messages` | gauge | `job`, `topic`, `partition` |
//!
//! Counters count since the process started (Prometheus handles resets).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::run_store::RunStatus;
use topicberg_sync::sync::report::{SyncReport, TableStatus};

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

#[derive(Debug, Default, Clone)]
struct Histogram {
    /// Per bucket of [`DURATION_BUCKETS`] (not cumulative).
    buckets: [u64; DURATION_BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if let Some(i) = DURATION_BUCKETS.iter().position(|b| seconds <= *b) {
            self.buckets[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
struct State {
    records: BTreeMap<(String, String), u64>,
    bytes: BTreeMap<(String, String), u64>,
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
            .observe(duration.as_secs_f64());
        if status == RunStatus::Succeeded {
            state.last_success_ms.insert(job.to_string(), finished_ms);
        }
        for table in report.map_or(&[][..], |r| &r.tables[..]) {
            if table.status != TableStatus::Committed {
                continue;
            }
            let key = (job.to_string(), table.table.clone());
            *state.records.entry(key.clone()).or_default() += table.records;
            *state.bytes.entry(key).or_default() += table.bytes;
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
        table_counter(
            &mut out,
            "topicberg_records_total",
            "Records written to Iceberg tables (committed), per job and table.",
            &state.records,
        );
        table_counter(
            &mut out,
            "topicberg_bytes_total",
            "Kafka key and value bytes read into committed snapshots, per job and table.",
            &state.bytes,
        );
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

/// A counter family with one sample per job and table.
fn table_counter(
    out: &mut String,
    name: &str,
    help: &str,
    counts: &BTreeMap<(String, String), u64>,
) {
    family(out, name, "counter", help);
    for ((job, table), n) in counts {
        sample(out, name, &[("job", job), ("table", table)], *n as f64);
    }
}

/// `topicberg_sync_duration_seconds`: each job's histogram.
fn durations(out: &mut String, durations: &BTreeMap<String, Histogram>) {
    let name = "topicberg_sync_duration_seconds";
    family(out, name, "histogram", "Wall time of a sync, per job.");
    for (job, h) in durations {
        let mut cumulative = 0;
        for (bound, n) in DURATION_BUCKETS.iter().zip(h.buckets) {
            cumulative += n;
            let le = format_value(*bound);
            sample(
                out,
                &format!("{name}_bucket"),
                &[("job", job), ("le", &le)],
                cumulative as f64,
            );
        }
        sample(
            out,
            &format!("{name}_bucket"),
            &[("job", job), ("le", "+Inf")],
            h.count as f64,
        );
        sample(out, &format!("{name}_sum"), &[("job", job)], h.sum);
        sample(
            out,
            &format!("{name}_count"),
            &[("job", job)],
            h.count as f64,
        );
    }
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
mod tests {
    use super::*;
    use topicberg_sync::sync::report::TableReport;

    fn table(name: &str, status: TableStatus, records: u64, bytes: u64) -> TableReport {
        TableReport {
            status,
            records,
            bytes,
            data_files: 1,
            data_file_bytes: 10,
            duration_ms: 1,
            ..TableReport::new(name, &format!("ns.{name}"))
        }
    }

    fn report(tables: Vec<TableReport>) -> SyncReport {
        SyncReport {
            job: "orders".into(),
            consumer_group: "g".into(),
            duration_ms: 1,
            group_offsets_committed: true,
            group_offsets_left_to_members: false,
            cancelled: false,
            tables,
        }
    }

    #[test]
    fn renders_every_family_in_the_text_format() {
        let m = Metrics::default();
        let r = report(vec![
            table("a", TableStatus::Committed, 8, 800),
            table("b", TableStatus::Failed, 5, 500),
        ]);
        m.record_run(
            "orders",
            RunStatus::Succeeded,
            Duration::from_millis(2500),
            10_000,
            Some(&r),
        );
        m.record_run(
            "orders",
            RunStatus::Succeeded,
            Duration::from_secs(40),
            20_000,
            Some(&r),
        );
        m.record_run(
            "orders",
            RunStatus::Failed,
            Duration::from_secs(9000),
            30_000,
            None,
        );
        m.set_lag(
            "orders",
            vec![
                PartitionLag {
                    topic: "t".into(),
                    partition: 1,
                    lag: 3,
                },
                PartitionLag {
                    topic: "t".into(),
                    partition: 0,
                    lag: 0,
                },
            ],
        );
        let text = m.render_at(65_500);
        let expected = [
            "# HELP topicberg_records_total Records written to Iceberg tables (committed), per job and table.",
            "# TYPE topicberg_records_total counter",
            "topicberg_records_total{job=\"orders\",table=\"ns.a\"} 16",
            "# TYPE topicberg_bytes_total counter",
            "topicberg_bytes_total{job=\"orders\",table=\"ns.a\"} 1600",
            "# TYPE topicberg_syncs_total counter",
            "topicberg_syncs_total{job=\"orders\",outcome=\"failed\"} 1",
            "topicberg_syncs_total{job=\"orders\",outcome=\"succeeded\"} 2",
            "# TYPE topicberg_sync_duration_seconds histogram",
            "topicberg_sync_duration_seconds_bucket{job=\"orders\",le=\"1\"} 0",
            "topicberg_sync_duration_seconds_bucket{job=\"orders\",le=\"5\"} 1",
            "topicberg_sync_duration_seconds_bucket{job=\"orders\",le=\"30\"} 1",
            "topicberg_sync_duration_seconds_bucket{job=\"orders\",le=\"60\"} 2",
            "topicberg_sync_duration_seconds_bucket{job=\"orders\",le=\"7200\"} 2",
            "topicberg_sync_duration_seconds_bucket{job=\"orders\",le=\"+Inf\"} 3",
            "topicberg_sync_duration_seconds_sum{job=\"orders\"} 9042.5",
            "topicberg_sync_duration_seconds_count{job=\"orders\"} 3",
            "# TYPE topicberg_seconds_since_last_success gauge",
            "topicberg_seconds_since_last_success{job=\"orders\"} 45.5",
            "# TYPE topicberg_consumer_lag_messages gauge",
            "topicberg_consumer_lag_messages{job=\"orders\",topic=\"t\",partition=\"0\"} 0",
            "topicberg_consumer_lag_messages{job=\"orders\",topic=\"t\",partition=\"1\"} 3",
        ];
        let lines: Vec<&str> = text.lines().collect();
        for line in expected {
            assert!(lines.contains(&line), "missing {line:?} in:\n{text}");
        }
        assert!(
            !text.contains("ns.b"),
            "a failed table's records are not counted:\n{text}"
        );
        // Every sample line is `name{labels} value` with a number.
        for line in lines.iter().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
        // Samples of one family follow its TYPE line.
        let at = |needle: &str| text.find(needle).unwrap();
        assert!(at("# TYPE topicberg_syncs_total") < at("topicberg_syncs_total{"));
        assert!(at("topicberg_syncs_total{") < at("# TYPE topicberg_sync_duration_seconds"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label("x\ny"), "x\\ny");
        let m = Metrics::default();
        m.record_run(
            "we\"ird\njob",
            RunStatus::Cancelled,
            Duration::ZERO,
            0,
            None,
        );
        let text = m.render_at(0);
        assert!(
            text.contains("topicberg_syncs_total{job=\"we\\\"ird\\njob\",outcome=\"cancelled\"} 1"),
            "{text}"
        );
        // The newline in the job name did not break a line.
        assert!(
            text.lines()
                .all(|l| l.starts_with('#') || l.starts_with("topicberg_")),
            "{text}"
        );
    }

    #[test]
    fn empty_metrics_still_declare_every_family() {
        let text = Metrics::default().render_at(0);
        for name in [
            "topicberg_records_total",
            "topicberg_bytes_total",
            "topicberg_syncs_total",
            "topicberg_sync_duration_seconds",
            "topicberg_seconds_since_last_success",
            "topicberg_consumer_lag_messages",
        ] {
            assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
        }
        assert!(text.lines().all(|l| l.starts_with('#')), "{text}");
    }

    #[test]
    fn last_success_keeps_the_latest() {
        let m = Metrics::default();
        m.set_last_success("j", 5_000);
        m.set_last_success("j", 1_000);
        assert!(m
            .render_at(7_000)
            .contains("topicberg_seconds_since_last_success{job=\"j\"} 2\n"));
    }
}
