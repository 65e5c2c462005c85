//! Why a table of a sync failed, stage by stage: each stage's error type,
//! and [`TableFailure`], any of them, which the table's report shows (its
//! Display) and the log names with its stage. Every message names the
//! topic, partition, offset, field or file where one is known.

use std::path::{Path, PathBuf};

use topicberg_core::{
    ColumnsError, DecodeError, DecodeErrorKind, DecoderConfigError, RegistryError,
};
use topicberg_iceberg::IcebergError;

use super::dlq::DeadLetterError;
use super::plan::PlanError;
use super::upsert::SpillError;
use crate::columns::TableColumnsError;
use crate::error::SyncErrorKind;
use crate::sample::SampleError;

/// Why a table failed, whatever the stage.
#[derive(Debug, thiserror::Error)]
pub enum TableFailure {
    /// Plan: the registry could not say how the table's values are read.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// Plan: the table could not be loaded.
    #[error(transparent)]
    Load(IcebergError),
    /// Plan: the offsets the table records cannot be read.
    #[error(transparent)]
    RecordedOffsets(topicberg_iceberg::OffsetsError),
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
    /// Plan: a routed topic's tables could not be found.
    #[error(transparent)]
    Route(Box<super::route_group::RouteFailure>),
    /// Plan: the stream's `order_by` is not the one the table was
    /// created with.
    #[error(
        "table {table} orders a key's messages by {}, its stream by {}: the order is set when \
         the table is created (table property topicberg.order-by) and cannot change; restore \
         order_by, or sync into a new table",
        describe_order(.recorded.as_deref()),
        describe_order(.configured.as_deref())
    )]
    OrderByChanged {
        /// The table.
        table: String,
        /// The column the table records.
        recorded: Option<String>,
        /// The stream's `order_by`.
        configured: Option<String>,
    },
    /// Plan: a table several topics write, in a continuous sync (a
    /// follower hands files between workers per topic).
    #[error(
        "table {table} is written by topics {first} and {second}: several topics into one \
         table is done by scheduled syncs only so far (topicberg sync, serve's scheduled \
         jobs), not in continuous mode (sync --follow, continuous jobs) nor among workers; \
         sync it on a schedule, or into distinct tables"
    )]
    SharedAmongWorkers {
        /// The table.
        table: String,
        /// The topic planned first.
        first: String,
        /// This table's topic.
        second: String,
    },
    /// Plan or create: the stream's `order_by` names no column of the
    /// table.
    #[error(
        "table {table} has no column {column:?}, which order_by names: name a field the \
         messages carry (as the table names it)"
    )]
    OrderByMissing {
        /// The table.
        table: String,
        /// The `order_by` field.
        column: String,
    },
}

/// An `order_by` in words.
fn describe_order(order_by: Option<&str>) -> String {
    match order_by {
        Some(column) => format!("column {column:?}"),
        None => "offset, and message timestamp across partitions (no order_by)".to_owned(),
    }
}

impl From<super::route_group::RouteFailure> for TableFailure {
    fn from(e: super::route_group::RouteFailure) -> Self {
        Self::Route(Box::new(e))
    }
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
            Self::OrderByChanged { .. }
            | Self::OrderByMissing { .. }
            | Self::SharedAmongWorkers { .. } => SyncErrorKind::Config,
            Self::Route(e) => e.kind(),
        }
    }

    /// Whether the next sync may succeed without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Registry(e) => e.is_retryable(),
            Self::Load(e) => e.retryable(),
            Self::RecordedOffsets(_)
            | Self::Plan(_)
            | Self::Columns(_)
            | Self::OrderByChanged { .. }
            | Self::OrderByMissing { .. }
            | Self::SharedAmongWorkers { .. } => false,
            Self::Create(e) => e.retryable(),
            Self::Drain(e) => e.retryable(),
            Self::Commit(e) => e.retryable(),
            Self::Route(e) => e.retryable(),
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
    /// A writer's file set could not be handed to the table's committer,
    /// or a committer could not read the sets handed to it.
    #[error("handing files to the table's committer: {0}")]
    Handoff(#[source] IcebergError),
}

impl CommitError {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::DeadLetters(e) => e.kind(),
            Self::Snapshot(_) | Self::GaveUp { .. } | Self::Handoff(_) => SyncErrorKind::Iceberg,
            Self::Upsert(e) => e.kind(),
        }
    }

    /// Whether the next sync may succeed without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::DeadLetters(e) => e.retryable(),
            Self::Snapshot(e) | Self::GaveUp { source: e, .. } | Self::Handoff(e) => e.retryable(),
            Self::Upsert(e) => e.retryable(),
        }
    }
}

/// Why a drain thread stopped taking a table's messages.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// A message that cannot become a row (`on_invalid = "fail"`), or one
    /// whose schema the registry could not give.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Another part of the table failed first.
    #[error("stopped: another part of this table failed")]
    Aborted,
    /// The sync was cancelled.
    #[error("{CANCELLED}")]
    Cancelled,
    /// The file writer stopped.
    #[error("the file writer stopped")]
    WriterGone,
    /// The decoder cannot be built for the table's grown columns.
    #[error(transparent)]
    Decoder(#[from] DecoderConfigError),
    /// A message of a routed topic names no table (`on_invalid = "fail"`
    /// or `"dlq"`: there is no table whose dead-letter table could take it).
    #[error("{topic}[{partition}]@{offset}: {reason}; set on_invalid = \"skip\" on the stream to pass such messages")]
    Unroutable {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The offset.
        offset: i64,
        /// Why.
        reason: String,
    },
    /// A message named a table the route's first reading did not find.
    #[error("{topic}[{partition}]@{offset}: names table {table}, which was not among the route's tables when the sync started; the next sync takes it")]
    Unrouted {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The offset.
        offset: i64,
        /// The table.
        table: String,
    },
    /// Another table of the same routed topic failed, and the read they
    /// share stopped.
    #[error("stopped: another table of this routed topic failed ({0})")]
    RouteStopped(String),
}

