//! `topicberg discover`: which topics the job selects, the format of each
//! one's values (its `[[streams]]` entry's, else the registry's
//! `<topic>-value` subject's, else JSON), and the columns a sample of each
//! JSON topic's messages implies.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::runtime::Handle;
use topicberg_core::config::ChangeEvents;
use topicberg_core::{
    ColumnNames, Job, RegistryValues, SchemaInference, TableSettings, ValueFormat,
};
use topicberg_kafka::{
    drain, read_partition_states, select_topics, DrainSettings, KafkaConnection, PartitionRange,
    RegistryClient,
};

use crate::destination::SetupError;
use crate::registry::{
    connect_registry, decide_value_format, format_without_registry, schema_source, FormatChoice,
    FormatReason,
};
use crate::sample::{MessageAt, SampleError, SampledMessage};
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
    /// Messages of the sample left out because they cannot become rows
    /// (not a JSON object, a field that cannot be named, past
    /// `max_columns`); the sync treats them per the stream's `on_invalid`.
    pub invalid_messages: usize,
    /// The first of them: `topic[partition]@offset: why`.
    pub invalid_example: Option<String>,
    /// How its values are read: `json`, `avro`, `protobuf` or `auto`.
    pub value_format: String,
    /// Why that format: `set in the job`, `subject orders-value version 3
    /// is AVRO (schema id 12)`, `no subject orders-value in the registry`.
    pub value_format_reason: String,
    /// Payload columns, in first-seen order: (name, Iceberg type). JSON:
    /// inferred from the sample; Avro and Protobuf: the fields of the
    /// `<topic>-value` subject's latest schema (empty without a subject:
    /// the writer schemas decide at sync start).
    pub columns: Vec<(String, String)>,
    /// `(field, column)` for each field stored under another name: its own
    /// is a metadata column's, or differs only in case from an earlier
    /// column's (docs/src/explanation/columns.md, "Column names").
    pub renamed: Vec<(String, String)>,
    /// The table the topic syncs into.
    pub table: String,
    /// A ready-to-paste `[[streams]]` block.
    pub streams_block: String,
}

/// Samples every selected topic and infers its columns. With a schema
/// registry, call it from a blocking thread of a tokio runtime
/// (`spawn_blocking`): the registry client runs on that runtime.
/// `cli`: the CLI's `discover`, which logs each topic the pattern leaves
/// out and treats a topic the job names that the cluster lacks as the
/// sync does (fails under `missing_topics = "fail"`, warns under `wait`;
/// a pattern matching nothing warns); else the service's streams page,
/// loaded often and meant to show what the cluster offers: one debug line.
pub fn discover(job: &Job, cli: bool) -> Result<Vec<DiscoveredTopic>, SetupError> {
    let registry = connect_registry(job)?;
    let connection = KafkaConnection::from_source(&job.source);
    let selection = select_topics(&connection, &job.topics, KAFKA_TIMEOUT)?;
    if cli {
        crate::log_skipped(job, &selection.skipped, None);
        crate::missing_topics::check_missing_topics(job, None, &selection, None)?;
    } else {
        tracing::debug!(
            topics = selection.skipped.len(),
            "topics the job's selection leaves out"
        );
    }
    crate::check_table_collisions(job, selection.selected.iter().map(|t| t.name.as_str()))?;
    let group = job.consumer_group.clone();
    let states = read_partition_states(&connection, &group, &selection.selected, KAFKA_TIMEOUT)?;
    let settings = DrainSettings {
        group,
        stall_timeout: Duration::from_secs(60),
        fetch: job.source.fetch,
        spill: None,
        buffers: Default::default(),
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
        let choice = value_format(registry.as_deref(), &stream)?;
        let mut invalid = InvalidSample::default();
        let (inference, columns) = match choice.format {
            // Change events: the columns of their `after` (typed from the
            // Connect schema when the messages carry it), as the sync
            // creates the table.
            _ if stream.change_events != ChangeEvents::None => (
                None,
                change_columns(job, &connection, &settings, &ranges, &stream, {
                    let client = registry.as_ref().filter(|_| choice.format.uses_registry());
                    client.map(|c| Arc::new(RegistryValues::new(choice.format, schema_source(c))))
                })?,
            ),
            // The columns of the subject's latest schema (the sync takes
            // them from the writer schemas of the messages it samples).
            ValueFormat::Avro | ValueFormat::Protobuf => {
                (None, schema_columns(registry.as_ref(), &choice, &stream))
            }
            // `auto`: framed messages are not JSON and are left out of the
            // sample uncounted; with `json`, every message that cannot
            // become a row is left out and counted (one bad message must
            // not hide the topic's columns).
            format => {
                let count = format != ValueFormat::Auto;
                let inference = sample_columns(
                    job,
                    &connection,
                    &settings,
                    &ranges,
                    &stream,
                    count.then_some(&mut invalid),
                )?;
                let columns = inference
                    .columns()
                    .into_iter()
                    .map(|(name, ty)| (name, ty.iceberg_type().to_string()))
                    .collect();
                (Some(inference), columns)
            }
        };
        let renamed = inference
            .as_ref()
            .map(|i| i.renamed().to_vec())
            .unwrap_or_default();
        let streams_block = streams_block(&topic.name, &stream, &choice, &columns, &renamed, job);
        out.push(DiscoveredTopic {
            topic: topic.name.clone(),
            partitions: topic.partitions.len(),
            sampled_messages: inference.as_ref().map_or(0, SchemaInference::messages),
            invalid_messages: invalid.count,
            invalid_example: invalid.first,
            value_format: choice.format.as_str().to_string(),
            value_format_reason: choice.reason.to_string(),
            columns,
            renamed,
            table: format!("{}.{}", job.namespace, stream.table),
            streams_block,
        });
    }
    Ok(out)
}

