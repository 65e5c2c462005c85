//! The librdkafka drain: a consumer assigned the ranges' partitions (it
//! never joins the group and commits nothing), polled a batch of messages
//! at a time until every partition reaches its end. On PLAINTEXT listeners
//! our own batch reader ([`crate::fetch`]) reads instead, unless the job
//! asks for librdkafka.

use std::collections::HashMap;
use std::time::Instant;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::{Offset, TopicPartitionList};
use topicberg_core::record::Headers;
use topicberg_core::SourceRecord;

use crate::batch::{MessageBatch, Polled, RawMessage, POLL_WAIT_MS};
use crate::partition_range::{
    stalled, DrainError, DrainSettings, DrainedPartition, PartitionRange,
};
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

struct Progress {
    end: i64,
    next: i64,
    records: u64,
    bytes: u64,
    /// The newest message timestamp seen (`i64::MIN`: none yet).
    newest_ms: i64,
    done: bool,
    /// Messages delivered a second time and skipped.
    redelivered: u64,
}

/// Where each partition of one topic's drain stands (by partition: the
/// drain reads one topic, librdkafka's messages do not name it), and how
/// many are still open.
struct Partitions<'t> {
    topic: &'t str,
    progress: HashMap<i32, Progress>,
    remaining: usize,
}

/// [`crate::drain_checked`] through librdkafka's consumer. `ranges` are
/// all of `topic`.
pub(crate) fn drain_messages<E, C, F>(
    connection: &KafkaConnection,
    topic: &str,
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
    let (mut partitions, assignment) = Partitions::new(topic, ranges)?;
    if partitions.remaining > 0 {
        let consumer = assigned_consumer(connection, settings, &assignment)?;
        poll_until_done(&consumer, &mut partitions, settings, &mut check, &mut sink)?;
    }
    Ok(partitions.into_drained())
}

/// A consumer named after the job's group (`group.id`, `client.id`),
/// committing nothing and told of each partition's end, assigned
/// `assignment`.
fn assigned_consumer(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    assignment: &TopicPartitionList,
) -> Result<BaseConsumer, KafkaError> {
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
        .assign(assignment)
        .map_err(|e| KafkaError::new(KafkaErrorKind::Broker, "assigning partitions", e))?;
    Ok(consumer)
}