impl SinkError {
    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::Decode(DecodeError {
                kind: DecodeErrorKind::Registry(_),
                ..
            }) => SyncErrorKind::Registry,
            Self::Decode(_) => SyncErrorKind::InvalidMessage,
            Self::Aborted | Self::WriterGone | Self::Unrouted { .. } => SyncErrorKind::Internal,
            Self::Unroutable { .. } | Self::RouteStopped(_) => SyncErrorKind::InvalidMessage,
            Self::Cancelled => SyncErrorKind::Cancelled,
            Self::Decoder(_) => SyncErrorKind::Schema,
        }
    }
}

/// Why an upsert's rows and deletes could not be written before its commit.
#[derive(Debug, thiserror::Error)]
pub enum UpsertError {
    /// The key index could not be opened or brought up to the table.
    #[error("opening the key index: {0}")]
    OpenKeyIndex(#[source] IcebergError),
    /// The key index could not be read.
    #[error(transparent)]
    KeyIndex(IcebergError),
    /// The file of the written keys could not be written or read.
    #[error("{}: {source}", path.display())]
    WinnersFile {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The held messages could not be read back.
    #[error(transparent)]
    Spill(#[from] SpillError),
    /// A data or delete file could not be written.
    #[error(transparent)]
    Write(IcebergError),
    /// A held batch does not fit the table's final columns.
    #[error(transparent)]
    Conform(topicberg_iceberg::conform::ConformError),
    /// A data file writer's task stopped (panicked).
    #[error("a data file writer stopped: {0}")]
    WriterStopped(#[source] tokio::task::JoinError),
    /// The data files do not hold the rows written to them.
    #[error("{in_files} rows in the data files, {written} written")]
    RowCount {
        /// Rows the data files say they hold.
        in_files: u64,
        /// Rows written.
        written: u64,
    },
    /// A written row's position is past the last data file.
    #[error("written row {0} is beyond the data files")]
    RowBeyondFiles(u64),
    /// A truncate event reached a worker of a scaled-out job, which hands
    /// rows and tombstones only.
    #[error(
        "a truncate of the source table (change event at partition {partition}, offset {offset}) \
         is not applied by the workers of a scaled-out job yet; run the job on one process \
         (topicberg sync) to apply it"
    )]
    TruncateAmongWorkers {
        /// The truncate's partition.
        partition: i32,
        /// Its offset.
        offset: i64,
    },
    /// `order_by` in a scaled-out job, whose rounds do not carry what the
    /// partitions' last words need.
    #[error(
        "order_by is not supported by the workers of a scaled-out job yet; run the job on one \
         process (topicberg sync)"
    )]
    OrderByAmongWorkers,
    /// A change event did not send a value (Debezium's placeholder for an
    /// unchanged TOASTed column) and no earlier row of its key has it.
    #[error(
        "{topic}[{partition}]@{offset}: field {column:?}: the change event did not send it \
         (Debezium's placeholder for an unchanged TOASTed value) and neither the \
         table nor an earlier event of this sync has the key's row to take it from; set \
         REPLICA IDENTITY FULL on the source table and change the row again (any column): \
         its next event carries every value and replaces this one"
    )]
    UnsentWithoutRow {
        /// The event's topic.
        topic: String,
        /// The column.
        column: String,
        /// The event's partition.
        partition: i32,
        /// Its offset.
        offset: i64,
    },
    /// A previous value could not be put into its winning row.
    #[error("filling the unsent value of column {column:?}: {source}")]
    PreviousValue {
        /// The column.
        column: String,
        /// Why.
        #[source]
        source: arrow_schema::ArrowError,
    },
    /// Unsent values in a writer's round of a scaled-out job, whose staged
    /// rows cannot carry them (its decoders never keep them).
    #[error(
        "change events without some values (Debezium's placeholder for unchanged TOASTed \
         columns) are not staged by the writers of a scaled-out job; set REPLICA IDENTITY \
         FULL on the source table, or run the job on one process (topicberg sync)"
    )]
    UnsentAmongWorkers,
}

impl UpsertError {
    pub(super) fn winners_file(path: &Path) -> impl Fn(std::io::Error) -> Self + '_ {
        move |source| Self::WinnersFile {
            path: path.to_path_buf(),
            source,
        }
    }

    /// What kind of failure.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::OpenKeyIndex(_) | Self::KeyIndex(_) | Self::Write(_) => SyncErrorKind::Iceberg,
            Self::WinnersFile { .. } => SyncErrorKind::LocalDisk,
            Self::Spill(e) => e.kind(),
            Self::Conform(_) | Self::PreviousValue { .. } => SyncErrorKind::Schema,
            Self::TruncateAmongWorkers { .. }
            | Self::OrderByAmongWorkers
            | Self::UnsentAmongWorkers => SyncErrorKind::Config,
            Self::UnsentWithoutRow { .. } => SyncErrorKind::InvalidMessage,
            Self::WriterStopped(_) | Self::RowCount { .. } | Self::RowBeyondFiles(_) => {
                SyncErrorKind::Internal
            }
        }
    }

    /// Whether the next sync may succeed without a change.
    pub fn retryable(&self) -> bool {
        match self {
            Self::OpenKeyIndex(e) | Self::KeyIndex(e) | Self::Write(e) => e.retryable(),
            _ => false,
        }
    }
}
