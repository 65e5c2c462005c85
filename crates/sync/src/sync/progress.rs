//! A sync's progress while it runs: per table and partition, the offsets
//! read of those planned and the bytes, for the progress log line and a
//! live view (serve's run page polls [`SyncProgress::snapshot`]).
//!
//! Drain threads count in their own fields and add to these shared
//! counters once per [`PUBLISH_EVERY`] messages (and at a chunk's end), so
//! no shared cache line is written per message.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde::Serialize;
use topicberg_kafka::PartitionRange;

/// Messages a drain thread reads between two additions to the shared
/// counters.
pub(super) const PUBLISH_EVERY: u32 = 2048;

/// Where a sync is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncPhase {
    /// Selecting topics, reading offsets, loading or creating tables.
    Planning,
    /// Reading the topics and writing data files.
    Reading,
    /// Committing the tables' snapshots and the group's offsets.
    Committing,
    /// Done (the report tells how it ended).
    Finished,
}

impl SyncPhase {
    fn from_u8(value: u8) -> SyncPhase {
        match value {
            0 => SyncPhase::Planning,
            1 => SyncPhase::Reading,
            2 => SyncPhase::Committing,
            _ => SyncPhase::Finished,
        }
    }
}

/// One partition's planned range and what was read of it.
pub struct PartitionProgress {
    partition: i32,
    planned: u64,
    read: AtomicU64,
    bytes: AtomicU64,
}

impl PartitionProgress {
    /// Adds `offsets` read and `bytes` of key and value.
    pub(super) fn add(&self, offsets: u64, bytes: u64) {
        if offsets > 0 {
            self.read.fetch_add(offsets, Ordering::Relaxed);
        }
        if bytes > 0 {
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }
}

/// One table's partitions and how far the sync is with it.
pub struct TableProgress {
    topic: String,
    table: String,
    partitions: Vec<PartitionProgress>,
    /// What the sync does with the table now (`waiting`, `reading`, the
    /// final status...).
    status: Mutex<&'static str>,
}

impl TableProgress {
    /// The partition's counters (`None`: not planned).
    #[cfg(test)]
    pub(super) fn partition(&self, partition: i32) -> Option<&PartitionProgress> {
        self.partitions.iter().find(|p| p.partition == partition)
    }

    /// The index of a partition's counters, for [`Self::at`].
    pub(super) fn index_of(&self, partition: i32) -> Option<usize> {
        self.partitions
            .iter()
            .position(|p| p.partition == partition)
    }

    /// The counters at `index` (from [`Self::index_of`]).
    pub(super) fn at(&self, index: usize) -> &PartitionProgress {
        &self.partitions[index]
    }

    /// Sets what the sync does with the table now.
    pub(super) fn set_status(&self, status: &'static str) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = status;
    }

    fn status(&self) -> &'static str {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A sync's live progress. Give one to the sync in
/// [`SyncOptions::progress`](super::SyncOptions) to watch it.
pub struct SyncProgress {
    started: Instant,
    phase: AtomicU8,
    /// Milliseconds after `started` when reading began (0: not yet).
    reading_since_ms: AtomicU64,
    /// Milliseconds after `started` when reading ended (0: not yet).
    reading_until_ms: AtomicU64,
    /// Messages decoded into rows so far.
    pub(super) records: AtomicU64,
    tables: OnceLock<Vec<Arc<TableProgress>>>,
}

impl Default for SyncProgress {
    fn default() -> Self {
        SyncProgress {
            started: Instant::now(),
            phase: AtomicU8::new(0),
            reading_since_ms: AtomicU64::new(0),
            reading_until_ms: AtomicU64::new(0),
            records: AtomicU64::new(0),
            tables: OnceLock::new(),
        }
    }
}

impl std::fmt::Debug for SyncProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phase = SyncPhase::from_u8(self.phase.load(Ordering::Relaxed));
        f.debug_struct("SyncProgress")
            .field("phase", &phase)
            .finish_non_exhaustive()
    }
}

