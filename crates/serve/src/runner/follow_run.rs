//! A continuous job's follower inside the service: `sync --follow` as one
//! run (kind `follow`) from its start to its stop, beside the job's other
//! runs (a maintenance run may go on while it follows). Stop (the API, the
//! UI, the service's shutdown) asks the follower to commit what it read
//! and leave the consumer group, within the job's `sync.stop_timeout`.
//! After every round its metrics are recorded as a sync's, so the
//! service's `/metrics` and readiness see a follower's rounds as they end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::Instrument;

use topicberg_sync::follow::{
    run_follow_with, FollowLive, FollowOptions, FollowReport, StopSignal,
};
use topicberg_sync::sync::report::SyncReport;

use super::StartError;
use super::{now_ms, read_lag, Lane, Outcome, RunError, RunHandles, RunReport, Runner};
use crate::job_file::load_job;
use crate::metrics::Metrics;
use crate::run_store::{RunKind, RunStatus, Trigger};

/// How often a follower's consumer lag is read for the metrics and the
/// job page (a Kafka round trip; rounds may come every second).
const LAG_INTERVAL: Duration = Duration::from_secs(10);

/// A follower's stop signal and live figures, shared with the service.
#[derive(Clone, Default)]
pub(super) struct FollowHandles {
    pub(super) stop: Arc<StopSignal>,
    pub(super) live: Arc<FollowLive>,
}

/// A follower in progress, as the API shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FollowerState {
    /// Its run (one for the follower's whole life).
    pub run_id: i64,
    /// Whether a stop was asked for (it is committing what it read).
    pub stopping: bool,
    /// Its figures after the last round.
    pub report: FollowReport,
}

impl Runner {
    /// Starts the job's follower (a continuous job); its run id.
    pub fn start_follower(&self, job_id: i64, trigger: Trigger) -> Result<i64, StartError> {
        self.start_run(job_id, RunKind::Follow, trigger)
    }

    /// Asks the job's follower to stop: the round in progress commits, the
    /// follower leaves the group. False when it is not following.
    pub fn stop_follower(&self, job_id: i64) -> bool {
        let running = self.running();
        match running
            .get(&(job_id, Lane::Follower))
            .and_then(|a| a.follow.as_ref())
        {
            Some(follow) => {
                follow.stop.request();
                tracing::info!(job_id, "stop requested");
                true
            }
            None => false,
        }
    }

    /// The job's follower, while it runs.
    pub fn follower(&self, job_id: i64) -> Option<FollowerState> {
        let running = self.running();
        let active = running.get(&(job_id, Lane::Follower))?;
        let follow = active.follow.as_ref()?;
        Some(FollowerState {
            run_id: active.run_id,
            stopping: follow.stop.requested(),
            report: follow.live.snapshot(),
        })
    }

    /// Brings the job's follower in step: started when `wanted` and not
    /// running, stopped when not `wanted`. `restart`: the job's settings
    /// changed, so a running follower is stopped and started again (with
    /// the new job file) once it has committed and left.
    pub fn keep_follower_in_step(
        &self,
        job_id: i64,
        wanted: bool,
        trigger: Trigger,
        restart: bool,
    ) -> Result<(), StartError> {
        let following = self.follower(job_id).is_some();
        match (wanted, following) {
            (true, false) => self.start_follower_once(job_id, trigger),
            (true, true) if restart => {
                self.stop_follower(job_id);
                let runner = self.clone();
                tokio::spawn(async move {
                    runner.follower_stopped(job_id).await;
                    if let Err(e) = runner.start_follower_once(job_id, trigger) {
                        tracing::error!(job_id, error = %e, "restarting the follower failed");
                    }
                });
                Ok(())
            }
            (false, true) => {
                self.stop_follower(job_id);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Starts the follower unless one runs (a concurrent request) or the
    /// service is stopping.
    fn start_follower_once(&self, job_id: i64, trigger: Trigger) -> Result<(), StartError> {
        match self.start_follower(job_id, trigger) {
            Ok(run_id) => {
                tracing::info!(job_id, run_id, "follower started");
                Ok(())
            }
            Err(StartError::AlreadyRunning | StartError::ShuttingDown) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Resolves once the job has no follower (at once if it has none).
    pub async fn follower_stopped(&self, job_id: i64) {
        let mut count = self.shared.count.subscribe();
        let _ = count
            .wait_for(|_| !self.running().contains_key(&(job_id, Lane::Follower)))
            .await;
    }

    /// Loads the job file and follows its topics until stopped.
    pub(super) fn follow(
        &self,
        job_id: i64,
        toml: &str,
        run: &RunHandles,
        span: &tracing::Span,
    ) -> Outcome {
        let job = match load_job(toml, self.data_dir.as_deref()) {
            Ok(loaded) => loaded.job,
            Err(e) => return Outcome::invalid(toml, job_id, e),
        };
        let handles = run.follow.clone().unwrap_or_default();
        let options = FollowOptions {
            live: Some(Arc::clone(&handles.live)),
            on_round: Some(self.round_metrics(&job)),
        };
        let runtime = tokio::runtime::Handle::current();
        let result = runtime
            .block_on(run_follow_with(&job, handles.stop, options).instrument(span.clone()))
            .map(RunReport::Follow)
            .map_err(RunError::from);
        Outcome {
            job_name: job.name.clone(),
            result,
            lag: None,
        }
    }

    fn round_metrics(&self, job: &topicberg_core::Job) -> topicberg_sync::follow::RoundHook {
        round_hook(&self.metrics, job)
    }
}

/// A follower's hook that records each round as a sync in `metrics`, and
/// the consumer lag at most every [`LAG_INTERVAL`], read off the round's
/// thread (serve's continuous jobs, and `sync --follow --listen`).
pub fn round_hook(
    metrics: &Metrics,
    job: &topicberg_core::Job,
) -> topicberg_sync::follow::RoundHook {
    let (metrics, job) = (metrics.clone(), job.clone());
    let lag_read = Mutex::new(None::<Instant>);
    Arc::new(move |round: &SyncReport| {
        let status = if round.succeeded() {
            RunStatus::Succeeded
        } else {
            RunStatus::Failed
        };
        let duration = Duration::from_millis(round.duration_ms);
        metrics.record_run(&job.name, status, duration, now_ms(), Some(round));
        let mut last = lag_read.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|at| at.elapsed() < LAG_INTERVAL) {
            return;
        }
        *last = Some(Instant::now());
        let (metrics, job) = (metrics.clone(), job.clone());
        tokio::task::spawn_blocking(move || match read_lag(&job) {
            Ok(lag) => metrics.set_lag(&job.name, lag),
            Err(e) => tracing::debug!(error = %e, "reading the follower's consumer lag failed"),
        });
    })
}

/// A follower's status when it ended: succeeded when its last round did,
/// cancelled when the stop timeout cut its last round, else failed with
/// the last round's error.
pub(super) fn classify(report: &FollowReport) -> (RunStatus, Option<String>) {
    if report.stop_timed_out {
        return (RunStatus::Cancelled, None);
    }
    match &report.last_error {
        None => (RunStatus::Succeeded, None),
        Some(error) => (RunStatus::Failed, Some(error.clone())),
    }
}
