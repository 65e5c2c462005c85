//! The bounded drain: read each assigned partition from its start offset up
//! to the high watermark seen when the sync began, and stop. Messages
//! produced meanwhile wait for the next sync.
//!
//! Two readers keep the same contract (offsets `start..end`, in order per
//! partition, `read_committed`, each message once): librdkafka's consumer
//! ([`crate::consume`]) and, on PLAINTEXT listeners, our own reader of
//! record batches ([`crate::fetch`]). What a drain is asked and answers is
//! in [`crate::partition_range`].

use topicberg_core::SourceRecord;

use crate::consume::drain_messages;
use crate::fetch::drain_batches;
use crate::partition_range::{DrainError, DrainSettings, DrainedPartition, PartitionRange};
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// Reads every range to its end, handing each message to `sink` in offset
/// order within its partition. Returns one [`DrainedPartition`] per range.
///
/// All ranges must belong to one topic: librdkafka's end-of-partition event
/// names the partition but not the topic. Run one drain per topic (or per
/// group of a topic's partitions), in parallel threads.
pub fn drain<E, F>(
    connection: &KafkaConnection,
    ranges: &[PartitionRange],
    settings: &DrainSettings,
    sink: F,
) -> Result<Vec<DrainedPartition>, DrainError<E>>
where
    E: std::error::Error + 'static,
    F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
{
    drain_checked(connection, ranges, settings, || Ok(()), sink)
}

/// [`drain`] that also asks `check` before every poll of the consumer (at
/// least every 200 ms, messages or not); an error from it stops the drain
/// as a sink error does. A cancel flag goes here: a throttled or silent
/// broker delivers no message for the sink to refuse.
pub fn drain_checked<E, C, F>(
    connection: &KafkaConnection,
    ranges: &[PartitionRange],
    settings: &DrainSettings,
    check: C,
    sink: F,
) -> Result<Vec<DrainedPartition>, DrainError<E>>
where
    E: std::error::Error + 'static,
    C: FnMut() -> Result<(), E>,
    F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
{
    let Some(topic) = ranges.first().map(|r| r.topic.as_str()) else {
        return Ok(Vec::new());
    };
    if let Some(other) = ranges.iter().find(|r| r.topic != topic) {
        return Err(KafkaError::new(
            KafkaErrorKind::Config,
            "planning the drain",
            format!("one drain reads one topic, got {topic} and {}", other.topic),
        )
        .into());
    }
    if settings.fetch.reads_batches(connection.security_protocol) {
        drain_batches(connection, topic, ranges, settings, check, sink)
    } else {
        drain_messages(connection, topic, ranges, settings, check, sink)
    }
}
