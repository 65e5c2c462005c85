//! Filling a follower's spill ([`crate::spill`]): the batch drain's fetch
//! thread, its responses written to the spill's segments as they came
//! instead of decoded.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use super::fetcher::{Event, Fetched, Fetcher};
use super::CHECK_EVERY;
use crate::spill::{frame_size, SegmentWriter, Spill};
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// A fill gives up when no partition moves for this long (the fill is
/// tried again after the next failed round).
const STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Reads `(partition, from, end)` ranges of `topic` ahead into new
/// segments of `spill` with the batch reader, until every range is read,
/// the spill is full, or `keep_going` says no; returns the bytes added.
/// Each range starts where the spill ends for its partition
/// ([`Spill::range`]) or, when it holds none of it, where the partition's
/// table is. `client_id`: the job's consumer group.
pub fn fill_spill(
    connection: &KafkaConnection,
    topic: &str,
    ranges: &[(i32, i64, i64)],
    client_id: &str,
    spill: &Spill,
    keep_going: &dyn Fn() -> bool,
) -> Result<u64, KafkaError> {
    let ranges: Vec<(i32, i64, i64)> = ranges.iter().copied().filter(|r| r.1 < r.2).collect();
    if ranges.is_empty() || spill.full() {
        return Ok(0);
    }
    let mut writers = BTreeMap::new();
    for &(partition, from, _) in &ranges {
        writers.insert(partition, (spill.writer(topic, partition)?, from));
    }
    let stop = AtomicBool::new(false);
    let buffers = super::FetchBuffers::default();
    let written = std::thread::scope(|scope| {
        let (events_tx, events) = mpsc::sync_channel(1);
        let (spare, spare_rx) = mpsc::channel();
        let fetcher = Fetcher::new(
            connection,
            topic,
            client_id,
            STALL_TIMEOUT,
            &stop,
            &buffers,
            ranges.iter().copied(),
        );
        std::thread::Builder::new()
            .name("kafka-spill".into())
            .spawn_scoped(scope, move || fetcher.run(events_tx, spare_rx))
            .map_err(|e| {
                KafkaError::new(KafkaErrorKind::Config, "starting the spill's fetch", e)
            })?;
        let budget = spill.limit().saturating_sub(spill.bytes());
        let written = write_responses(&mut writers, events, spare, budget, keep_going);
        if matches!(written, Ok(Filled::Full)) {
            spill.refuse_more();
        }
        stop.store(true, Ordering::Relaxed);
        written
    });
    // Whole frames only were recorded: what was written before a failure
    // is kept.
    let mut added = 0;
    for (writer, _) in writers.into_values() {
        added += spill.keep(writer)?;
    }
    written.map(|_| added)
}

/// How a fill ended without failing.
enum Filled {
    /// Every range read, or `keep_going` said no.
    Read,
    /// The next fetch did not fit in the spill.
    Full,
}

/// Writes each response's sections to their partitions' segments until
/// every partition is done or the next frame would pass `budget`.
fn write_responses(
    writers: &mut BTreeMap<i32, (SegmentWriter, i64)>,
    events: Receiver<Event>,
    spare: Sender<Fetched>,
    mut budget: u64,
    keep_going: &dyn Fn() -> bool,
) -> Result<Filled, KafkaError> {
    let mut open: std::collections::BTreeSet<i32> = writers.keys().copied().collect();
    while !open.is_empty() && keep_going() {
        let fetched = match events.recv_timeout(CHECK_EVERY) {
            Ok(Event::Fetched(fetched)) => fetched,
            Ok(Event::Failed(e)) => return Err(e),
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return Ok(Filled::Read),
        };
        for section in &fetched.sections {
            let partition = section.fetched.partition;
            let Some((writer, next)) = writers
                .get_mut(&partition)
                .filter(|_| open.contains(&partition))
            else {
                continue;
            };
            if section.next > *next {
                let records = &fetched.bytes[section.fetched.records.clone()];
                let size = frame_size(&section.fetched.aborted, records);
                if size > budget {
                    return Ok(Filled::Full);
                }
                writer.append(*next, section.next, &section.fetched.aborted, records)?;
                budget -= size;
                *next = section.next;
            }
            if section.done {
                open.remove(&partition);
            }
        }
        let _ = spare.send(fetched);
    }
    Ok(Filled::Read)
}
