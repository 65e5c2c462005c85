//! A routed topic's chunk (`route.rs`): one read of its partitions for all
//! the tables of its route, each message handed to the writer of the table
//! it names, unless that table already holds it (its own offsets are past
//! the message: it committed a round the group's offsets did not move
//! past).
//!
//! A message naming no table is passed with `on_invalid = "skip"` (logged
//! once per chunk) and fails the route otherwise; the Kafka tombstone after
//! a change stream's delete names none and is passed (its delete event did
//! the work). A failure of any of the route's tables stops the read: every
//! table of the chunk fails with it, and the group's offsets stay.

use std::collections::HashMap;

use tokio::sync::mpsc;
use topicberg_core::config::{ChangeEvents, OnInvalid};
use topicberg_core::SourceRecord;
use topicberg_kafka::{drain_checked, DrainError, DrainedPartition, PartitionRange};

use super::chunk::{ChunkResult, ChunkWriter, Item, Shared};
use super::failure::{DrainFailure, SinkError};

/// One table's share of a routed chunk.
struct Part<'a> {
    index: usize,
    /// The chunk's ranges cut to where the table does not hold messages.
    ranges: Vec<PartitionRange>,
    writer: ChunkWriter<'a>,
    /// Messages and bytes handed to the table, per partition of `ranges`.
    counts: Vec<(u64, u64)>,
}

impl Part<'_> {
    /// The position of `partition` in `ranges` when `offset` is in its range.
    fn slot(&self, partition: i32, offset: i64) -> Option<usize> {
        self.ranges
            .iter()
            .position(|r| r.partition == partition && r.start <= offset && offset < r.end)
    }
}

/// Where a named table's messages go: its part, or nowhere (it holds all
/// of the chunk's messages already).
type Slots<'s> = HashMap<&'s str, Option<usize>>;

/// Reads `ranges` of the route whose tables are `members`, each message
/// going to its table; a result per table with a share of the chunk.
pub(super) fn drain_routed(
    shared: &Shared,
    tx: &mpsc::Sender<Item>,
    ranges: &[PartitionRange],
    members: &[usize],
) -> Vec<ChunkResult> {
    let (mut parts, slots) = match parts(shared, tx, ranges, members) {
        Ok(found) => found,
        Err(e) => {
            let reason = e.to_string();
            return members
                .iter()
                .map(|&i| {
                    let stopped = DrainFailure::Read(DrainError::Sink(SinkError::RouteStopped(
                        reason.clone(),
                    )));
                    (i, Vec::new(), Err(stopped))
                })
                .collect();
        }
    };
    let lead = &shared.tables[members[0]];
    let mut router = Router {
        group: lead.route.as_ref().expect("a routed table"),
        on_invalid: lead.on_invalid,
        change_events: lead.change_events,
        slots,
        table: String::new(),
        failed_at: None,
        skipped: (0, None),
    };
    let cancelled = || shared.check_cancelled();
    let drained = drain_checked(
        &shared.connection,
        ranges,
        &shared.settings,
        cancelled,
        |record| router.take(record, &mut parts),
    );
    if let (n @ 1.., Some(first)) = &router.skipped {
        tracing::warn!(topic = %lead.topic, skipped = n, first = %first, "messages naming no table were passed (on_invalid = \"skip\")");
    }
    finish(parts, drained, router.failed_at)
}

/// Hands each message of a routed chunk to its table's part.
struct Router<'a> {
    group: &'a super::route_group::RouteGroup,
    on_invalid: OnInvalid,
    change_events: ChangeEvents,
    slots: Slots<'a>,
    /// The table the message names (reused).
    table: String,
    /// The part whose writer failed.
    failed_at: Option<usize>,
    /// Messages naming no table passed, and the first.
    skipped: (u64, Option<String>),
}

impl Router<'_> {
    fn take(&mut self, record: &SourceRecord<'_>, parts: &mut [Part<'_>]) -> Result<(), SinkError> {
        let group = self.group;
        if let Err(e) = group
            .template
            .write_table(record, group.envelope, &mut self.table)
        {
            return unroutable(
                record,
                &e,
                self.on_invalid,
                self.change_events,
                &mut self.skipped,
            );
        }
        let Some(slot) = self.slots.get(self.table.as_str()) else {
            return Err(SinkError::Unrouted {
                topic: record.topic.to_owned(),
                partition: record.partition,
                offset: record.offset,
                table: self.table.clone(),
            });
        };
        let Some(i) = *slot else {
            return Ok(());
        };
        let part = &mut parts[i];
        let Some(at) = part.slot(record.partition, record.offset) else {
            return Ok(());
        };
        let bytes = record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
        part.counts[at].0 += 1;
        part.counts[at].1 += bytes as u64;
        let taken = part.writer.take(record);
        if taken.is_err() {
            self.failed_at = Some(i);
        }
        taken
    }
}

