//! What kind of failure an error of this crate is, in the product's words:
//! every error type here answers [`SyncErrorKind`] through its `kind()`,
//! and whether running the same command again can help through its
//! `retryable()` (only what a retry can fix: an unreachable or failing
//! Kafka, catalog, storage or registry; never a bad message, schema or
//! setting).

/// What went wrong, for any error of a command of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncErrorKind {
    /// Kafka: unreachable, credentials or ACLs refused, a read failed.
    Kafka,
    /// The Iceberg catalog or the storage behind it.
    Iceberg,
    /// The schema registry.
    Registry,
    /// A message cannot become a row and the stream's `on_invalid` is
    /// `fail` (the error names topic, partition, offset and field).
    InvalidMessage,
    /// The table's columns, or the columns the messages imply, cannot be
    /// what the table needs (a field that cannot be named, a type that
    /// does not fit, a schema Iceberg cannot follow).
    Schema,
    /// The offsets a table records do not match the topic (retention
    /// passed them, a partition went away, the records do not parse).
    Offsets,
    /// A file on this machine: the upsert spill folder, the key index's
    /// files, the job's lock file.
    LocalDisk,
    /// The job asks for something it cannot have (settings that do not
    /// go together, topics that would share a table).
    Config,
    /// Another sync of the job runs on this machine; try again later.
    AlreadyRunning,
    /// The sync was cancelled.
    Cancelled,
    /// A thread or task of the command stopped (a panic), or a broken
    /// invariant of the sync's own data.
    Internal,
}
