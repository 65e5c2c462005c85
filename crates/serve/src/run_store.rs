//! What the runner and the scheduler need from the service's store, as a
//! trait: `store::Store` implements it, and the runner's unit tests use an
//! in-memory one.

use crate::error_kind::ServeErrorKind;

/// How a run ended (or that it has not yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Still running.
    Running,
    /// Every table committed or had nothing new.
    Succeeded,
    /// A table or the whole sync failed (the error says why).
    Failed,
    /// Cancelled before it committed anything.
    Cancelled,
}

impl RunStatus {
    /// The name stored and shown: `running`, `succeeded`, `failed`, `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status a stored name means.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Running,
            Self::Succeeded,
            Self::Failed,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// What a run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunKind {
    /// `topicberg sync`: drain, write, commit.
    Sync,
    /// `topicberg maintain`: compaction, snapshot expiry, orphan removal.
    Maintain,
    /// `topicberg sync --follow`: a continuous job's follower, from its
    /// start to its stop (one run).
    Follow,
}

impl RunKind {
    /// The name stored and shown: `sync`, `maintain`, `follow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sync => "sync",
            Self::Maintain => "maintain",
            Self::Follow => "follow",
        }
    }
}

/// How a job runs (its type lives in the job file's `[serve]`).
pub use topicberg_core::config::JobMode;

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// "Sync Now" (UI or API).
    Manual,
    /// The job's schedule.
    Schedule,
    /// A scheduled run missed while the service was down, run at start.
    Missed,
    /// Started with the service (a continuous job's follower).
    Service,
}

impl Trigger {
    /// The name stored and shown: `manual`, `schedule`, `missed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Schedule => "schedule",
            Self::Missed => "missed",
            Self::Service => "service",
        }
    }
}

/// How a run ended, to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishedRun {
    /// The run.
    pub run_id: i64,
    /// Succeeded, failed or cancelled.
    pub status: RunStatus,
    /// When it ended (ms since the epoch).
    pub finished_ms: i64,
    /// The error, shown at the top of the run's page (failed runs).
    pub error: Option<String>,
    /// The sync report (`SyncReport` as JSON), when the sync got that far.
    pub report_json: Option<String>,
    /// The run's log lines (no secrets: the sync never logs them).
    pub log: String,
    /// The job's consumer lag right after the run (all partitions).
    pub lag: Option<i64>,
}

/// A job the scheduler looks after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledJob {
    /// The job.
    pub job_id: i64,
    /// Its name.
    pub job_name: String,
    /// What the schedule runs: the job's sync or its maintenance.
    pub kind: RunKind,
    /// Its schedule text (see `scheduler::Schedule::parse`); empty: manual only.
    pub schedule: String,
    /// Paused: the schedule does not start runs.
    pub paused: bool,
    /// When its last run of this kind started (ms since the epoch), any
    /// trigger.
    pub last_started_ms: Option<i64>,
}

/// Why the store could not give or record what a run needs.
#[derive(Debug, thiserror::Error)]
pub enum RunStoreError {
    /// The job, its pieces or the database (the store's `StoreError`,
    /// boxed: the store is built on this trait, not the other way round).
    #[error("{0}")]
    Store(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The start of a run could not be recorded.
    #[error("recording a run of job {job_id}: {source}")]
    InsertRun {
        /// The job.
        job_id: i64,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The end of a run could not be recorded.
    #[error("recording the end of run {run_id}: {source}")]
    FinishRun {
        /// The run.
        run_id: i64,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The jobs' schedules could not be read.
    #[error(transparent)]
    Schedules(rusqlite::Error),
    /// No such job.
    #[error("no job {0}")]
    NoJob(i64),
    /// No such run.
    #[error("no run {0}")]
    NoRun(i64),
}

impl RunStoreError {
    /// What kind of failure.
    pub fn kind(&self) -> ServeErrorKind {
        ServeErrorKind::Store
    }
}

/// The store operations runs need.
pub trait RunStore: Send + Sync + 'static {
    /// The job's job file, assembled from its source, destination and job
    /// pieces, with the real secrets (never shown anywhere).
    fn job_toml(&self, job_id: i64) -> Result<String, RunStoreError>;
    /// Records that a run started; returns its id.
    fn insert_run(
        &self,
        job_id: i64,
        kind: RunKind,
        trigger: Trigger,
        started_ms: i64,
    ) -> Result<i64, RunStoreError>;
    /// Records how a run ended.
    fn finish_run(&self, run: &FinishedRun) -> Result<(), RunStoreError>;
    /// Every job, with its schedule.
    fn schedules(&self) -> Result<Vec<ScheduledJob>, RunStoreError>;
}