/// A change-event stream's columns: its events' `after` fields (typed from
/// the Connect schema when the messages carry it, or from the registry's
/// writer schemas through `registry`), as the sync creates the table;
/// events that are not rows are left out.
fn change_columns(
    job: &Job,
    connection: &KafkaConnection,
    settings: &DrainSettings,
    ranges: &[PartitionRange],
    stream: &TableSettings,
    registry: Option<Arc<RegistryValues>>,
) -> Result<Vec<(String, String)>, SampleError> {
    let keep = stream
        .columns
        .as_ref()
        .map(|k| Arc::new(k.iter().cloned().collect()));
    let columns = crate::sync::change_columns::sample_change_columns(
        connection,
        settings,
        ranges,
        registry,
        true,
        keep,
        job.tuning.max_columns,
    )?;
    Ok(columns
        .into_iter()
        .map(|(name, ty)| (name, ty.iceberg_type().to_string()))
        .collect())
}

/// The topic's value format, asking the registry on this (blocking)
/// thread's runtime when the stream leaves it unset.
fn value_format(
    registry: Option<&RegistryClient>,
    stream: &TableSettings,
) -> Result<FormatChoice, SetupError> {
    let Some(client) = registry else {
        return Ok(format_without_registry(stream));
    };
    // A client exists only inside a runtime (`connect_registry`).
    let runtime = Handle::current();
    let decide = decide_value_format(Some(client), stream);
    Ok(tokio::task::block_in_place(|| runtime.block_on(decide))?)
}

/// The payload columns of the `<topic>-value` subject's latest schema,
/// named as the decoder names them; empty (with a warning in the log) when
/// there is no subject or its schema cannot become columns yet.
fn schema_columns(
    registry: Option<&Arc<RegistryClient>>,
    choice: &FormatChoice,
    stream: &TableSettings,
) -> Vec<(String, String)> {
    let (Some(client), FormatReason::Subject(version)) = (registry, &choice.reason) else {
        return Vec::new();
    };
    let values = RegistryValues::new(choice.format, schema_source(client));
    let fields = match values.fields_of(version.id) {
        Ok(fields) => fields.unwrap_or_default(),
        Err(e) => {
            tracing::warn!(
                topic = %stream.topic, schema_id = version.id, reason = ?e,
                "the subject's schema does not give columns yet; the sync decides them"
            );
            return Vec::new();
        }
    };
    let mut names = ColumnNames::new();
    fields
        .into_iter()
        .filter(|(field, _)| {
            stream
                .columns
                .as_ref()
                .is_none_or(|keep| keep.contains(field))
        })
        .filter_map(|(field, ty)| {
            let column = names.assign(&field).ok()?;
            Some((column, ty.iceberg_type().to_string()))
        })
        .collect()
}

