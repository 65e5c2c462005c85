//! topicberg's commands as a library, called by the CLI
//! (`crates/topicberg`) and the service (`crates/serve`), all reading their
//! settings from one resolved [`topicberg_core::Job`].
//!
//! Layout:
//! - [`check`]: every step a sync needs, tried for real.
//! - [`discover`]: the selected topics and their inferred columns.
//! - [`sync`]: one bounded, exactly-once sync (plan, drain, write, commit;
//!   see its module doc for the stages).
//! - [`follow`]: `topicberg sync --follow`: rounds of bounded syncs, one
//!   every `commit_interval`, until stopped ([`follow::run_follow`]).
//! - [`maintain`]: `topicberg maintain`: compaction, snapshot expiry,
//!   orphan-file removal of the job's tables ([`maintain::run_maintain`]).
//! - [`destination`]: the job's catalog and storage, connected; what stops
//!   a command before any table ([`destination::SetupError`]).
//! - [`error`]: what kind of failure an error of this crate is
//!   ([`error::SyncErrorKind`]).
//! - [`sample`]: why a sample of a topic's messages could not give its
//!   columns.
//! - [`registry`]: the job's schema registry, connected, and each table's
//!   value format decided once (explicit, or from its `<topic>-value`
//!   subject).
//! - `columns`: decoder columns <-> Iceberg columns.
//! - [`log_writer`]: the log's stderr writer, URLs redacted.
//! - [`hooks`]: the test hooks (crash, pause, small limits), read once.

pub mod check;
mod columns;
pub mod destination;
pub mod discover;
pub mod error;
pub mod follow;
mod follow_maintain;
mod follow_report;
mod follow_spill;
pub mod hooks;
pub mod log_writer;
pub mod maintain;
pub mod missing_topics;
pub mod registry;
pub mod sample;
mod stop;
pub mod sync;

use std::time::Duration;

use topicberg_core::Job;

use crate::destination::SetupError;

/// Messages read per partition to infer a new table's columns.
pub const SAMPLE_PER_PARTITION: i64 = 10_000;
/// Deadline for metadata requests to Kafka.
pub const KAFKA_TIMEOUT: Duration = Duration::from_secs(30);

/// Refuses a selection in which two topics would be written into one
/// table (`a.b-c` and `a_b_c` both become table `a_b_c`): their rows would
/// mix and their offsets records collide. Names every clash and the fix.
pub fn check_table_collisions<'a>(
    job: &Job,
    topics: impl IntoIterator<Item = &'a str>,
) -> Result<(), SetupError> {
    let problems = topicberg_core::shared_table::table_conflicts(job, topics);
    if problems.is_empty() {
        return Ok(());
    }
    Err(SetupError::TableCollision(problems))
}

/// What a follower has already said (topics its pattern leaves out, the
/// reader and each table's formats): its later rounds say only what
/// changed, not the same lines every second.
#[derive(Debug, Default)]
pub struct LoggedOnce(std::sync::Mutex<std::collections::BTreeSet<String>>);

impl LoggedOnce {
    /// True the first time `said` is asked about (then remembered).
    pub fn first_time(&self, said: String) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(said)
    }
}

/// Whether to log `said`: always without a [`LoggedOnce`] (a one-off
/// sync), else only the first time.
pub fn say(logged: Option<&LoggedOnce>, said: impl FnOnce() -> String) -> bool {
    logged.is_none_or(|l| l.first_time(said()))
}

/// Logs every topic the pattern leaves out, as the product pages' users
/// expect to see it. A job without `topic_pattern` reads exactly its
/// `[[streams]]`: the cluster's other topics are no concern of it, and
/// only their count is logged (debug).
///
/// `logged`: the topics already logged (a follower's earlier rounds); only
/// the others are logged, and added to it, so a follower says each once.
pub fn log_skipped(job: &Job, skipped: &[String], logged: Option<&LoggedOnce>) {
    match job.source.topic_pattern.as_deref() {
        Some(pattern) if !pattern.is_empty() => {
            for topic in skipped {
                if !say(logged, || format!("skipped {topic}")) {
                    continue;
                }
                tracing::info!("Skipping topic {topic} (does not match topic_pattern: {pattern})");
            }
        }
        _ => tracing::debug!(
            topics = skipped.len(),
            "other topics of the cluster left out: the job reads only its [[streams]]"
        ),
    }
}
