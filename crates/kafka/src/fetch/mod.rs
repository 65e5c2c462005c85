//! The batch drain: topicberg's own reader of Kafka record batches, used on
//! PLAINTEXT listeners (librdkafka serves TLS and SASL). librdkafka spends
//! an op, a queue entry and a message struct on every message (~0.4-0.5
//! CPU µs each here); this reader parses each Fetch response in place and
//! hands the sink slices of it (bench/README.md, "The batch reader").
//!
//! Two threads per drain: the fetch thread ([`fetcher`]) sends requests
//! and reads responses, deciding from batch headers alone where each
//! partition goes next; the drain thread reads the records of one response
//! ([`records`]) while the next one arrives. Same contract as the
//! librdkafka drain ([`crate::drain`]): offsets `start..end`, in order per
//! partition, `read_committed`, each message once.
//!
//! ```text
//!  fetch thread: Fetch v4 -> response bytes -> sections (partition, next, done)
//!        | channel (1 response ahead), buffers sent back for reuse
//!  drain thread: batches -> codec -> transaction filter -> records -> sink
//! ```

mod buffers;
mod fetcher;
mod fill;
mod protocol;
mod records;
mod wire;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use topicberg_core::record::Headers;
use topicberg_core::SourceRecord;

use crate::partition_range::{DrainError, DrainSettings, DrainedPartition, PartitionRange};
use crate::spill::Spill;
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};
pub use buffers::FetchBuffers;
use fetcher::{Event, Fetched, Fetcher};
pub use fill::fill_spill;
use records::{batches, for_each_record, record_bytes, TransactionFilter};
pub use wire::WireError;

/// How often the drain thread asks `check` while no response arrives.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(200);

/// One partition as the drain thread sees it.
struct Tally {
    next: i64,
    end: i64,
    records: u64,
    bytes: u64,
    /// The newest message timestamp seen (`i64::MIN`: none yet).
    newest_ms: i64,
    done: bool,
}

/// [`crate::drain_checked`] over plain TCP with record batches read in
/// place. `ranges` are all of `topic`.
pub(crate) fn drain_batches<E, C, F>(
    connection: &KafkaConnection,
    topic: &str,
    ranges: &[PartitionRange],
    settings: &DrainSettings,
    check: C,
    mut sink: F,
) -> Result<Vec<DrainedPartition>, DrainError<E>>
where
    E: std::error::Error + 'static,
    C: FnMut() -> Result<(), E>,
    F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
{
    let mut tallies: BTreeMap<i32, Tally> = ranges
        .iter()
        .map(|r| {
            let tally = Tally {
                next: r.start,
                end: r.end,
                records: 0,
                bytes: 0,
                newest_ms: i64::MIN,
                done: r.start >= r.end,
            };
            (r.partition, tally)
        })
        .collect();
    if let Some(spill) = &settings.spill {
        read_spilled(spill, topic, &mut tallies, &mut sink)?;
    }
    if tallies.values().any(|t| !t.done) {
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let (events_tx, events) = mpsc::sync_channel(1);
            let (spare, spare_rx) = mpsc::channel();
            let fetcher = Fetcher::new(
                connection,
                topic,
                &settings.group,
                settings.stall_timeout,
                &stop,
                &settings.buffers,
                tallies.iter().map(|(p, t)| (*p, t.next, t.end)),
            );
            std::thread::Builder::new()
                .name("kafka-fetch".into())
                .spawn_scoped(scope, move || fetcher.run(events_tx, spare_rx))
                .map_err(|e| KafkaError::new(KafkaErrorKind::Config, "starting the fetch", e))?;
            let returned = Returned {
                spare,
                kept: &settings.buffers,
            };
            let read = read_responses(topic, &mut tallies, events, returned, check, sink);
            stop.store(true, Ordering::Relaxed);
            read
        })?;
    }
    Ok(tallies
        .into_iter()
        .map(|(partition, t)| DrainedPartition {
            topic: topic.to_string(),
            partition,
            next_offset: t.next,
            records: t.records,
            bytes: t.bytes,
            newest_timestamp_ms: (t.newest_ms != i64::MIN).then_some(t.newest_ms),
        })
        .collect())
}

/// Hands `sink` what the follower's spill holds of each partition from its
/// next offset on; the fetch goes on from where the spill ends. A spill
/// that does not read back is deleted (the next round reads Kafka).
fn read_spilled<E, F>(
    spill: &Spill,
    topic: &str,
    tallies: &mut BTreeMap<i32, Tally>,
    sink: &mut F,
) -> Result<(), DrainError<E>>
where
    E: std::error::Error + 'static,
    F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
{
    let mut scratch = Vec::new();
    for (&partition, tally) in tallies.iter_mut().filter(|(_, t)| !t.done) {
        let Some(mut reader) = spill.reader(topic, partition, tally.next) else {
            continue;
        };
        loop {
            let frame = match reader.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    spill.clear();
                    return Err(e.into());
                }
            };
            let mut to = Delivery {
                topic,
                partition,
                tally: &mut *tally,
                scratch: &mut scratch,
                sink: &mut *sink,
            };
            to.deliver(frame.records, frame.aborted)
                .map_err(|e| match e {
                    Stop::Wire(offset, e) => {
                        DrainError::Kafka(record_failure(topic, partition, offset, &e))
                    }
                    Stop::Sink(e) => DrainError::Sink(e),
                })?;
            tally.next = frame.next.min(tally.end);
            if tally.next >= tally.end {
                tally.done = true;
                break;
            }
        }
    }
    Ok(())
}

