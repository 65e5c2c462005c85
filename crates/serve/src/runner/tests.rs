use std::sync::OnceLock;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::prelude::*;

use super::test_store::{unreachable_job_toml, MemoryStore};
use super::*;

/// The process-wide subscriber of the lib's tests: the capture layer only.
fn global_capture() -> LogCapture {
    static CAPTURE: OnceLock<LogCapture> = OnceLock::new();
    CAPTURE
        .get_or_init(|| {
            let (layer, capture) = log_capture_layer();
            tracing_subscriber::registry()
                .with(layer.with_filter(LevelFilter::INFO))
                .try_init()
                .expect("no other global subscriber in the lib's tests");
            capture
        })
        .clone()
}

fn runner(store: &Arc<MemoryStore>) -> Runner {
    Runner::new(store.clone(), Metrics::default()).with_log_capture(global_capture())
}

async fn finished(store: &MemoryStore, run_id: i64, within: Duration) -> FinishedRun {
    let started = Instant::now();
    loop {
        if let Some(f) = store.run(run_id).finished {
            return f;
        }
        assert!(
            started.elapsed() < within,
            "run {run_id} did not finish within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_job_file_fails_the_run_with_its_error_log_and_metrics() {
    let store = Arc::new(MemoryStore::default());
    let job = store.add_job("", None, "name = \"broken\"\n");
    let runner = runner(&store);
    let run_id = runner.start(job, Trigger::Manual).unwrap();
    let run = finished(&store, run_id, Duration::from_secs(10)).await;
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.clone().unwrap();
    assert!(
        error.contains("the job's configuration is invalid") && error.contains("source"),
        "{error}"
    );
    assert_eq!(run.report_json, None);
    assert!(
        run.log
            .contains(" INFO topicberg_serve::runner: run started"),
        "{}",
        run.log
    );
    assert!(
        run.log
            .contains("ERROR topicberg_serve::runner: run failed")
            && run.log.contains("configuration is invalid"),
        "{}",
        run.log
    );
    assert!(!run.log.contains('\u{1b}'), "no colours: {}", run.log);
    // The run is recorded before the job counts as idle.
    let started = Instant::now();
    while runner.is_running(job) {
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = runner.metrics.render();
    assert!(
        text.contains("topicberg_syncs_total{job=\"broken\",outcome=\"failed\"} 1"),
        "{text}"
    );
    assert!(
        !text.contains("topicberg_seconds_since_last_success{job=\"broken\""),
        "{text}"
    );
    assert_eq!(store.run(run_id).trigger, Trigger::Manual);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_two_runs_of_one_job_and_shutdown_refuses_new_runs() {
    let store = Arc::new(MemoryStore::default());
    let slow = store.add_job("", None, &unreachable_job_toml("slow"));
    let other = store.add_job("", None, "name = \"other\"\n");
    let runner = runner(&store);
    assert!(
        matches!(runner.start(99, Trigger::Manual), Err(StartError::Store(e)) if e.to_string().contains("no job 99"))
    );
    assert!(
        !runner.is_running(99),
        "a refused start leaves no slot behind"
    );
    let first = runner.start(slow, Trigger::Schedule).unwrap();
    assert!(runner.is_running(slow));
    assert_eq!(runner.current_run(slow), Some(first));
    assert!(store.run(first).started_ms > 0);
    assert!(matches!(
        runner.start(slow, Trigger::Manual),
        Err(StartError::AlreadyRunning)
    ));
    assert!(matches!(
        runner.clone().start(slow, Trigger::Manual),
        Err(StartError::AlreadyRunning)
    ));
    assert_eq!(
        store.runs_of(slow).len(),
        1,
        "the refused start recorded no run"
    );
    // Another job runs meanwhile.
    let second = runner.start(other, Trigger::Manual).unwrap();
    finished(&store, second, Duration::from_secs(10)).await;
    assert!(runner.cancel(slow));
    assert!(!runner.cancel(other), "not running");
    // Shutdown: waits for the slow run to end and refuses new runs.
    tokio::time::timeout(Duration::from_secs(120), runner.wait_idle())
        .await
        .expect("the run ended");
    assert!(!runner.is_running(slow));
    let run = store.run(first).finished.expect("recorded before idle");
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    assert!(
        run.error
            .as_deref()
            .unwrap_or("")
            .contains("listing topics"),
        "{run:?}"
    );
    assert_eq!(runner.current_run(slow), None);
    assert!(run.log.contains("run started"), "{}", run.log);
    assert!(matches!(
        runner.start(other, Trigger::Manual),
        Err(StartError::ShuttingDown)
    ));
    assert_eq!(store.runs_of(other).len(), 1);
}

#[test]
fn classify_names_the_failed_tables() {
    let report = |status, cancelled, group| SyncReport {
        job: "j".into(),
        consumer_group: "topicberg_j".into(),
        duration_ms: 1,
        group_offsets_committed: group,
        group_offsets_left_to_members: false,
        cancelled,
        tables: vec![topicberg_sync::sync::report::TableReport {
            status,
            error: (status == TableStatus::Failed).then(|| "boom at offset 7".to_string()),
            ..topicberg_sync::sync::report::TableReport::new("t", "ns.t")
        }],
        warnings: Vec::new(),
    };
    assert_eq!(
        classify(&Ok(RunReport::Sync(report(
            TableStatus::Committed,
            false,
            true
        )))),
        (RunStatus::Succeeded, None)
    );
    assert_eq!(
        classify(&Ok(RunReport::Sync(report(
            TableStatus::Cancelled,
            true,
            false
        )))),
        (RunStatus::Cancelled, None)
    );
    let (status, error) = classify(&Ok(RunReport::Sync(report(
        TableStatus::Failed,
        false,
        true,
    ))));
    assert_eq!(
        (status, error.as_deref()),
        (RunStatus::Failed, Some("ns.t: boom at offset 7"))
    );
    let (status, error) = classify(&Ok(RunReport::Sync(report(
        TableStatus::Committed,
        false,
        false,
    ))));
    assert_eq!(status, RunStatus::Failed);
    assert!(error.unwrap().contains("consumer group topicberg_j"));
    // A run that ended without a report shows its error as it is.
    let error = RunError::Panicked("kafka down".into());
    let text = error.to_string();
    assert_eq!(classify(&Err(error)), (RunStatus::Failed, Some(text)));
}

#[test]
fn the_layer_keeps_a_runs_events_from_its_threads_as_plain_lines() {
    let (layer, capture) = log_capture_layer();
    let subscriber = tracing_subscriber::registry().with(layer);
    capture.open(7);
    capture.open(8);
    tracing::subscriber::with_default(subscriber, || {
        tracing::info!("outside any run");
        let span = tracing::info_span!("run", run_id = 7_i64, job_id = 1_i64);
        let _entered = span.enter();
        tracing::info!(key = "v", n = 3, shown = %"display", "hello");
        tracing::debug!("too verbose");
        let inner = tracing::info_span!("table", name = "x");
        inner.in_scope(|| tracing::warn!(topic = "t", partition = 2, "from a child span"));
        // A thread entering the run's span (as the drain threads do).
        let propagated = tracing::Span::current();
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || {
                let _entered = propagated.enter();
                tracing::error!(error = %"broker gone", "from a thread");
            })
        })
        .join()
        .unwrap();
        // Another run's span, and one never opened.
        tracing::info_span!("run", run_id = 8_i64).in_scope(|| tracing::info!("run eight"));
        tracing::info_span!("run", run_id = 9_i64).in_scope(|| tracing::info!("run nine"));
    });
    assert_eq!(capture.current(9), None);
    assert_eq!(capture.take(8).lines().count(), 1);
    let log = capture.take(7);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 3, "{log}");
    let time = regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z ").unwrap();
    assert!(lines.iter().all(|l| time.is_match(l)), "{log}");
    let target = "topicberg_serve::runner::tests";
    assert!(
        lines[0].ends_with(&format!(
            "  INFO {target}: hello key=\"v\" n=3 shown=display"
        )),
        "{log}"
    );
    assert!(
        lines[1].ends_with(&format!(
            "  WARN {target}: from a child span topic=\"t\" partition=2"
        )),
        "{log}"
    );
    assert!(
        lines[2].ends_with(&format!(" ERROR {target}: from a thread error=broker gone")),
        "{log}"
    );
    assert_eq!(capture.take(7), "", "taken");
}