/// Messages a sample left out because they cannot become rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InvalidSample {
    /// How many.
    pub count: usize,
    /// The first: `topic[partition]@offset: why`.
    pub first: Option<String>,
}

/// The columns a sample of `ranges` implies; messages that cannot become
/// rows are left out (counted in `invalid` when given).
fn sample_columns(
    job: &Job,
    connection: &KafkaConnection,
    settings: &DrainSettings,
    ranges: &[PartitionRange],
    stream: &TableSettings,
    invalid: Option<&mut InvalidSample>,
) -> Result<SchemaInference, SampleError> {
    let keep = stream
        .columns
        .as_ref()
        .map(|k| Arc::new(k.iter().cloned().collect()));
    let mut uncounted = InvalidSample::default();
    infer_columns_counting(
        connection,
        settings,
        ranges,
        invalid.unwrap_or(&mut uncounted),
        keep,
        job.tuning.max_columns,
    )
}

/// A ready-to-paste `[[streams]]` block: mode, the value format when a
/// registry decides it, the columns as comments.
fn streams_block(
    topic: &str,
    stream: &TableSettings,
    choice: &FormatChoice,
    columns: &[(String, String)],
    renamed: &[(String, String)],
    job: &Job,
) -> String {
    let mut block = format!(
        "[[streams]]\ntopic = {topic:?}\nmode = {:?}\n",
        stream.mode.as_str()
    );
    if stream.change_events == ChangeEvents::Debezium {
        block.push_str("change_events = \"debezium\"\n");
    }
    if stream.kafka_headers {
        block.push_str("kafka_headers = true  # column _kafka_headers\n");
    }
    if job.registry.is_some() {
        block.push_str(&format!(
            "value_format = {:?}  # {}\n",
            choice.format.as_str(),
            choice.reason
        ));
    }
    if choice.format.uses_registry() && columns.is_empty() {
        block.push_str("# columns: from the writer schemas at sync start\n");
    } else {
        let list: Vec<String> = columns.iter().map(|(n, t)| format!("{n} {t}")).collect();
        block.push_str(&format!("# columns: {}\n", list.join(", ")));
    }
    for (field, column) in renamed {
        block.push_str(&format!(
            "# field {field:?} is stored in column {column:?}\n"
        ));
    }
    block
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
) -> Result<SchemaInference, SampleError> {
    let mut inference = SchemaInference::new()
        .keep_only(keep)
        .max_columns(max_columns);
    sample(connection, settings, ranges, &mut inference, |e| {
        if skip_invalid {
            Ok(())
        } else {
            Err(e)
        }
    })?;
    Ok(inference)
}

/// [`infer_columns`] skipping every invalid message, counted in `invalid`.
pub fn infer_columns_counting(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    ranges: &[PartitionRange],
    invalid: &mut InvalidSample,
    keep: Option<Arc<HashSet<String>>>,
    max_columns: usize,
) -> Result<SchemaInference, SampleError> {
    let mut inference = SchemaInference::new()
        .keep_only(keep)
        .max_columns(max_columns);
    sample(connection, settings, ranges, &mut inference, |e| {
        invalid.count += 1;
        invalid.first.get_or_insert(e.to_string());
        Ok(())
    })?;
    Ok(inference)
}

/// Adds every message value of `ranges` to `inference`; `on_invalid` gets
/// each one that cannot be added and fails the sample by returning it.
fn sample(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    ranges: &[PartitionRange],
    inference: &mut SchemaInference,
    mut on_invalid: impl FnMut(SampledMessage) -> Result<(), SampledMessage>,
) -> Result<(), SampleError> {
    let mut by_topic: BTreeMap<&str, Vec<PartitionRange>> = BTreeMap::new();
    for r in ranges.iter().filter(|r| r.start < r.end) {
        by_topic.entry(&r.topic).or_default().push(r.clone());
    }
    for topic_ranges in by_topic.into_values() {
        drain(connection, &topic_ranges, settings, |record| {
            if let Some(value) = record.value {
                if let Err(source) = inference.add(value) {
                    on_invalid(SampledMessage::Invalid {
                        at: MessageAt::of(record),
                        source,
                    })?;
                }
            }
            Ok(())
        })
        .map_err(SampleError::Read)?;
    }
    Ok(())
}