/// One table to show: its topic, `namespace.table`, its planned ranges
/// (empty: nothing to read) and its status before reading.
pub(super) struct PlannedTable<'a> {
    pub(super) topic: &'a str,
    pub(super) table: &'a str,
    pub(super) ranges: &'a [PartitionRange],
    pub(super) status: &'static str,
}

impl SyncProgress {
    /// The tables the sync reads, once planned (later calls are ignored).
    /// Returns each table's counters, in the order given.
    pub(super) fn plan(&self, tables: &[PlannedTable<'_>]) -> Vec<Arc<TableProgress>> {
        let made = tables
            .iter()
            .map(|t| {
                Arc::new(TableProgress {
                    topic: t.topic.to_owned(),
                    table: t.table.to_owned(),
                    partitions: t
                        .ranges
                        .iter()
                        .map(|r| PartitionProgress {
                            partition: r.partition,
                            planned: (r.end - r.start).max(0) as u64,
                            read: AtomicU64::new(0),
                            bytes: AtomicU64::new(0),
                        })
                        .collect(),
                    status: Mutex::new(t.status),
                })
            })
            .collect();
        let _ = self.tables.set(made);
        self.tables.get().cloned().unwrap_or_default()
    }

    /// The counters of table `index` (in the order planned).
    pub(super) fn table(&self, index: usize) -> Option<&Arc<TableProgress>> {
        self.tables.get().and_then(|t| t.get(index))
    }

    /// Moves the sync to `phase`.
    pub(super) fn set_phase(&self, phase: SyncPhase) {
        let now = self.started.elapsed().as_millis().max(1) as u64;
        let mark = match phase {
            SyncPhase::Reading => &self.reading_since_ms,
            SyncPhase::Committing | SyncPhase::Finished => &self.reading_until_ms,
            SyncPhase::Planning => return,
        };
        let _ = mark.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// What the sync has done so far.
    pub fn snapshot(&self) -> ProgressSnapshot {
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        // The rate is of the reading phase only (it stays put while committing).
        let reading_since = self.reading_since_ms.load(Ordering::Relaxed);
        let reading_until = match self.reading_until_ms.load(Ordering::Relaxed) {
            0 => elapsed_ms,
            until => until,
        };
        let reading_ms = if reading_since == 0 {
            0
        } else {
            reading_until.saturating_sub(reading_since)
        };
        let tables: Vec<TableSnapshot> = self
            .tables
            .get()
            .map(|tables| {
                tables
                    .iter()
                    .map(|t| table_snapshot(t, reading_ms))
                    .collect()
            })
            .unwrap_or_default();
        let read = tables.iter().map(|t| t.read).sum();
        let planned = tables.iter().map(|t| t.planned).sum();
        let bytes = tables.iter().map(|t| t.bytes).sum();
        let phase = SyncPhase::from_u8(self.phase.load(Ordering::Relaxed));
        ProgressSnapshot {
            phase,
            elapsed_ms,
            records: self.records.load(Ordering::Relaxed),
            read,
            planned,
            bytes,
            rate_per_s: rate(read, reading_ms),
            eta_ms: (phase == SyncPhase::Reading)
                .then(|| eta_ms(read, planned, reading_ms))
                .flatten(),
            tables,
        }
    }
}

fn table_snapshot(table: &TableProgress, reading_ms: u64) -> TableSnapshot {
    let partitions: Vec<PartitionSnapshot> = table
        .partitions
        .iter()
        .map(|p| PartitionSnapshot {
            partition: p.partition,
            // Never past the plan: a range's end is counted at the chunk's end.
            read: p.read.load(Ordering::Relaxed).min(p.planned),
            planned: p.planned,
            bytes: p.bytes.load(Ordering::Relaxed),
        })
        .collect();
    let read = partitions.iter().map(|p| p.read).sum();
    let planned = partitions.iter().map(|p| p.planned).sum();
    let status = table.status();
    TableSnapshot {
        topic: table.topic.clone(),
        table: table.table.clone(),
        status,
        read,
        planned,
        bytes: partitions.iter().map(|p| p.bytes).sum(),
        eta_ms: (status == "reading")
            .then(|| eta_ms(read, planned, reading_ms))
            .flatten(),
        partitions,
    }
}

fn rate(read: u64, ms: u64) -> u64 {
    if ms == 0 {
        return 0;
    }
    read.saturating_mul(1000) / ms
}

/// Time left at the rate so far; `None` before anything was read.
fn eta_ms(read: u64, planned: u64, reading_ms: u64) -> Option<u64> {
    if read == 0 || reading_ms == 0 {
        return None;
    }
    let left = planned.saturating_sub(read) as u128;
    Some((left * reading_ms as u128 / read as u128) as u64)
}

/// One drain thread's counts for its chunk: per range the offset reached
/// and the bytes, added to the table's counters every [`PUBLISH_EVERY`]
/// messages and at the chunk's end.
pub(super) struct ChunkReads {
    table: Arc<TableProgress>,
    reads: Vec<RangeRead>,
    /// The range of the last message (messages come in runs of one
    /// partition).
    current: usize,
    pending: u32,
}

struct RangeRead {
    partition: i32,
    /// The table counters' index of the partition.
    slot: Option<usize>,
    /// Offsets up to here are counted in the table's counters.
    published: i64,
    /// The offset after the last message read.
    next: i64,
    end: i64,
    bytes: u64,
}

impl ChunkReads {
    pub(super) fn new(table: &Arc<TableProgress>, ranges: &[PartitionRange]) -> Self {
        ChunkReads {
            table: Arc::clone(table),
            reads: ranges
                .iter()
                .map(|r| RangeRead {
                    partition: r.partition,
                    slot: table.index_of(r.partition),
                    published: r.start,
                    next: r.start,
                    end: r.end,
                    bytes: 0,
                })
                .collect(),
            current: 0,
            pending: 0,
        }
    }

    /// One message read (any: row, tombstone or invalid).
    #[inline]
    pub(super) fn note(&mut self, partition: i32, offset: i64, bytes: usize) {
        if self.reads.get(self.current).map(|r| r.partition) != Some(partition) {
            match self.reads.iter().position(|r| r.partition == partition) {
                Some(i) => self.current = i,
                None => return,
            }
        }
        let read = &mut self.reads[self.current];
        read.next = read.next.max(offset + 1);
        read.bytes += bytes as u64;
        self.pending += 1;
        if self.pending >= PUBLISH_EVERY {
            self.publish();
        }
    }

    /// Adds what was counted to the table's counters.
    pub(super) fn publish(&mut self) {
        self.pending = 0;
        for read in &mut self.reads {
            if let Some(slot) = read.slot {
                let offsets = (read.next - read.published).max(0) as u64;
                self.table.at(slot).add(offsets, read.bytes);
            }
            read.published = read.published.max(read.next);
            read.bytes = 0;
        }
    }

    /// The chunk was read to its ends (offsets past the last message, such
    /// as transaction markers, count as read).
    pub(super) fn finish(&mut self) {
        for read in &mut self.reads {
            read.next = read.next.max(read.end);
        }
        self.publish();
    }
}

/// A sync's progress at one moment (serve's `GET /api/runs/{id}/progress`).
#[derive(Debug, Clone, Serialize)]
pub struct ProgressSnapshot {
    /// Where the sync is.
    pub phase: SyncPhase,
    /// Since the sync started.
    pub elapsed_ms: u64,
    /// Messages decoded into rows.
    pub records: u64,
    /// Offsets read of `planned`, every table.
    pub read: u64,
    /// Offsets planned: from each partition's start to the high watermark
    /// seen at the start.
    pub planned: u64,
    /// Key and value bytes read.
    pub bytes: u64,
    /// Offsets read per second since reading began.
    pub rate_per_s: u64,
    /// Time left to read everything at that rate (while reading).
    pub eta_ms: Option<u64>,
    /// Each table.
    pub tables: Vec<TableSnapshot>,
}

/// One table's progress.
#[derive(Debug, Clone, Serialize)]
pub struct TableSnapshot {
    /// The source topic.
    pub topic: String,
    /// `namespace.table`.
    pub table: String,
    /// `waiting`, `reading` (at 100% of `planned`: its last files being
    /// written), `written` (files written, waiting for its commit),
    /// `committing`, `up_to_date` (nothing to read), or how it ended:
    /// `committed`, `unchanged`, `failed`, `cancelled`, `superseded`.
    pub status: &'static str,
    /// Offsets read of `planned`.
    pub read: u64,
    /// Offsets planned.
    pub planned: u64,
    /// Key and value bytes read.
    pub bytes: u64,
    /// Time left for this table at the sync's rate so far (while reading).
    pub eta_ms: Option<u64>,
    /// Each planned partition.
    pub partitions: Vec<PartitionSnapshot>,
}

/// One partition's progress.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionSnapshot {
    /// The partition id.
    pub partition: i32,
    /// Offsets read of `planned`.
    pub read: u64,
    /// Offsets planned.
    pub planned: u64,
    /// Key and value bytes read.
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(partition: i32, start: i64, end: i64) -> PartitionRange {
        PartitionRange {
            topic: "t".into(),
            partition,
            start,
            end,
        }
    }

    #[test]
    fn snapshot_sums_partitions_and_caps_read_at_the_plan() {
        let progress = SyncProgress::default();
        let ranges = [range(0, 10, 110), range(1, 0, 50)];
        let tables = progress.plan(&[PlannedTable {
            topic: "t",
            table: "ns.t",
            ranges: &ranges,
            status: "waiting",
        }]);
        tables[0].partition(0).unwrap().add(40, 400);
        tables[0].partition(1).unwrap().add(60, 600);
        let snap = progress.snapshot();
        assert_eq!((snap.read, snap.planned, snap.bytes), (90, 150, 1000));
        let parts = &snap.tables[0].partitions;
        assert_eq!((parts[0].read, parts[0].planned), (40, 100));
        assert_eq!((parts[1].read, parts[1].planned), (50, 50));
        assert_eq!(snap.phase, SyncPhase::Planning);
        assert_eq!(snap.eta_ms, None, "no estimate before reading");
    }

    #[test]
    fn eta_is_time_left_at_the_rate_so_far() {
        assert_eq!(eta_ms(25, 100, 1000), Some(3000));
        assert_eq!(eta_ms(0, 100, 1000), None);
        assert_eq!(eta_ms(100, 100, 1000), Some(0));
        assert_eq!(rate(500, 2000), 250);
        assert_eq!(rate(500, 0), 0);
    }

    #[test]
    fn chunk_reads_count_offsets_of_each_range_and_its_end() {
        let progress = SyncProgress::default();
        let ranges = [range(0, 0, 10_000), range(1, 100, 200)];
        let tables = progress.plan(&[PlannedTable {
            topic: "t",
            table: "ns.t",
            ranges: &ranges,
            status: "reading",
        }]);
        let mut reads = ChunkReads::new(&tables[0], &ranges);
        for offset in 0..3000 {
            reads.note(0, offset, 10);
        }
        // Published once (2048 messages), not per message.
        assert_eq!(progress.snapshot().read, 2048);
        reads.note(1, 150, 5);
        reads.publish();
        let snap = progress.snapshot();
        assert_eq!(snap.tables[0].partitions[0].read, 3000);
        assert_eq!(snap.tables[0].partitions[1].read, 51);
        assert_eq!(snap.bytes, 30_005);
        reads.finish();
        assert_eq!(progress.snapshot().read, 10_100);
    }

    #[test]
    fn a_second_plan_keeps_the_first() {
        let progress = SyncProgress::default();
        let ranges = [range(0, 0, 10)];
        let first = progress.plan(&[PlannedTable {
            topic: "a",
            table: "ns.a",
            ranges: &ranges,
            status: "waiting",
        }]);
        let second = progress.plan(&[]);
        assert!(Arc::ptr_eq(&first[0], &second[0]));
    }
}
