//! The service's runner against the test bed: a real job run through
//! `Runner` (the store in memory), cancelled in the middle of a throttled
//! drain, then run again; the run's log captured from every thread; the
//! metrics after each run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use topicberg_core::JobConfig;
use topicberg_serve::metrics::Metrics;
use topicberg_serve::run_store::{
    FinishedRun, RunKind, RunStatus, RunStore, RunStoreError, ScheduledJob, Trigger,
};
use topicberg_serve::runner::{log_capture_layer, LogCapture, Runner, StartError};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;

use crate::support::{
    create_topic, group_offsets, plaintext, produce_to_partitions, read_rows, throttle_consumer,
    wait_until, Catalog, Job,
};
use crate::testbed::{get, unique_name};

/// The capture layer as this test binary's global subscriber (installed once).
fn capture() -> LogCapture {
    static CAPTURE: OnceLock<LogCapture> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let (layer, capture) = log_capture_layer();
            tracing_subscriber::registry()
                .with(layer.with_filter(LevelFilter::INFO))
                .try_init()
                .expect("no other global subscriber in the integration tests");
            capture
        })
        .clone()
}

/// One job, its runs in memory.
struct TestStore {
    toml: String,
    runs: Mutex<Vec<(i64, Trigger, Option<FinishedRun>)>>,
}

static NEXT_RUN: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1_000);

impl RunStore for TestStore {
    fn job_toml(&self, job_id: i64) -> Result<String, RunStoreError> {
        (job_id == 1)
            .then(|| self.toml.clone())
            .ok_or(RunStoreError::NoJob(job_id))
    }

    fn insert_run(
        &self,
        _job: i64,
        _kind: RunKind,
        trigger: Trigger,
        _started_ms: i64,
    ) -> Result<i64, RunStoreError> {
        let id = NEXT_RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.runs.lock().unwrap().push((id, trigger, None));
        Ok(id)
    }

    fn finish_run(&self, run: &FinishedRun) -> Result<(), RunStoreError> {
        let mut runs = self.runs.lock().unwrap();
        let entry = runs.iter_mut().find(|r| r.0 == run.run_id).unwrap();
        entry.2 = Some(run.clone());
        Ok(())
    }

    fn schedules(&self) -> Result<Vec<ScheduledJob>, RunStoreError> {
        Ok(Vec::new())
    }
}

impl TestStore {
    fn finished(&self, run_id: i64) -> Option<FinishedRun> {
        let runs = self.runs.lock().unwrap();
        runs.iter()
            .find(|r| r.0 == run_id)
            .and_then(|r| r.2.clone())
    }

    fn wait_finished(&self, run_id: i64, within: Duration) -> FinishedRun {
        let mut out = None;
        wait_until(&format!("run {run_id} to finish"), within, || {
            out = self.finished(run_id);
            out.is_some()
        });
        out.unwrap()
    }
}

/// The job file as the service's store gives it: real secrets in place.
fn job_toml(job: &Job) -> String {
    std::fs::read_to_string(&job.path)
        .unwrap()
        .replace("${TESTBED_S3_SECRET_KEY}", &get("TESTBED_S3_SECRET_KEY"))
}

