//! Why an upsert's messages could not be held on local disk or read back.

use std::path::PathBuf;

use arrow_schema::ArrowError;

use crate::error::SyncErrorKind;

/// A failure of the upsert buffer: its spill folder and files, or a batch
/// that could not be held or restored.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    /// A spill file or folder could not be made, written or read.
    #[error("upsert spill file {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A spill file's Arrow IPC stream could not be written or read.
    #[error("upsert spill file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Arrow's error.
        #[source]
        source: ArrowError,
    },
    /// A decoded batch lacks one of the metadata columns upserts need.
    #[error("the batch has no {0} column")]
    MissingColumn(&'static str),
    /// More messages than row numbers (`u32`) in one sync of one table.
    #[error("more than 4 billion messages for one upsert table in one sync")]
    TooManyMessages,
    /// An `_olake_id` that is not 32 hex digits.
    #[error("bad _olake_id {0:?}")]
    BadKey(String),
    /// Arrow refused to build a held or restored batch; `step` names the
    /// column being held or restored, when one is.
    #[error("{}{source}", step.map(|s| format!("{s}: ")).unwrap_or_default())]
    Arrow {
        /// E.g. `holding _olake_id`.
        step: Option<&'static str>,
        /// Arrow's error.
        #[source]
        source: ArrowError,
    },
    /// A held batch is not what its shape says (a bug of the held form).
    #[error("{0}")]
    BrokenHeldBatch(&'static str),
    /// The `order_by` column cannot order versions.
    #[error(
        "order_by column {column:?} is {found}; it must be an int, a long or a timestamp: \
         sync into a new table with another order_by field, or none"
    )]
    OrderType {
        /// The column.
        column: String,
        /// Its Arrow type.
        found: String,
    },
    /// One key's change events on two partitions, some without a place in
    /// the source's log: their order cannot be told.
    #[error(
        "{topic}: one row's change events came on partitions {first_partition} (offset \
         {first_offset}) and {second_partition} (offset {second_offset}), some without a \
         position in the source's log (source.lsn, or MySQL's binlog file and position), so \
         their order cannot be told; keep each row's changes on one partition (key the topic \
         by the row's key), or give the events a position (flattened records: \
         add.fields=lsn, or file,pos,row)"
    )]
    Unordered {
        /// The topic.
        topic: String,
        /// A partition with one of the changes, and its offset.
        first_partition: i32,
        /// Its offset.
        first_offset: i64,
        /// Another partition, with a change without a position.
        second_partition: i32,
        /// Its offset.
        second_offset: i64,
    },
}

impl SpillError {
    /// A spill file's I/O error.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// A spill file's Arrow IPC error.
    pub(crate) fn file(path: impl Into<PathBuf>, source: ArrowError) -> Self {
        Self::File {
            path: path.into(),
            source,
        }
    }

    /// Arrow's error while holding or restoring a batch.
    pub(crate) fn arrow(step: Option<&'static str>) -> impl FnOnce(ArrowError) -> Self {
        move |source| Self::Arrow { step, source }
    }

    /// What kind of failure: the local disk, or a bug of the held form.
    pub fn kind(&self) -> SyncErrorKind {
        match self {
            Self::Io { .. } | Self::File { .. } => SyncErrorKind::LocalDisk,
            Self::TooManyMessages | Self::OrderType { .. } => SyncErrorKind::Config,
            Self::Unordered { .. } => SyncErrorKind::InvalidMessage,
            Self::MissingColumn(_)
            | Self::BadKey(_)
            | Self::Arrow { .. }
            | Self::BrokenHeldBatch(_) => SyncErrorKind::Internal,
        }
    }
}
