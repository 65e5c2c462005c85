//! The bounded drain: read each assigned partition from its start offset up
//! to the high watermark seen when the sync began, and stop. Messages
//! produced meanwhile wait for the next sync.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::{Offset, TopicPartitionList};
use topicberg_core::config::FetchMethod;
use topicberg_core::SourceRecord;

use crate::batch::{MessageBatch, Polled, POLL_WAIT_MS};
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

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

struct Progress {
    end: i64,
    next: i64,
    records: u64,
    bytes: u64,
    done: bool,
    /// Messages delivered a second time and skipped.
    redelivered: u64,
}

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
    mut check: C,
    mut sink: F,
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
        return crate::fetch::drain_batches(connection, topic, ranges, settings, check, sink);
    }
    // By partition: the drain reads one topic (no per-message topic name).
    let mut progress: HashMap<i32, Progress> = HashMap::new();
    let mut tpl = TopicPartitionList::new();
    for r in ranges {
        let done = r.start >= r.end;
        progress.insert(
            r.partition,
            Progress {
                end: r.end,
                next: r.start,
                records: 0,
                bytes: 0,
                done,
                redelivered: 0,
            },
        );
        if !done {
            tpl.add_partition_offset(&r.topic, r.partition, Offset::Offset(r.start))
                .map_err(|e| {
                    KafkaError::new(KafkaErrorKind::Config, "building the assignment", e)
                })?;
        }
    }
    let mut remaining = progress.values().filter(|p| !p.done).count();
    if remaining > 0 {
        let mut cfg = connection.client_config();
        cfg.set("group.id", &settings.group)
            // The broker sees (logs, quotas) which job is reading.
            .set("client.id", &settings.group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("auto.offset.reset", "error")
            .set("fetch.wait.max.ms", "100")
            // Prefetch per partition: about 20,000 messages or 4 MiB, and
            // fetch again 5 ms after the queue was full (librdkafka waits
            // 1 s by default, which held a 10M append to 2/3 of its rate;
            // the larger queues this replaced held ~125 MiB of per-message
            // bookkeeping: bench/README.md, "Prefetch").
            .set("queued.min.messages", "20000")
            .set("queued.max.messages.kbytes", "4096")
            .set("fetch.queue.backoff.ms", "5");
        let consumer: BaseConsumer = cfg
            .create()
            .map_err(|e| KafkaError::new(KafkaErrorKind::Config, "creating the consumer", e))?;
        consumer
            .assign(&tpl)
            .map_err(|e| KafkaError::new(KafkaErrorKind::Broker, "assigning partitions", e))?;
        // The clock is read only when a poll comes back empty: whether
        // anything arrived since the last look is a flag, not a time per
        // message.
        let mut last_progress = Instant::now();
        let mut progressed = false;
        let mut batch = MessageBatch::new(&consumer);
        while remaining > 0 {
            check().map_err(DrainError::Sink)?;
            batch.poll(POLL_WAIT_MS);
            if batch.is_empty() {
                if std::mem::take(&mut progressed) {
                    last_progress = Instant::now();
                } else if last_progress.elapsed() > settings.stall_timeout {
                    let waiting = progress.iter().filter(|(_, p)| !p.done);
                    let waiting = waiting.map(|(part, p)| (*part, p.next, p.end));
                    return Err(stalled(topic, waiting, settings.stall_timeout).into());
                }
                continue;
            }
            progressed = true;
            for polled in batch.messages() {
                if remaining == 0 {
                    break;
                }
                let message = match polled {
                    Polled::Message(message) => message,
                    Polled::Eof(partition) => {
                        // The end of the log below the watermark: what is
                        // left are control records (transaction markers)
                        // or an open transaction's messages, which a
                        // read_committed consumer does not see yet. Stop
                        // here; the next sync resumes after the last
                        // message we saw.
                        if let Some(p) = progress.get_mut(&partition).filter(|p| !p.done) {
                            p.done = true;
                            remaining -= 1;
                            pause(&consumer, topic, partition);
                        }
                        continue;
                    }
                    Polled::Error(e) if fetch_error_is_transient(&e) => {
                        // librdkafka reconnects and refetches by itself; a
                        // broker that stays away ends in the stall error.
                        tracing::warn!(error = %e, "fetch error; librdkafka retries");
                        continue;
                    }
                    Polled::Error(e) => {
                        return Err(KafkaError::new(
                            KafkaErrorKind::Broker,
                            "fetching messages",
                            e,
                        )
                        .into());
                    }
                };
                let partition = message.partition;
                let Some(p) = progress.get_mut(&partition) else {
                    continue;
                };
                if p.done {
                    continue;
                }
                let offset = message.offset;
                if offset < p.next {
                    // Already handed to the sink (a refetch after a
                    // reconnect must not write a message twice).
                    p.redelivered += 1;
                    if p.redelivered == 1 {
                        tracing::warn!(
                            topic = %topic, partition, offset, next = p.next,
                            "message delivered again; skipped (logged once per partition)"
                        );
                    }
                    continue;
                }
                if offset >= p.end {
                    // Produced after the sync began: the next sync reads it.
                    p.next = p.end;
                    p.done = true;
                    remaining -= 1;
                    pause(&consumer, topic, partition);
                    continue;
                }
                let record = SourceRecord {
                    topic,
                    partition,
                    offset,
                    timestamp_ms: message.timestamp_ms,
                    key: message.key,
                    value: message.value,
                };
                sink(&record).map_err(DrainError::Sink)?;
                p.records += 1;
                p.bytes += (record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len))
                    as u64;
                p.next = offset + 1;
                if p.next >= p.end {
                    p.done = true;
                    remaining -= 1;
                    pause(&consumer, topic, partition);
                }
            }
        }
    }
    let mut out: Vec<DrainedPartition> = progress
        .into_iter()
        .map(|(partition, p)| DrainedPartition {
            topic: topic.to_string(),
            partition,
            next_offset: p.next,
            records: p.records,
            bytes: p.bytes,
        })
        .collect();
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(out)
}

/// Errors a consumer reports while librdkafka itself recovers: a broker
/// connection dropped, a leader moved. Everything else (authorization, an
/// offset that retention deleted mid-sync, an unknown topic) fails the drain.
fn fetch_error_is_transient(err: &RdKafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    matches!(
        err.rdkafka_error_code(),
        Some(
            C::BrokerTransportFailure
                | C::AllBrokersDown
                | C::NetworkException
                | C::RequestTimedOut
                | C::OperationTimedOut
                | C::NotLeaderForPartition
                | C::LeaderNotAvailable
        )
    )
}

fn pause(consumer: &BaseConsumer, topic: &str, partition: i32) {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let _ = consumer.pause(&tpl);
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