/// The drain thread: every response's records to `sink`, until every
/// partition is done.
fn read_responses<E, C, F>(
    topic: &str,
    tallies: &mut BTreeMap<i32, Tally>,
    events: Receiver<Event>,
    returned: Returned<'_>,
    mut check: C,
    mut sink: F,
) -> Result<(), DrainError<E>>
where
    E: std::error::Error + 'static,
    C: FnMut() -> Result<(), E>,
    F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
{
    let mut remaining = tallies.values().filter(|t| !t.done).count();
    let mut scratch = Vec::new();
    while remaining > 0 {
        check().map_err(DrainError::Sink)?;
        let fetched = match events.recv_timeout(CHECK_EVERY) {
            Ok(Event::Fetched(fetched)) => fetched,
            Ok(Event::Failed(e)) => return Err(e.into()),
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => {
                return Err(KafkaError::new(
                    KafkaErrorKind::Broker,
                    "fetching messages",
                    "the fetch thread ended before the partitions' ends",
                )
                .into())
            }
        };
        for section in &fetched.sections {
            let partition = section.fetched.partition;
            let Some(tally) = tallies.get_mut(&partition).filter(|t| !t.done) else {
                continue;
            };
            let records = &fetched.bytes[section.fetched.records.clone()];
            let aborted = &section.fetched.aborted;
            let mut to = Delivery {
                topic,
                partition,
                tally,
                scratch: &mut scratch,
                sink: &mut sink,
            };
            to.deliver(records, aborted).map_err(|e| match e {
                Stop::Wire(offset, e) => {
                    DrainError::Kafka(record_failure(topic, partition, offset, &e))
                }
                Stop::Sink(e) => DrainError::Sink(e),
            })?;
            tally.next = section.next;
            if section.done {
                tally.done = true;
                remaining -= 1;
            }
        }
        returned.give(fetched);
    }
    Ok(())
}

/// Where the drain thread gives read buffers back: to the fetch thread
/// while it runs, else to the kept buffers.
struct Returned<'a> {
    spare: Sender<Fetched>,
    kept: &'a FetchBuffers,
}

impl Returned<'_> {
    fn give(&self, fetched: Fetched) {
        // The fetch thread may have ended (every partition done).
        if let Err(mpsc::SendError(fetched)) = self.spare.send(fetched) {
            self.kept.keep(fetched.bytes);
        }
    }
}

/// Why delivering a section stopped.
enum Stop<E> {
    /// A batch did not read (the offset reached).
    Wire(i64, WireError),
    /// The sink refused a record.
    Sink(E),
}

/// One section's records on their way to the sink.
struct Delivery<'a, F> {
    topic: &'a str,
    partition: i32,
    tally: &'a mut Tally,
    scratch: &'a mut Vec<u8>,
    sink: &'a mut F,
}

impl<F> Delivery<'_, F> {
    /// Hands `sink` every record of `records` in `tally.next..tally.end`
    /// that a `read_committed` reader sees.
    fn deliver<E>(&mut self, records: &[u8], aborted: &[(i64, i64)]) -> Result<(), Stop<E>>
    where
        F: FnMut(&SourceRecord<'_>) -> Result<(), E>,
    {
        let (from, end) = (self.tally.next, self.tally.end);
        let mut filter = TransactionFilter::new(aborted.to_vec());
        for batch in batches(records) {
            let (header, body) = batch.map_err(|e| Stop::Wire(from, e))?;
            let keep = filter
                .keeps(&header, body)
                .map_err(|e| Stop::Wire(header.base_offset, e))?;
            if !keep || header.last_offset < from || header.base_offset >= end {
                continue;
            }
            let bytes = record_bytes(&header, body, self.scratch)
                .map_err(|e| Stop::Wire(header.base_offset, e))?;
            let (topic, partition) = (self.topic, self.partition);
            let (sink, tally) = (&mut *self.sink, &mut *self.tally);
            for_each_record(&header, bytes, |r| {
                if r.offset < from || r.offset >= end {
                    return Ok(());
                }
                let record = SourceRecord {
                    topic,
                    partition,
                    offset: r.offset,
                    timestamp_ms: r.timestamp_ms,
                    key: r.key,
                    value: r.value,
                    headers: Headers::Wire(r.headers),
                };
                sink(&record).map_err(Stop::Sink)?;
                tally.records += 1;
                tally.newest_ms = tally.newest_ms.max(r.timestamp_ms.unwrap_or(i64::MIN));
                tally.bytes +=
                    (r.key.map_or(0, <[u8]>::len) + r.value.map_or(0, <[u8]>::len)) as u64;
                Ok(())
            })
            .map_err(|e| match e {
                Stop::Wire(_, w) => Stop::Wire(header.base_offset, w),
                other => other,
            })?;
        }
        Ok(())
    }
}

impl<E> From<WireError> for Stop<E> {
    fn from(e: WireError) -> Self {
        Stop::Wire(0, e)
    }
}

/// A record batch that did not read, named by where it is.
fn record_failure(topic: &str, partition: i32, offset: i64, e: &WireError) -> KafkaError {
    KafkaError::new(
        KafkaErrorKind::Broker,
        "reading record batches",
        format!("{topic}[{partition}] at offset {offset}: {e}"),
    )
}