fn messages(ids: std::ops::Range<i64>, partitions: i32) -> Vec<(i32, String, String)> {
    ids.map(|i| {
        (
            (i % partitions as i64) as i32,
            format!("k{i}"),
            format!(r#"{{"id":{i}}}"#),
        )
    })
    .collect()
}

/// Where each id of `messages` landed, the topic having been empty.
fn expected_positions(messages: &[(i32, String, String)]) -> BTreeMap<(i64, i64), i64> {
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    messages
        .iter()
        .map(|(p, key, _)| {
            let offset = next.entry(*p).or_insert(0);
            let position = (*p as i64, *offset);
            *offset += 1;
            (position, key[1..].parse().unwrap())
        })
        .collect()
}

fn report_of(run: &FinishedRun) -> Value {
    serde_json::from_str(run.report_json.as_deref().expect("a report")).unwrap()
}

/// The table's data files and snapshot count, as storage and catalog say.
fn table_state(
    rt: &tokio::runtime::Runtime,
    config: &JobConfig,
    table: &str,
) -> (Vec<String>, usize) {
    rt.block_on(async {
        let job = topicberg_core::Job::resolve(config).unwrap();
        let destination = topicberg_sync::destination::connect_destination(&job)
            .await
            .unwrap();
        let handle = destination
            .load_table(&vec![config.namespace()], table)
            .await
            .expect("table exists");
        let data = format!("{}/data", handle.metadata().location());
        let files = destination.storage().list(&data).await.unwrap();
        (files, handle.snapshot_summaries().len())
    })
}

fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A run cancelled while it drains a throttled topic commits nothing (no
/// snapshot, group offsets unmoved), deletes the data files it wrote and is
/// recorded as cancelled with its log; the next run reads every message
/// exactly once. The runner refuses a second run of the job meanwhile, and
/// the metrics follow each run. A shutdown in the middle of a drain cancels
/// the run and waits until it is recorded.
#[test]
fn a_cancelled_run_commits_nothing_and_the_next_run_reads_everything_once() {
    let capture = capture();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let topic = unique_name("serve_cancel");
    create_topic(&topic, 3);
    // Small batches: the cancelled run has data files written to delete.
    let streams = format!(
        "[sync]\nbatch_rows = 1000\n\n[[streams]]\ntopic = \"{topic}\"\non_invalid = \"skip\"\n"
    );
    let job = Job::new(Catalog::Seaweed, &[&topic], "", &streams);
    let toml = job_toml(&job);
    let config = JobConfig::from_toml_str(&toml, |_| None).unwrap();
    let table = topic.to_lowercase();
    let store = Arc::new(TestStore {
        toml,
        runs: Mutex::new(Vec::new()),
    });
    let metrics = Metrics::default();
    let runner = Runner::new(store.clone(), metrics.clone())
        .with_data_dir(job.path.parent().unwrap())
        .with_log_capture(capture);
    let start = |trigger| rt.block_on(async { runner.start(1, trigger) });

    // Run 1: 30 messages; makes the table.
    let first = messages(0..30, 3);
    produce_to_partitions(&plaintext(), &topic, &first);
    let run = store.wait_finished(start(Trigger::Manual).unwrap(), Duration::from_secs(120));
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "{:?}\n{}",
        run.error,
        run.log
    );
    assert!(run.log.contains("committed snapshot"), "{}", run.log);
    let (files_before, snapshots_before) = table_state(&rt, &config, &table);
    assert_eq!(snapshots_before, 1);

    // Run 2: 210,000 more (~7 MB) read at 256 KiB/s; cancelled mid-drain.
    let second = messages(30..210_030, 3);
    produce_to_partitions(&plaintext(), &topic, &second);
    throttle_consumer(&get("TESTBED_KAFKA_BOOTSTRAP"), &job.group(), 1 << 18);
    let run_id = start(Trigger::Schedule).unwrap();
    assert!(matches!(
        start(Trigger::Manual),
        Err(StartError::AlreadyRunning)
    ));
    wait_until("the run to read messages", Duration::from_secs(120), || {
        let log = runner.logs().current(run_id).unwrap_or_default();
        log.lines()
            .any(|l| l.contains("sync in progress") && !l.contains(" records=0 "))
            || store.finished(run_id).is_some()
    });
    assert!(
        store.finished(run_id).is_none(),
        "the run ended before the cancel; make the topic bigger"
    );
    let cancelled_at = Instant::now();
    assert!(runner.cancel(1));
    let run = store.wait_finished(run_id, Duration::from_secs(120));
    let cancel_took = cancelled_at.elapsed();
    let report = report_of(&run);
    eprintln!(
        "cancel took {cancel_took:?}; report {report}\nlog:\n{}",
        run.log
    );
    assert_eq!(run.status, RunStatus::Cancelled, "{:?}", run.error);
    // The drain checks the flag between polls, throttled or not.
    assert!(
        cancel_took < Duration::from_secs(10),
        "cancel took {cancel_took:?}"
    );
    assert_eq!(run.error, None);
    assert_eq!(report["cancelled"], true, "{report}");
    assert_eq!(report["group_offsets_committed"], false, "{report}");
    let t = &report["tables"][0];
    assert_eq!(t["status"], "cancelled", "{t}");
    assert_eq!(t["snapshot_id"], Value::Null, "{t}");
    assert_eq!(
        t["orphan_files"],
        serde_json::json!([]),
        "every file written was deleted: {t}"
    );
    assert!(
        run.log
            .contains("sync cancelled before its commit phase; deleting the files it wrote"),
        "{}",
        run.log
    );
    let deleted = run
        .log
        .lines()
        .find(|l| l.contains("deleted the files of a failed table"))
        .unwrap_or_else(|| panic!("the run wrote files and deleted them:\n{}", run.log));
    assert!(
        deleted.contains(" left=0") && !deleted.contains(" files=0 "),
        "{deleted}"
    );
    assert!(
        !run.log.contains("committed snapshot"),
        "no commit in a cancelled run's log:\n{}",
        run.log
    );
    let (files_after, snapshots_after) = table_state(&rt, &config, &table);
    assert_eq!(snapshots_after, snapshots_before, "no snapshot committed");
    assert_eq!(
        files_after, files_before,
        "the cancelled run's data files are gone"
    );
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 3),
        [Some(10); 3]
    );
    assert!(!runner.is_running(1));
    let text = metrics.render();
    let job_label = format!("job=\"{}\"", job.name);
    assert_eq!(
        metric(
            &text,
            &format!("topicberg_syncs_total{{{job_label},outcome=\"cancelled\"}}")
        ),
        Some(1.0),
        "{text}"
    );
    for p in 0..3 {
        let lag = format!(
            "topicberg_consumer_lag_messages{{{job_label},topic=\"{topic}\",partition=\"{p}\"}}"
        );
        assert_eq!(metric(&text, &lag), Some(70_000.0), "{text}");
    }

    // Run 3, unthrottled, with one invalid message skipped by a drain thread.
    throttle_consumer(&get("TESTBED_KAFKA_BOOTSTRAP"), &job.group(), 0);
    produce_to_partitions(
        &plaintext(),
        &topic,
        &[(0, "bad".into(), "{not json".into())],
    );
    let run = store.wait_finished(start(Trigger::Manual).unwrap(), Duration::from_secs(300));
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "{:?}\n{}",
        run.error,
        run.log
    );
    let report = report_of(&run);
    let t = &report["tables"][0];
    assert_eq!(
        t["records"], 210_000,
        "everything the cancelled run had read, once: {t}"
    );
    assert_eq!(t["skipped_records"], 1, "{t}");
    assert!(
        run.log
            .contains("WARN topicberg_sync::sync::invalid: skipped invalid messages"),
        "the drain thread's line is in the run's log:\n{}",
        run.log
    );
    let rows = read_rows("duckdb", Catalog::Seaweed, &job.table(&topic));
    let mut positions = BTreeMap::new();
    for r in &rows {
        let key = (
            r["_kafka_partition"].as_i64().unwrap(),
            r["_kafka_offset"].as_i64().unwrap(),
        );
        assert!(
            positions.insert(key, r["id"].as_i64().unwrap()).is_none(),
            "{key:?} twice"
        );
    }
    assert_eq!(positions.len(), 210_030);
    assert_eq!(positions, expected_positions(&[first, second].concat()));
    assert_eq!(
        group_offsets(&plaintext(), &job.group(), &topic, 3),
        [Some(70_011), Some(70_010), Some(70_010)]
    );
    let text = metrics.render();
    let records = format!(
        "topicberg_records_total{{{job_label},table=\"{}\"}}",
        job.table(&topic)
    );
    assert_eq!(metric(&text, &records), Some(210_030.0), "{text}");
    assert_eq!(
        metric(
            &text,
            &format!("topicberg_syncs_total{{{job_label},outcome=\"succeeded\"}}")
        ),
        Some(2.0),
        "{text}"
    );
    for p in 0..3 {
        let lag = format!(
            "topicberg_consumer_lag_messages{{{job_label},topic=\"{topic}\",partition=\"{p}\"}}"
        );
        assert_eq!(metric(&text, &lag), Some(0.0), "{text}");
    }
    let since = metric(
        &text,
        &format!("topicberg_seconds_since_last_success{{{job_label}}}"),
    );
    assert!(since.is_some_and(|s| (0.0..60.0).contains(&s)), "{text}");
    assert!(
        metric(
            &text,
            &format!("topicberg_sync_duration_seconds_count{{{job_label}}}")
        ) == Some(3.0),
        "{text}"
    );

    // Shutdown in the middle of a run's drain: `wait_idle` cancels it, waits
    // until it is recorded, and refuses new runs.
    let third = messages(210_030..420_030, 3);
    produce_to_partitions(&plaintext(), &topic, &third);
    throttle_consumer(&get("TESTBED_KAFKA_BOOTSTRAP"), &job.group(), 1 << 18);
    let run_id = start(Trigger::Schedule).unwrap();
    wait_until("the run to read messages", Duration::from_secs(120), || {
        let log = runner.logs().current(run_id).unwrap_or_default();
        log.contains("sync in progress") || store.finished(run_id).is_some()
    });
    assert!(
        store.finished(run_id).is_none(),
        "the run ended before the shutdown"
    );
    let shutdown_started = Instant::now();
    rt.block_on(runner.wait_idle());
    let shutdown_took = shutdown_started.elapsed();
    throttle_consumer(&get("TESTBED_KAFKA_BOOTSTRAP"), &job.group(), 0);
    let run = store
        .finished(run_id)
        .expect("recorded before wait_idle returned");
    eprintln!("shutdown took {shutdown_took:?}");
    assert_eq!(
        run.status,
        RunStatus::Cancelled,
        "{:?}\n{}",
        run.error,
        run.log
    );
    assert!(shutdown_took < Duration::from_secs(10), "{shutdown_took:?}");
    assert!(!runner.is_running(1));
    assert!(matches!(
        start(Trigger::Manual),
        Err(StartError::ShuttingDown)
    ));
    let (_, snapshots) = table_state(&rt, &config, &table);
    assert_eq!(snapshots, snapshots_before + 1, "only run 3 committed");
}
