//! Where each partition stands: its watermarks and the job's committed
//! offset in the consumer group; and committing the group's offsets after
//! the Iceberg snapshot has landed.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::topics::SelectedTopic;
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// A topic partition.
pub type TopicPartition = (String, i32);

/// One partition's position at the start of a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    /// The topic.
    pub topic: String,
    /// The partition id.
    pub partition: i32,
    /// The earliest retained offset (low watermark).
    pub low: i64,
    /// The high watermark: the offset the next produced message will get.
    pub high: i64,
    /// The group's committed next offset, if the group has one.
    pub committed: Option<i64>,
}

fn group_consumer(connection: &KafkaConnection, group: &str) -> Result<BaseConsumer, KafkaError> {
    connection
        .client_config()
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .map_err(|e| {
            KafkaError::new(
                KafkaErrorKind::Config,
                "creating a consumer-group client",
                e,
            )
        })
}

/// Reads watermarks and the group's committed offsets for every partition.
pub fn read_partition_states(
    connection: &KafkaConnection,
    group: &str,
    topics: &[SelectedTopic],
    timeout: Duration,
) -> Result<Vec<PartitionState>, KafkaError> {
    let consumer = group_consumer(connection, group)?;
    let mut tpl = TopicPartitionList::new();
    for topic in topics {
        for &p in &topic.partitions {
            tpl.add_partition(&topic.name, p);
        }
    }
    let committed = consumer.committed_offsets(tpl, timeout).map_err(|e| {
        KafkaError::new(
            KafkaErrorKind::Broker,
            format!("reading committed offsets of consumer group {group}"),
            e,
        )
    })?;
    let mut states = Vec::new();
    for topic in topics {
        for &partition in &topic.partitions {
            let (low, high) = consumer
                .fetch_watermarks(&topic.name, partition, timeout)
                .map_err(|e| {
                    KafkaError::new(
                        KafkaErrorKind::Broker,
                        format!("reading watermarks of {}[{partition}]", topic.name),
                        e,
                    )
                })?;
            let committed = committed
                .find_partition(&topic.name, partition)
                .and_then(|e| match e.offset() {
                    Offset::Offset(o) if o >= 0 => Some(o),
                    _ => None,
                });
            states.push(PartitionState {
                topic: topic.name.clone(),
                partition,
                low,
                high,
                committed,
            });
        }
    }
    Ok(states)
}

/// Commits `next_offsets` (the offset of the next message to read, per
/// partition) to the consumer group, synchronously.
pub fn commit_group_offsets(
    connection: &KafkaConnection,
    group: &str,
    next_offsets: &BTreeMap<TopicPartition, i64>,
) -> Result<(), KafkaError> {
    if next_offsets.is_empty() {
        return Ok(());
    }
    let consumer = group_consumer(connection, group)?;
    let mut tpl = TopicPartitionList::new();
    for ((topic, partition), offset) in next_offsets {
        tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset))
            .map_err(|e| KafkaError::new(KafkaErrorKind::Config, "building the offset list", e))?;
    }
    consumer.commit(&tpl, CommitMode::Sync).map_err(|e| {
        KafkaError::new(
            KafkaErrorKind::Broker,
            format!("committing offsets of consumer group {group}"),
            e,
        )
    })
}
