//! Why a run did not start, or ended without its report; and the errors
//! of asking Kafka about a job's topics. (Why a job's file did not load:
//! `job_file.rs`.)

use topicberg_kafka::KafkaError;
use topicberg_sync::destination::SetupError;

use crate::error_kind::ServeErrorKind;
use crate::job_file::{JobConfigError, JobFileError, JobProblems};
use crate::run_store::RunStoreError;

/// Why a run did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The job has a run in progress.
    #[error("the job is already running")]
    AlreadyRunning,
    /// The service is shutting down and starts no more runs.
    #[error("the service is shutting down")]
    ShuttingDown,
    /// The store could not give the job or record the run.
    #[error("store: {0}")]
    Store(#[source] RunStoreError),
    /// Called outside a tokio runtime.
    #[error("store: no tokio runtime to run in: {0}")]
    NoRuntime(#[source] tokio::runtime::TryCurrentError),
}

impl StartError {
    /// What kind of failure.
    pub fn kind(&self) -> ServeErrorKind {
        match self {
            Self::AlreadyRunning | Self::ShuttingDown => ServeErrorKind::Invalid,
            Self::Store(e) => e.kind(),
            Self::NoRuntime(_) => ServeErrorKind::Internal,
        }
    }
}

/// Why a run ended without its report (shown at the top of its page).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The run panicked (the panic's message).
    #[error("the sync panicked: {0}")]
    Panicked(String),
    /// The job's configuration did not load.
    #[error(transparent)]
    Config(#[from] JobConfigError),
    /// The job's settings do not resolve.
    #[error(transparent)]
    Problems(#[from] JobProblems),
    /// The sync or maintenance stopped before any table.
    #[error(transparent)]
    Setup(#[from] SetupError),
}

impl RunError {
    /// What kind of failure.
    pub fn kind(&self) -> ServeErrorKind {
        match self {
            Self::Panicked(_) => ServeErrorKind::Internal,
            Self::Config(e) => e.kind(),
            Self::Problems(_) => ServeErrorKind::Invalid,
            Self::Setup(_) => ServeErrorKind::Sync,
        }
    }

    /// Whether the next run may succeed without a change.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Setup(e) if e.retryable())
    }
}

impl From<JobFileError> for RunError {
    fn from(e: JobFileError) -> Self {
        match e {
            JobFileError::Config(e) => Self::Config(e),
            JobFileError::Unresolved(e) => Self::Problems(e),
        }
    }
}

/// Why the job's topics could not be asked about (their lag, their
/// retention).
#[derive(Debug, thiserror::Error)]
pub enum TopicsError {
    /// Kafka did not answer, or refused us.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The task asking it stopped (it panicked).
    #[error("{0}")]
    Task(#[source] tokio::task::JoinError),
}

impl TopicsError {
    /// What kind of failure.
    pub fn kind(&self) -> ServeErrorKind {
        match self {
            Self::Kafka(_) => ServeErrorKind::Kafka,
            Self::Task(_) => ServeErrorKind::Internal,
        }
    }

    /// Whether asking again later may succeed.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Kafka(e) if e.retryable())
    }
}
