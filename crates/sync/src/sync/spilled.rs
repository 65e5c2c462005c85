//! A follower's spill, as a round sees it: ranges the spill holds count as
//! retained (Kafka's retention may have passed them during an outage),
//! and a commit deletes what it covers.

use topicberg_kafka::{PartitionState, Spill};

use super::table::TableState;

/// A partition whose spill reaches Kafka's earliest retained offset is
/// retained from the spill's first offset: the drain reads that range
/// from the spill, so nothing of it counts as expired.
pub(super) fn extend_retention(spill: &Spill, states: &mut [PartitionState]) {
    for state in states {
        if let Some((from, next)) = spill.range(&state.topic, state.partition) {
            if next >= state.low && from < state.low {
                tracing::debug!(
                    topic = %state.topic,
                    partition = state.partition,
                    from,
                    low = state.low,
                    "the spill holds offsets Kafka no longer retains"
                );
                state.low = from;
            }
        }
    }
}

/// Deletes what the spill holds below each table's offsets (as committed,
/// or as loaded for a table this round did not commit: either is in the
/// table).
pub(super) fn release(spill: &Spill, tables: &[TableState]) {
    for state in tables {
        for (topic, partitions) in &state.offsets.0 {
            for (&partition, &next) in partitions {
                spill.release(topic, partition, next);
            }
        }
    }
}