#[test]
fn a_runs_log_is_capped() {
    let capture = LogCapture::default();
    capture.open(1);
    let line = "x".repeat(1 << 20);
    for _ in 0..10 {
        capture.append(1, &line);
    }
    let log = capture.take(1);
    assert!(log.len() <= MAX_RUN_LOG_BYTES + 200);
    assert!(
        log.ends_with("... 2 more lines dropped (the log is capped at 8 MiB)\n"),
        "{}",
        &log[log.len() - 80..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_meeting_the_jobs_lock_fails_saying_it_is_already_running_elsewhere() {
    let store = Arc::new(MemoryStore::default());
    let state = std::env::temp_dir().join(format!("topicberg-lock-run-{}", uuid::Uuid::new_v4()));
    let toml = format!(
        "{}[sync]\nstate_dir = \"{}\"\n",
        unreachable_job_toml("locked"),
        state.display()
    );
    // Another sync of the job (a CLI sync, another serve) holds the lock.
    let held = topicberg_sync::sync::lock::JobLock::acquire(&state, "topicberg_locked").unwrap();
    let job = store.add_job("", None, &toml);
    let run_id = runner(&store).start(job, Trigger::Manual).unwrap();
    let run = finished(&store, run_id, Duration::from_secs(10)).await;
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.unwrap();
    assert!(error.contains("is already running elsewhere"), "{error}");
    drop(held);
    std::fs::remove_dir_all(&state).unwrap();
}