/// Each member's part of the chunk, and where each table name goes.
fn parts<'a>(
    shared: &'a Shared,
    tx: &'a mpsc::Sender<Item>,
    ranges: &[PartitionRange],
    members: &[usize],
) -> Result<(Vec<Part<'a>>, Slots<'a>), DrainFailure> {
    let mut parts = Vec::new();
    let mut slots = HashMap::new();
    let group = shared.tables[members[0]]
        .route
        .as_ref()
        .expect("a routed table");
    // A named table without a share holds these messages already (or
    // failed before the drain: the group's offsets then stay).
    for name in &group.tables {
        slots.insert(name.as_str(), None);
    }
    for &index in members {
        let table = &shared.tables[index];
        let cut = cut(ranges, &table.ranges);
        if cut.is_empty() {
            slots.insert(table.name.as_str(), None);
            continue;
        }
        let writer = ChunkWriter::new(shared, tx, index, &cut)?;
        slots.insert(table.name.as_str(), Some(parts.len()));
        parts.push(Part {
            index,
            counts: vec![(0, 0); cut.len()],
            ranges: cut,
            writer,
        });
    }
    Ok((parts, slots))
}

/// `ranges` cut to `own` (a table's planned ranges), partition by partition.
fn cut(ranges: &[PartitionRange], own: &[PartitionRange]) -> Vec<PartitionRange> {
    ranges
        .iter()
        .filter_map(|r| {
            let o = own.iter().find(|o| o.partition == r.partition)?;
            let (start, end) = (r.start.max(o.start), r.end.min(o.end));
            (start < end).then(|| PartitionRange {
                start,
                end,
                ..r.clone()
            })
        })
        .collect()
}

/// A message naming no table.
fn unroutable(
    record: &SourceRecord<'_>,
    e: &topicberg_core::route::RouteError,
    on_invalid: OnInvalid,
    change_events: ChangeEvents,
    skipped: &mut (u64, Option<String>),
) -> Result<(), SinkError> {
    if change_events != ChangeEvents::None && record.value.is_none() {
        return Ok(());
    }
    let at = || {
        format!(
            "{}[{}]@{}: {e}",
            record.topic, record.partition, record.offset
        )
    };
    if on_invalid == OnInvalid::Skip {
        skipped.0 += 1;
        skipped.1.get_or_insert_with(at);
        return Ok(());
    }
    Err(SinkError::Unroutable {
        topic: record.topic.to_owned(),
        partition: record.partition,
        offset: record.offset,
        reason: e.to_string(),
    })
}

/// Each part finished with its share of the read: what it was handed of
/// each partition, or the failure (the part that failed gets the error,
/// the others that the read stopped).
fn finish(
    parts: Vec<Part<'_>>,
    drained: Result<Vec<DrainedPartition>, DrainError<SinkError>>,
    failed_at: Option<usize>,
) -> Vec<ChunkResult> {
    let mut results = Vec::with_capacity(parts.len());
    let (drained, mut error, reason) = match drained {
        Ok(d) => (d, None, String::new()),
        Err(e) => {
            let reason = e.to_string();
            (Vec::new(), Some(e), reason)
        }
    };
    for (i, part) in parts.into_iter().enumerate() {
        let outcome = match error.take_if(|_| failed_at.is_none_or(|f| f == i)) {
            Some(e) => Err(e),
            None if !reason.is_empty() => {
                Err(DrainError::Sink(SinkError::RouteStopped(reason.clone())))
            }
            None => Ok(own_share(&drained, &part)),
        };
        let result = part.writer.finish(outcome);
        results.push((part.index, part.ranges, result));
    }
    results
}

/// The drained partitions of `part`'s ranges, counting its messages only.
fn own_share(drained: &[DrainedPartition], part: &Part<'_>) -> Vec<DrainedPartition> {
    part.ranges
        .iter()
        .zip(&part.counts)
        .filter_map(|(r, &(records, bytes))| {
            let d = drained.iter().find(|d| d.partition == r.partition)?;
            Some(DrainedPartition {
                records,
                bytes,
                next_offset: d.next_offset.min(r.end),
                ..d.clone()
            })
        })
        .collect()
}
