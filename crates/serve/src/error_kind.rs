//! What kind of failure an error of the service is: every error type of
//! this crate answers [`ServeErrorKind`] through its `kind()`.

/// What kind of failure an error of the service is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServeErrorKind {
    /// A setting or a request that cannot be (a schedule, a job file).
    Invalid,
    /// The service's database or data folder.
    Store,
    /// Kafka, asked about the job's topics.
    Kafka,
    /// A command of `topicberg-sync` (see its `SyncErrorKind`).
    Sync,
    /// A task or run stopped (a panic), or no runtime to run in.
    Internal,
}
