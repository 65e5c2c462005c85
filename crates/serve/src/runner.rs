//! Runs jobs' syncs inside the service: never two runs of one job at once,
//! cancel, per-run log capture, the run and its report recorded in the
//! store, metrics updated after each run.
//!
//! A run executes on tokio's blocking pool (the sync's Kafka metadata calls
//! block), inside a span `run{run_id, job_id, trigger}` whose events the
//! [`log_capture_layer`] keeps in the run's log.

mod error;
mod follow_run;
mod log_capture;
mod maintain_run;
#[cfg(test)]
pub(crate) mod test_store;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use topicberg_core::Job;
use topicberg_kafka::{read_partition_states, select_topics, KafkaConnection};
use tracing::Instrument;

pub use error::{RunError, StartError, TopicsError};
pub use follow_run::{round_hook, FollowerState};
pub use log_capture::{log_capture_layer, LogCapture, LogCaptureLayer, MAX_RUN_LOG_BYTES};

use crate::job_file::{load_job, JobConfigError, JobFileError, LoadedJob};
use crate::metrics::{Metrics, PartitionLag};
use crate::run_store::{FinishedRun, RunKind, RunStatus, RunStore, Trigger};
use topicberg_sync::sync::progress::{ProgressSnapshot, SyncProgress};
use topicberg_sync::sync::report::{SyncReport, TableStatus};
use topicberg_sync::sync::{run_sync_with, SyncOptions};
use topicberg_sync::KAFKA_TIMEOUT;

/// What a run shares with the service while it goes on.
struct RunHandles {
    cancel: Arc<AtomicBool>,
    progress: Arc<SyncProgress>,
    kind: RunKind,
    /// A follower's stop signal and live figures.
    follow: Option<follow_run::FollowHandles>,
}

/// A job has two lanes: its syncs and maintenance runs, one at a time,
/// and its follower (a continuous job), beside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Lane {
    Runs,
    Follower,
}

impl Lane {
    fn of(kind: RunKind) -> Lane {
        match kind {
            RunKind::Follow => Lane::Follower,
            RunKind::Sync | RunKind::Maintain => Lane::Runs,
        }
    }
}

/// Starts, cancels and tracks the service's runs. Clones share everything.
#[derive(Clone)]
pub struct Runner {
    store: Arc<dyn RunStore>,
    metrics: Metrics,
    data_dir: Option<PathBuf>,
    logs: LogCapture,
    shared: Arc<Shared>,
}

struct Shared {
    /// (Job id, lane) -> its run in progress.
    running: Mutex<HashMap<(i64, Lane), Active>>,
    /// How many runs are in progress (for [`Runner::wait_idle`]).
    count: tokio::sync::watch::Sender<usize>,
    closed: AtomicBool,
    /// Woken when a job's schedule changed, so the scheduler looks again
    /// instead of at its next rescan.
    schedules_changed: tokio::sync::Notify,
}

struct Active {
    /// The run (0 while it is being recorded).
    run_id: i64,
    cancel: Arc<AtomicBool>,
    /// What the run's sync has read so far.
    progress: Arc<SyncProgress>,
    /// A follower's stop signal and live figures.
    follow: Option<follow_run::FollowHandles>,
}

impl Runner {
    /// A runner recording runs in `store` and updating `metrics`. Relative
    /// paths of job files resolve against the current folder until
    /// [`Runner::with_data_dir`]; logs are captured once
    /// [`Runner::with_log_capture`] gives the layer's buffers.
    pub fn new(store: Arc<dyn RunStore>, metrics: Metrics) -> Runner {
        Runner {
            store,
            metrics,
            data_dir: None,
            logs: LogCapture::default(),
            shared: Arc::new(Shared {
                running: Mutex::new(HashMap::new()),
                count: tokio::sync::watch::channel(0).0,
                closed: AtomicBool::new(false),
                schedules_changed: tokio::sync::Notify::new(),
            }),
        }
    }

    /// Tells the scheduler that a job's schedule (or paused flag) changed.
    pub fn schedules_changed(&self) {
        self.shared.schedules_changed.notify_one();
    }

    /// Resolves when [`Self::schedules_changed`] was called (since the last
    /// time this resolved).
    pub async fn schedule_change(&self) {
        self.shared.schedules_changed.notified().await;
    }

