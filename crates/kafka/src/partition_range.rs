//! What a drain is asked and what it answers, for both of its readers
//! (librdkafka's consumer, [`crate::consume`], and our batch reader,
//! [`crate::fetch`]): each partition's offset range, the drain's settings,
//! how each partition ended, and the drain's errors, the stall among them.

use std::time::Duration;

use topicberg_core::config::FetchMethod;

use crate::{KafkaError, KafkaErrorKind};

/// What to read from one partition: offsets `start..end` (end exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRange {
    /// The topic.
    pub topic: String,
    /// The partition id.
    pub partition: i32,
    /// The first offset to read.
    pub start: i64,
    /// The high watermark at the start of the sync (exclusive).
    pub end: i64,
}

/// How one partition's drain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainedPartition {
    /// The topic.
    pub topic: String,
    /// The partition id.
    pub partition: i32,
    /// The offset the next sync starts from.
    pub next_offset: i64,
    /// Messages handed to the sink.
    pub records: u64,
    /// Key plus value bytes handed to the sink.
    pub bytes: u64,
    /// The newest timestamp among the messages handed to the sink (ms
    /// since the epoch); `None` when none had one (or none was read).
    pub newest_timestamp_ms: Option<i64>,
}

/// Tuning for the drain.
#[derive(Debug, Clone)]
pub struct DrainSettings {
    /// The consumer group: the consumer's `group.id` and `client.id` (the
    /// drain assigns partitions itself and never joins the group).
    pub group: String,
    /// Give up when no partition makes progress for this long.
    pub stall_timeout: Duration,
    /// Whether topicberg's own batch reader or librdkafka reads the
    /// messages (the batch reader only on `PLAINTEXT`).
    pub fetch: FetchMethod,
    /// A follower's spill: ranges it holds from their start are read from
    /// it before Kafka (batch reader only).
    pub spill: Option<std::sync::Arc<crate::Spill>>,
    /// Response buffers kept between drains (batch reader only): a
    /// follower keeps one set for all its rounds.
    pub buffers: std::sync::Arc<crate::FetchBuffers>,
}

/// A failure of the drain: from Kafka, or from the sink that took records.
#[derive(Debug, thiserror::Error)]
pub enum DrainError<E: std::error::Error + 'static> {
    /// Kafka failed.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The sink refused a record.
    #[error(transparent)]
    Sink(E),
}

/// The error of a drain that made no progress for `timeout`, naming each
/// `(partition, next, end)` still waited on.
pub(crate) fn stalled(
    topic: &str,
    waiting: impl Iterator<Item = (i32, i64, i64)>,
    timeout: Duration,
) -> KafkaError {
    let mut waiting: Vec<(i32, String)> = waiting
        .map(|(part, next, end)| (part, format!("{topic}[{part}] at offset {next} of {end}")))
        .collect();
    waiting.sort();
    let waiting: Vec<String> = waiting.into_iter().map(|(_, w)| w).collect();
    KafkaError::new(
        KafkaErrorKind::Unreachable,
        "draining partitions",
        format!(
            "no progress for {timeout:?}; still waiting on {}",
            waiting.join(", ")
        ),
    )
}