/// Polls `consumer` until every partition is done, asking `check` before
/// every poll; no progress for the stall timeout is an error naming the
/// partitions still waited on.
fn poll_until_done<E, C, F>(
    consumer: &BaseConsumer,
    partitions: &mut Partitions<'_>,
    settings: &DrainSettings,
    check: &mut C,
    sink: &mut F,
) -> Result<(), DrainError<E>>
where
    E: std::error::Error + 'static,
    C: FnMut() -> Result<(), E>,
    F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
{
    // The clock is read only when a poll comes back empty: whether
    // anything arrived since the last look is a flag, not a time per
    // message.
    let mut last_progress = Instant::now();
    let mut progressed = false;
    let mut batch = MessageBatch::new(consumer);
    while partitions.remaining > 0 {
        check().map_err(DrainError::Sink)?;
        batch.poll(POLL_WAIT_MS);
        if batch.is_empty() {
            if std::mem::take(&mut progressed) {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > settings.stall_timeout {
                let waiting = partitions.waiting();
                return Err(stalled(partitions.topic, waiting, settings.stall_timeout).into());
            }
            continue;
        }
        progressed = true;
        for polled in batch.messages() {
            if partitions.remaining == 0 {
                break;
            }
            partitions.take(consumer, polled, sink)?;
        }
    }
    Ok(())
}

impl<'t> Partitions<'t> {
    /// Each range's starting point, and the assignment of the partitions
    /// not already at their end.
    fn new(
        topic: &'t str,
        ranges: &[PartitionRange],
    ) -> Result<(Self, TopicPartitionList), KafkaError> {
        let mut progress: HashMap<i32, Progress> = HashMap::new();
        let mut assignment = TopicPartitionList::new();
        for r in ranges {
            let done = r.start >= r.end;
            progress.insert(
                r.partition,
                Progress {
                    end: r.end,
                    next: r.start,
                    records: 0,
                    bytes: 0,
                    newest_ms: i64::MIN,
                    done,
                    redelivered: 0,
                },
            );
            if !done {
                assignment
                    .add_partition_offset(&r.topic, r.partition, Offset::Offset(r.start))
                    .map_err(|e| {
                        KafkaError::new(KafkaErrorKind::Config, "building the assignment", e)
                    })?;
            }
        }
        let remaining = progress.values().filter(|p| !p.done).count();
        let partitions = Self {
            topic,
            progress,
            remaining,
        };
        Ok((partitions, assignment))
    }

    /// `(partition, next, end)` of each partition not done.
    fn waiting(&self) -> impl Iterator<Item = (i32, i64, i64)> + '_ {
        let waiting = self.progress.iter().filter(|(_, p)| !p.done);
        waiting.map(|(part, p)| (*part, p.next, p.end))
    }

    /// One polled item: a message, the end of a partition's log, or a
    /// fetch error (transient ones are librdkafka's to retry).
    fn take<E, F>(
        &mut self,
        consumer: &BaseConsumer,
        polled: Polled<'_>,
        sink: &mut F,
    ) -> Result<(), DrainError<E>>
    where
        E: std::error::Error + 'static,
        F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
    {
        let message = match polled {
            Polled::Message(message) => message,
            Polled::Eof(partition) => {
                // The end of the log below the watermark: what is
                // left are control records (transaction markers)
                // or an open transaction's messages, which a
                // read_committed consumer does not see yet. Stop
                // here; the next sync resumes after the last
                // message we saw.
                if let Some(p) = self.progress.get_mut(&partition).filter(|p| !p.done) {
                    p.done = true;
                    self.remaining -= 1;
                    pause(consumer, self.topic, partition);
                }
                return Ok(());
            }
            Polled::Error(e) if fetch_error_is_transient(&e) => {
                // librdkafka reconnects and refetches by itself; a
                // broker that stays away ends in the stall error.
                tracing::warn!(error = %e, "fetch error; librdkafka retries");
                return Ok(());
            }
            Polled::Error(e) => {
                return Err(KafkaError::new(KafkaErrorKind::Broker, "fetching messages", e).into());
            }
        };
        self.deliver(consumer, message, sink)
    }

    /// `message` to `sink` if it is its open partition's next below the
    /// end; a message seen before is skipped, one past the end closes the
    /// partition.
    fn deliver<E, F>(
        &mut self,
        consumer: &BaseConsumer,
        message: RawMessage<'_>,
        sink: &mut F,
    ) -> Result<(), DrainError<E>>
    where
        E: std::error::Error + 'static,
        F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
    {
        let topic = self.topic;
        let partition = message.partition;
        let Some(p) = self.progress.get_mut(&partition) else {
            return Ok(());
        };
        if p.done {
            return Ok(());
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
            return Ok(());
        }
        if offset >= p.end {
            // Produced after the sync began: the next sync reads it.
            p.next = p.end;
            p.done = true;
            self.remaining -= 1;
            pause(consumer, topic, partition);
            return Ok(());
        }
        let record = SourceRecord {
            topic,
            partition,
            offset,
            timestamp_ms: message.timestamp_ms,
            key: message.key,
            value: message.value,
            headers: Headers::List(&message.headers),
        };
        sink(&record).map_err(DrainError::Sink)?;
        p.records += 1;
        p.newest_ms = p.newest_ms.max(record.timestamp_ms.unwrap_or(i64::MIN));
        p.bytes += (record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len)) as u64;
        p.next = offset + 1;
        if p.next >= p.end {
            p.done = true;
            self.remaining -= 1;
            pause(consumer, topic, partition);
        }
        Ok(())
    }

    /// How each partition ended, by partition.
    fn into_drained(self) -> Vec<DrainedPartition> {
        let topic = self.topic;
        let mut out: Vec<DrainedPartition> = self
            .progress
            .into_iter()
            .map(|(partition, p)| DrainedPartition {
                topic: topic.to_string(),
                partition,
                next_offset: p.next,
                records: p.records,
                bytes: p.bytes,
                newest_timestamp_ms: (p.newest_ms != i64::MIN).then_some(p.newest_ms),
            })
            .collect();
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        out
    }
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