    /// Resolves a job's relative paths (`[sync] state_dir`, an embedded
    /// catalog's `destination.path`) against `dir` (the service's data
    /// folder). Call before cloning.
    pub fn with_data_dir(mut self, dir: impl Into<PathBuf>) -> Runner {
        self.data_dir = Some(dir.into());
        self
    }

    /// Keeps each run's log in `capture` (from [`log_capture_layer`], whose
    /// layer is installed in the subscriber). Call before cloning.
    pub fn with_log_capture(mut self, capture: LogCapture) -> Runner {
        self.logs = capture;
        self
    }

    /// The log buffers (the log of a run in progress: [`LogCapture::current`]).
    pub fn logs(&self) -> &LogCapture {
        &self.logs
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<(i64, Lane), Active>> {
        self.shared
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a sync of `job_id` in the background and returns its run id.
    /// Must be called inside a tokio runtime.
    pub fn start(&self, job_id: i64, trigger: Trigger) -> Result<i64, StartError> {
        self.start_run(job_id, RunKind::Sync, trigger)
    }

    /// Starts a run of `kind` (a sync, the job's maintenance, or its
    /// follower) in the background and returns its run id; one sync or
    /// maintenance run of a job at a time, and one follower beside them.
    /// Must be called inside a tokio runtime.
    pub fn start_run(
        &self,
        job_id: i64,
        kind: RunKind,
        trigger: Trigger,
    ) -> Result<i64, StartError> {
        if self.shared.closed.load(Ordering::SeqCst) {
            return Err(StartError::ShuttingDown);
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(StartError::NoRuntime)?;
        let cancel = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(SyncProgress::default());
        let follow = (kind == RunKind::Follow).then(follow_run::FollowHandles::default);
        let key = (job_id, Lane::of(kind));
        {
            let mut running = self.running();
            if running.contains_key(&key) {
                return Err(StartError::AlreadyRunning);
            }
            running.insert(
                key,
                Active {
                    run_id: 0,
                    cancel: Arc::clone(&cancel),
                    progress: Arc::clone(&progress),
                    follow: follow.clone(),
                },
            );
        }
        let release = |e| {
            self.running().remove(&key);
            StartError::Store(e)
        };
        let toml = self.store.job_toml(job_id).map_err(release)?;
        let started_ms = now_ms();
        let run_id = self
            .store
            .insert_run(job_id, kind, trigger, started_ms)
            .map_err(release)?;
        self.logs.open(run_id);
        if let Some(active) = self.running().get_mut(&key) {
            active.run_id = run_id;
        }
        self.shared.count.send_modify(|n| *n += 1);
        let runner = self.clone();
        runtime.spawn_blocking(move || {
            let span = tracing::info_span!(
                "run",
                run_id,
                job_id,
                kind = kind.as_str(),
                trigger = trigger.as_str()
            );
            let _entered = span.enter();
            let run = RunHandles {
                cancel,
                progress,
                kind,
                follow,
            };
            runner.execute(job_id, run_id, trigger, &toml, &run, &span);
        });
        Ok(run_id)
    }

    /// Asks the job's run in progress to stop: before its commit phase it
    /// stops draining, commits nothing and deletes the files it wrote; in
    /// its commit phase the commits finish. False when the job is not
    /// running.
    pub fn cancel(&self, job_id: i64) -> bool {
        match self.running().get(&(job_id, Lane::Runs)) {
            Some(active) => {
                active.cancel.store(true, Ordering::SeqCst);
                tracing::info!(job_id, "cancel requested");
                true
            }
            None => false,
        }
    }

    /// Whether the job has a sync or maintenance run in progress.
    pub fn is_running(&self, job_id: i64) -> bool {
        self.running().contains_key(&(job_id, Lane::Runs))
    }

    /// The job's sync or maintenance run in progress, once recorded.
    pub fn current_run(&self, job_id: i64) -> Option<i64> {
        self.running()
            .get(&(job_id, Lane::Runs))
            .map(|a| a.run_id)
            .filter(|id| *id > 0)
    }

    /// What run `run_id` has read so far, while it is in progress.
    pub fn progress(&self, run_id: i64) -> Option<ProgressSnapshot> {
        self.running()
            .values()
            .find(|a| a.run_id == run_id)
            .map(|a| a.progress.snapshot())
    }

    /// Graceful shutdown: starts no more runs, asks every run still
    /// draining to cancel (a run already committing finishes its commits),
    /// and waits until every run reached that safe point and was recorded.
    pub async fn wait_idle(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        let jobs: Vec<(i64, Lane)> = self.running().keys().copied().collect();
        for (job_id, lane) in jobs {
            match lane {
                Lane::Runs => self.cancel(job_id),
                Lane::Follower => self.stop_follower(job_id),
            };
        }
        let mut count = self.shared.count.subscribe();
        let _ = count.wait_for(|n| *n == 0).await;
    }

    /// One run, on a blocking-pool thread inside the run's span.
    fn execute(
        &self,
        job_id: i64,
        run_id: i64,
        trigger: Trigger,
        toml: &str,
        run: &RunHandles,
        span: &tracing::Span,
    ) {
        let started = Instant::now();
        tracing::info!(run_id, job_id, trigger = trigger.as_str(), "run started");
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| match run.kind {
            RunKind::Sync => self.sync(job_id, toml, run, span),
            RunKind::Maintain => self.maintain(job_id, toml, span),
            RunKind::Follow => self.follow(job_id, toml, run, span),
        }))
        .unwrap_or_else(|panic| Outcome {
            job_name: job_name_of(toml, job_id),
            result: Err(RunError::Panicked(panic_text(&panic))),
            lag: None,
        });
        let duration = started.elapsed();
        let (status, error) = classify(&outcome.result);
        let report = outcome.result.as_ref().ok();
        match (&status, &error) {
            (RunStatus::Succeeded, _) => tracing::info!(
                run_id,
                duration_ms = duration.as_millis() as u64,
                "run succeeded"
            ),
            (RunStatus::Cancelled, _) => tracing::info!(
                run_id,
                duration_ms = duration.as_millis() as u64,
                "run cancelled: nothing committed"
            ),
            (_, error) => tracing::error!(
                run_id,
                duration_ms = duration.as_millis() as u64,
                error = error.as_deref().unwrap_or(""),
                "run failed"
            ),
        }
        let finished_ms = now_ms();
        let finished = FinishedRun {
            run_id,
            status,
            finished_ms,
            error,
            report_json: report.and_then(RunReport::to_json),
            log: self.logs.take(run_id),
            lag: outcome
                .lag
                .as_ref()
                .map(|lag| lag.iter().map(|p| p.lag).sum()),
        };
        if let Err(e) = self.store.finish_run(&finished) {
            tracing::error!(run_id, error = %e, "recording the end of the run failed");
        }
        if run.kind == RunKind::Follow {
            // Each round recorded its metrics as it ended.
        } else if let Some(RunReport::Sync(report)) = report {
            self.metrics.record_run(
                &outcome.job_name,
                status,
                duration,
                finished_ms,
                Some(report),
            );
        } else if run.kind == RunKind::Sync {
            self.metrics
                .record_run(&outcome.job_name, status, duration, finished_ms, None);
        }
        if let Some(lag) = outcome.lag {
            self.metrics.set_lag(&outcome.job_name, lag);
        }
        self.running().remove(&(job_id, Lane::of(run.kind)));
        self.shared.count.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Loads the job file and runs the sync; then reads the consumer lag.
    fn sync(&self, job_id: i64, toml: &str, run: &RunHandles, span: &tracing::Span) -> Outcome {
        let job = match load_job(toml, self.data_dir.as_deref()) {
            Ok(loaded) => loaded.job,
            Err(e) => return Outcome::invalid(toml, job_id, e),
        };
        let options = SyncOptions {
            cancel: Some(Arc::clone(&run.cancel)),
            progress: Some(Arc::clone(&run.progress)),
            logged_once: None,
            clients: None,
            member: None,
            record_caps: None,
            kept_indexes: None,
            job_lock: None,
            spill: None,
            fetch_buffers: None,
            handed: None,
            missing_topics: None,
        };
        let runtime = tokio::runtime::Handle::current();
        let result = runtime
            .block_on(run_sync_with(&job, options).instrument(span.clone()))
            .map(RunReport::Sync)
            .map_err(RunError::from);
        let lag = match &result {
            Ok(_) => match read_lag(&job) {
                Ok(lag) => Some(lag),
                Err(e) => {
                    tracing::warn!(error = %e, "reading the consumer lag after the run failed");
                    None
                }
            },
            Err(_) => None,
        };
        Outcome {
            job_name: job.name.clone(),
            result,
            lag,
        }
    }
}

struct Outcome {
    job_name: String,
    result: Result<RunReport, RunError>,
    lag: Option<Vec<PartitionLag>>,
}

impl Outcome {
    /// A run whose job file did not load (parse or resolve): named as well
    /// as the text allows.
    fn invalid(toml: &str, job_id: i64, error: JobFileError) -> Outcome {
        Outcome {
            job_name: job_name_of(toml, job_id),
            result: Err(error.into()),
            lag: None,
        }
    }
}

/// What a run reports: a sync's, a maintenance run's or a follower's.
enum RunReport {
    Sync(SyncReport),
    Maintain(topicberg_sync::maintain::MaintainReport),
    Follow(topicberg_sync::follow::FollowReport),
}

impl RunReport {
    fn to_json(&self) -> Option<String> {
        match self {
            RunReport::Sync(r) => serde_json::to_string(r).ok(),
            RunReport::Maintain(r) => serde_json::to_string(r).ok(),
            RunReport::Follow(r) => serde_json::to_string(r).ok(),
        }
    }
}

/// The run's status and, when it failed, the error shown at the top of its
/// page: the sync's error, or the failed tables' errors.
fn classify(result: &Result<RunReport, RunError>) -> (RunStatus, Option<String>) {
    let report = match result {
        Err(e) => return (RunStatus::Failed, Some(e.to_string())),
        Ok(RunReport::Maintain(report)) => return maintain_run::classify(report),
        Ok(RunReport::Follow(report)) => return follow_run::classify(report),
        Ok(RunReport::Sync(report)) => report,
    };
    if report.cancelled {
        return (RunStatus::Cancelled, None);
    }
    if report.succeeded() {
        return (RunStatus::Succeeded, None);
    }
    let mut errors: Vec<String> = report
        .tables
        .iter()
        .filter(|t| t.status == TableStatus::Failed)
        .map(|t| format!("{}: {}", t.table, t.error.as_deref().unwrap_or("failed")))
        .collect();
    if !report.group_offsets_committed {
        errors.push(format!(
            "committing the offsets of consumer group {} failed (the next sync repairs them from the tables)",
            report.consumer_group
        ));
    }
    (RunStatus::Failed, Some(errors.join("; ")))
}

impl Runner {
    /// The job as a run gets it: its job file from the store, loaded with
    /// the relative paths under the data folder ([`load_job`]).
    pub(crate) fn load_job(&self, job_id: i64) -> Result<LoadedJob, JobFileError> {
        let toml = self.store.job_toml(job_id).map_err(JobConfigError::from)?;
        load_job(&toml, self.data_dir.as_deref())
    }
}

/// The consumer lag of every partition the job selects: high watermark
/// minus the group's committed offset (the sync commits the group after
/// its snapshots; no committed offset: minus the low watermark).
pub(crate) fn read_lag(job: &Job) -> Result<Vec<PartitionLag>, TopicsError> {
    let connection = KafkaConnection::from_source(&job.source);
    let selection = select_topics(&connection, &job.topics, KAFKA_TIMEOUT)?;
    let states = read_partition_states(
        &connection,
        &job.consumer_group,
        &selection.selected,
        KAFKA_TIMEOUT,
    )?;
    Ok(states
        .into_iter()
        .map(|s| PartitionLag {
            lag: (s.high - s.committed.unwrap_or(s.low)).max(0),
            topic: s.topic,
            partition: s.partition,
        })
        .collect())
}

/// The job's `name` from its TOML (for metrics when it does not parse).
fn job_name_of(toml: &str, job_id: i64) -> String {
    toml::from_str::<toml::Table>(toml)
        .ok()
        .and_then(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .unwrap_or_else(|| format!("job-{job_id}"))
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as i64
}
