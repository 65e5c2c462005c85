//! `topicberg discover`: which topics the job selects, and the columns a
//! sample of each topic's messages implies.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use topicberg_core::{Job, SchemaInference};
use topicberg_kafka::{
    drain, read_partition_states, select_topics, DrainSettings, KafkaConnection, PartitionRange,
};

use crate::destination::SetupError;
use crate::{KAFKA_TIMEOUT, SAMPLE_PER_PARTITION};

/// One selected topic and what its messages look like.
#[derive(Debug, Clone, Serialize)]
pub struct DiscoveredTopic {
    /// The topic.
    pub topic: String,
    /// Its partition count.
    pub partitions: usize,
    /// Messages sampled (up to 10,000 per partition, oldest first).
    pub sampled_messages: usize,
    /// Inferred payload columns, in first-seen order: (name, Iceberg type).
    pub columns: Vec<(String, String)>,
    /// `(field, column)` for each field stored under another name: its own
    /// is a metadata column's, or differs only in case from an earlier
    /// column's (README, "Column names").
    pub renamed: Vec<(String, String)>,
    /// The table the topic syncs into.
    pub table: String,
    /// A ready-to-paste `[[streams]]` block.
    pub streams_block: String,
}

/// Samples every selected topic and infers its columns.
pub fn discover(job: &Job) -> Result<Vec<DiscoveredTopic>, SetupError> {
    let connection = KafkaConnection::from_source(&job.source);
    let selection = select_topics(&connection, &job.topics, KAFKA_TIMEOUT)?;
    crate::log_skipped(job, &selection.skipped);
    crate::check_table_collisions(job, selection.selected.iter().map(|t| t.name.as_str()))?;
    let group = job.consumer_group.clone();
    let states = read_partition_states(&connection, &group, &selection.selected, KAFKA_TIMEOUT)?;
    let settings = DrainSettings {
        group,
        stall_timeout: Duration::from_secs(60),
    };
    let mut out = Vec::new();
    for topic in &selection.selected {
        let ranges: Vec<PartitionRange> = states
            .iter()
            .filter(|s| s.topic == topic.name)
            .map(|s| PartitionRange {
                topic: s.topic.clone(),
                partition: s.partition,
                start: s.low,
                end: s.high.min(s.low + SAMPLE_PER_PARTITION),
            })
            .collect();
        let stream = job.table_for(&topic.name);
        let keep = stream
            .columns
            .as_ref()
            .map(|k| Arc::new(k.iter().cloned().collect()));
        let inference = infer_columns(
            &connection,
            &settings,
            &ranges,
            false,
            keep,
            job.tuning.max_columns,
        )
        .map_err(SetupError::Unsupported)?;
        let columns: Vec<(String, String)> = inference
            .columns()
            .into_iter()
            .map(|(name, ty)| (name, ty.iceberg_type().to_string()))
            .collect();
        let renamed = inference.renamed().to_vec();
        let mut streams_block = format!(
            "[[streams]]\ntopic = {:?}\nmode = {:?}\n# columns: {}\n",
            topic.name,
            stream.mode.as_str(),
            columns
                .iter()
                .map(|(n, t)| format!("{n} {t}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (field, column) in &renamed {
            streams_block.push_str(&format!(
                "# field {field:?} is stored in column {column:?}\n"
            ));
        }
        out.push(DiscoveredTopic {
            topic: topic.name.clone(),
            partitions: topic.partitions.len(),
            sampled_messages: inference.messages(),
            columns,
            renamed,
            table: format!("{}.{}", job.namespace, stream.table),
            streams_block,
        });
    }
    Ok(out)
}

/// Infers payload columns from every message value in `ranges`.
///
/// With `skip_invalid` (streams whose `on_invalid` is `skip` or `dlq`), a
/// value that is not a JSON object, has a field that cannot be named, or
/// would pass `max_columns` is left out of the sample instead of failing
/// it. Only the fields in `keep` count, when set.
pub fn infer_columns(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    ranges: &[PartitionRange],
    skip_invalid: bool,
    keep: Option<Arc<HashSet<String>>>,
    max_columns: usize,
) -> Result<SchemaInference, String> {
    let mut inference = SchemaInference::new()
        .keep_only(keep)
        .max_columns(max_columns);
    let mut by_topic: BTreeMap<&str, Vec<PartitionRange>> = BTreeMap::new();
    for r in ranges.iter().filter(|r| r.start < r.end) {
        by_topic.entry(&r.topic).or_default().push(r.clone());
    }
    for topic_ranges in by_topic.into_values() {
        drain(connection, &topic_ranges, settings, |record| {
            if let Some(value) = record.value {
                match inference.add(value) {
                    Ok(()) => {}
                    Err(_) if skip_invalid => {}
                    Err(e) => {
                        return Err(SampleError(format!(
                            "{}[{}]@{}: {e}",
                            record.topic, record.partition, record.offset
                        )))
                    }
                }
            }
            Ok::<(), SampleError>(())
        })
        .map_err(|e| format!("sampling messages: {e}"))?;
    }
    Ok(inference)
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct SampleError(String);
