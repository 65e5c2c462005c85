//! Why a table of a sync failed, stage by stage: each stage's error type,
//! and [`TableFailure`], any of them, which the table's report shows (its
//! Display) and the log names with its stage. Every message names the
//! topic, partition, offset, field or file where one is known.

use topicberg_core::{ColumnsError, DecodeErrorKind, DecoderConfigError, RegistryError};
use topicberg_iceberg::IcebergError;

use super::chunk::SinkError;
use super::dlq::DeadLetterError;
use super::plan::PlanError;
use super::upsert::SpillError;
use super::upsert_commit::UpsertError;
use crate::columns::TableColumnsError;
use crate::discover::SampleError;
use crate::error::SyncErrorKind;

/// Why a table failed, whatever the stage.
#[derive(Debug, thiserror::Error)]
pub enum TableFailure {
    /// Plan: the registry could not say how the table's values are read.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// Plan: the table could not be loaded.
    #[error(transparent)]
    Load(IcebergError),
    /// Plan: the offsets the table records cannot be read (the Iceberg
    /// crate's text).
    #[error("{0}")]
    RecordedOffsets(String),
    /// Plan: a partition cannot be planned (the group is ahead of the
    /// table, retention passed the table's offsets).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Create: the new table could not be made.
    #[error(transparent)]
    Create(#[from] CreateError),
    /// Columns: the table's columns cannot be decoded into.
    #[error(transparent)]
    Columns(#[from] TableColumnsError),
    /// Drain: reading, decoding or writing the table's files.
    #[error(transparent)]
    Drain(#[from] DrainFailure),
    /// Commit: the dead letters, or the table's snapshot.
    #[error(transparent)]
    Commit(#[from] CommitError),
}

impl TableFailure {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::Registry(_) => SyncErrorKind::Registry,
            Self::Load(_) => SyncErrorKind::Iceberg,
            Self::RecordedOffsets(_) | Self::Plan(_) => SyncErrorKind::Offsets,
            Self::Create(e) => e.kind(),
            Self::Columns(e) => e.kind(),
            Self::Drain(e) => e.kind(),
            Self::Commit(e) => e.kind(),
        }
    }

    /// Whether the next sync may succeed without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Registry(e) => e.is_retryable(),
            Self::Load(e) => e.retryable(),
            Self::RecordedOffsets(_) | Self::Plan(_) | Self::Columns(_) => false,
            Self::Create(e) => e.retryable(),
            Self::Drain(e) => e.retryable(),
            Self::Commit(e) => e.retryable(),
        }
    }
}

/// Why a new table could not be made from a sample of its messages.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// Sampling the messages, or the columns the sample implies.
    #[error(transparent)]
    Sample(#[from] SampleError),
    /// The sampled columns do not make a table's columns.
    #[error("building the table's columns: {0}")]
    Columns(#[source] ColumnsError),
    /// The catalog refused the table.
    #[error("creating the table of stream \"{topic}\": {source}")]
    Table {
        /// The stream's topic.
        topic: String,
        /// The catalog's or storage's error.
        #[source]
        source: IcebergError,
    },
}

impl CreateError {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::Sample(e) => e.kind(),
            Self::Columns(_) => SyncErrorKind::Schema,
            Self::Table { .. } => SyncErrorKind::Iceberg,
        }
    }

    /// Whether the next sync may succeed without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Sample(e) => e.retryable(),
            Self::Columns(_) => false,
            Self::Table { source, .. } => source.retryable(),
        }
    }
}

/// The error of a table's drain stopped by a cancel.
pub(super) const CANCELLED: &str = "stopped: the sync was cancelled";

/// Why a table's drain failed: a partition's read, a message, or the
/// table's files.
#[derive(Debug, thiserror::Error)]
pub enum DrainFailure {
    /// Kafka failed, or a message stopped the drain (invalid with
    /// `on_invalid = "fail"`, the registry unavailable, another part of
    /// the table failed, the sync cancelled).
    #[error(transparent)]
    Read(#[from] topicberg_kafka::DrainError<SinkError>),
    /// The table's decoder cannot be built for its columns.
    #[error(transparent)]
    Decoder(#[from] DecoderConfigError),
    /// The file writer stopped before the drain thread was done.
    #[error("the file writer stopped")]
    WriterGone,
    /// A drain thread panicked.
    #[error("a drain thread panicked")]
    ThreadPanicked,
    /// The sync was cancelled: the table writes no more.
    #[error("{CANCELLED}")]
    Cancelled,
    /// An upsert's messages could not be held on local disk.
    #[error(transparent)]
    Spill(#[from] SpillError),
    /// A data file could not be opened, written or closed.
    #[error("{step}: {source}")]
    Write {
        /// `opening a data file writer`, `writing data files`, `closing
        /// data files`.
        step: &'static str,
        /// The storage's error.
        #[source]
        source: IcebergError,
    },
    /// The table cannot take the columns this sync grew.
    #[error(transparent)]
    Evolve(IcebergError),
}

impl DrainFailure {
    /// A data file step's error.
    pub(super) fn write(step: &'static str) -> impl FnOnce(IcebergError) -> Self {
        move |source| Self::Write { step, source }
    }

    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        use topicberg_kafka::DrainError;
        match self {
            Self::Read(DrainError::Kafka(_)) => SyncErrorKind::Kafka,
            Self::Read(DrainError::Sink(e)) => e.kind(),
            Self::Decoder(_) => SyncErrorKind::Schema,
            Self::WriterGone | Self::ThreadPanicked => SyncErrorKind::Internal,
            Self::Cancelled => SyncErrorKind::Cancelled,
            Self::Spill(e) => e.kind(),
            Self::Write { .. } | Self::Evolve(_) => SyncErrorKind::Iceberg,
        }
    }

    /// Whether the next sync may succeed without a change.
    pub fn retryable(&self) -> bool {
        use topicberg_kafka::DrainError;
        match self {
            Self::Read(DrainError::Kafka(e)) => e.retryable(),
            Self::Read(DrainError::Sink(SinkError::Decode(e))) => match &e.kind {
                DecodeErrorKind::Registry(e) => e.is_retryable(),
                _ => false,
            },
            Self::Write { source, .. } => source.retryable(),
            _ => false,
        }
    }
}

/// Why a table's commit failed (a commit superseded by another sync is no
/// failure: see `table::CommitRefused`).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    /// The dead letters' commit, which goes first.
    #[error(transparent)]
    DeadLetters(#[from] DeadLetterError),
    /// The table's snapshot.
    #[error("committing the snapshot: {0}")]
    Snapshot(#[source] IcebergError),
    /// An upsert's snapshot met other writers' commits every time.
    #[error("committing the snapshot: {source} (gave up after {attempts} attempts)")]
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        #[source]
        source: IcebergError,
    },
    /// An upsert's rows and deletes could not be prepared.
    #[error(transparent)]
    Upsert(#[from] UpsertError),
}

impl CommitError {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::DeadLetters(e) => e.kind(),
            Self::Snapshot(_) | Self::GaveUp { .. } => SyncErrorKind::Iceberg,
            Self::Upsert(e) => e.kind(),
        }
    }

    /// Whether the next sync may succeed without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::DeadLetters(e) => e.retryable(),
            Self::Snapshot(e) | Self::GaveUp { source: e, .. } => e.retryable(),
            Self::Upsert(e) => e.retryable(),
        }
    }
}
