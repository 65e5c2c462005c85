//! The text format of `/metrics`, family by family.

use super::*;
use topicberg_sync::sync::report::{TableReport, TableStatus};

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
        warnings: Vec::new(),
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
        !text.contains("topicberg_records_total{job=\"orders\",table=\"ns.b\"}"),
        "a failed table's records are not counted:\n{text}"
    );
    assert!(
        lines.contains(
            &"topicberg_commits_total{job=\"orders\",table=\"ns.b\",outcome=\"failed\"} 2"
        ),
        "{text}"
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
        "topicberg_data_files_total",
        "topicberg_data_file_bytes_total",
        "topicberg_data_file_average_bytes",
        "topicberg_commits_total",
        "topicberg_commit_retries_total",
        "topicberg_commit_duration_seconds",
        "topicberg_dead_letters_total",
        "topicberg_skipped_records_total",
        "topicberg_visibility_lag_seconds",
        "topicberg_seconds_since_last_commit",
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

#[test]
fn per_table_figures_add_up_over_runs_and_gauges_are_computed_when_scraped() {
    let m = Metrics::default();
    let committed =
        |newest: i64, files: usize, file_bytes: u64, commit_ms: u64, retries: u32| TableReport {
            data_files: files,
            data_file_bytes: file_bytes,
            commit_ms,
            commit_retries: retries,
            newest_timestamp_ms: Some(newest),
            dead_letter_records: 1,
            skipped_records: 2,
            ..table("a", TableStatus::Committed, 10, 100)
        };
    let first = report(vec![committed(9_000, 2, 3_000, 250, 0)]);
    m.record_run(
        "orders",
        RunStatus::Succeeded,
        Duration::from_secs(1),
        10_000,
        Some(&first),
    );
    let second = report(vec![committed(8_000, 1, 3_000, 500, 2)]);
    m.record_run(
        "orders",
        RunStatus::Succeeded,
        Duration::from_secs(1),
        12_000,
        Some(&second),
    );
    let superseded = report(vec![TableReport {
        commit_retries: 1,
        // The spill's bytes are a gauge: the last round's value.
        buffered_bytes: 4_096,
        ..table("a", TableStatus::Superseded, 0, 0)
    }]);
    m.record_run(
        "orders",
        RunStatus::Succeeded,
        Duration::from_secs(1),
        13_000,
        Some(&superseded),
    );
    let text = m.render_at(15_500);
    let labels = "job=\"orders\",table=\"ns.a\"";
    for line in [
        format!("topicberg_records_total{{{labels}}} 20"),
        format!("topicberg_data_files_total{{{labels}}} 3"),
        format!("topicberg_data_file_bytes_total{{{labels}}} 6000"),
        format!("topicberg_data_file_average_bytes{{{labels}}} 2000"),
        format!("topicberg_commits_total{{{labels},outcome=\"committed\"}} 2"),
        format!("topicberg_commits_total{{{labels},outcome=\"superseded\"}} 1"),
        format!("topicberg_commits_total{{{labels},outcome=\"failed\"}} 0"),
        format!("topicberg_commit_retries_total{{{labels}}} 3"),
        format!("topicberg_commit_duration_seconds_bucket{{{labels},le=\"0.1\"}} 0"),
        format!("topicberg_commit_duration_seconds_bucket{{{labels},le=\"0.25\"}} 1"),
        format!("topicberg_commit_duration_seconds_bucket{{{labels},le=\"0.5\"}} 2"),
        format!("topicberg_commit_duration_seconds_bucket{{{labels},le=\"+Inf\"}} 2"),
        format!("topicberg_commit_duration_seconds_sum{{{labels}}} 0.75"),
        format!("topicberg_commit_duration_seconds_count{{{labels}}} 2"),
        format!("topicberg_dead_letters_total{{{labels}}} 2"),
        format!("topicberg_skipped_records_total{{{labels}}} 4"),
        // The newest committed timestamp is 9 s: an older one later
        // (another partition's) does not move it back.
        format!("topicberg_visibility_lag_seconds{{{labels}}} 6.5"),
        format!("topicberg_seconds_since_last_commit{{{labels}}} 3.5"),
        format!("topicberg_buffered_bytes{{{labels}}} 4096"),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in:\n{text}"
        );
    }
}
