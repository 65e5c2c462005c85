//! Upsert mode within one sync: which message wins for each key.
//!
//! Every decoded batch of an upsert table is held on local disk until the
//! drain ends (the sync's new rows; the table's old rows stay in the table
//! and are found through the key index), so memory does not grow with the
//! number of messages. For each `_olake_id` (the hash of the dedup key)
//! the latest message wins: within a partition the higher offset; across
//! partitions the later message timestamp (on a change-event table the
//! later place in the source's log, `_cdc_lsn`), then the higher
//! partition, then the higher offset, so the result never depends on
//! thread timing. A
//! tombstone (on a `_kafka_key` stream) competes like any message and, when
//! it wins, deletes the key.

mod entries;
mod error;
mod folder;
mod held;
mod unsent;

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, TimeUnit};
use arrow_select::filter::filter_record_batch;

use entries::{Entries, Entry};
pub use error::SpillError;
pub use folder::remove_abandoned as remove_abandoned_spill_folders;
use folder::SpillFolder;
use held::HeldShape;
use topicberg_core::columns::{CDC_LSN, KAFKA_TIMESTAMP};
use topicberg_iceberg::key_index::Stamp;
use unsent::UnsentValues;
pub use unsent::{Fill, FillFrom};

/// A message's place in the stream, for ordering versions of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Message timestamp, microseconds (or milliseconds: only compared);
    /// on a change-event table the source's log position (`_cdc_lsn`).
    pub timestamp: i64,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
}

/// How one key's versions are ordered (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VersionOrder {
    /// Within a partition by offset; across partitions by the message
    /// timestamp (or `_cdc_lsn`), then partition, then offset.
    #[default]
    Arrival,
    /// By the stream's `order_by` value first, within a partition too;
    /// a message without a value (a tombstone) goes by offset within its
    /// partition and comes first against other partitions.
    Field,
}

impl VersionOrder {
    /// The order of a stream with `order_by`, or without.
    fn of(order_by: Option<&str>) -> Self {
        match order_by {
            Some(_) => VersionOrder::Field,
            None => VersionOrder::Arrival,
        }
    }
}

impl Version {
    /// Whether the version has an order value (not `i64::MIN`).
    pub fn known(&self) -> bool {
        self.timestamp != i64::MIN
    }

    /// [`Self::replaces`] under `order`: by `order_by` a message of the
    /// row's partition replaces it only with a value as high.
    pub fn replaces_in(&self, row: &Stamp, order: VersionOrder) -> bool {
        let by_value = order == VersionOrder::Field
            && self.known()
            && row.timestamp != Stamp::UNKNOWN.timestamp;
        if by_value && self.partition == row.partition {
            return self.timestamp >= row.timestamp;
        }
        self.replaces(row)
    }

    /// Whether `self` supersedes `other` (see the module docs).
    pub fn supersedes(&self, other: &Version) -> bool {
        if self.partition == other.partition {
            return self.offset > other.offset;
        }
        (self.timestamp, self.partition, self.offset)
            > (other.timestamp, other.partition, other.offset)
    }

    /// Whether this message replaces a row the table already has, from
    /// its stamp: always from the same partition (the row came from an
    /// earlier offset: the table's offsets are past it); from another
    /// partition only when later by [`Self::supersedes`]'s rule (the
    /// offset never decides between two partitions). So the right row
    /// stays whichever round or worker commits last.
    pub fn replaces(&self, row: &Stamp) -> bool {
        self.partition == row.partition
            || (self.timestamp, self.partition) > (row.timestamp, row.partition)
    }

    /// What the key index keeps of this version with the row.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            timestamp: self.timestamp,
            partition: self.partition,
        }
    }
}

/// The column that orders one key's versions: the stream's `order_by`
/// column, else a change-event table's `_cdc_lsn` (the source's log
/// position), else `_kafka_timestamp`. A null (or a batch without the
/// `order_by` column) orders first (`i64::MIN`).
enum Order<'a> {
    /// `_cdc_lsn`, and for a row without one its `_kafka_timestamp` (a
    /// source without log positions: all its events lack one).
    Lsn(
        &'a arrow_array::Int64Array,
        &'a arrow_array::TimestampMicrosecondArray,
    ),
    Long(&'a arrow_array::Int64Array),
    Int(&'a arrow_array::Int32Array),
    Timestamp(&'a arrow_array::TimestampMicrosecondArray),
    Absent,
}

impl<'a> Order<'a> {
    fn of(batch: &'a RecordBatch, order_by: Option<&str>) -> Result<Self, SpillError> {
        if let Some(name) = order_by {
            let Some(column) = batch.column_by_name(name) else {
                return Ok(Order::Absent);
            };
            return match column.data_type() {
                DataType::Int64 => Ok(Order::Long(column.as_primitive::<Int64Type>())),
                DataType::Int32 => Ok(Order::Int(column.as_primitive::<Int32Type>())),
                DataType::Timestamp(TimeUnit::Microsecond, _) => Ok(Order::Timestamp(
                    column.as_primitive::<TimestampMicrosecondType>(),
                )),
                other => Err(SpillError::OrderType {
                    column: name.to_owned(),
                    found: other.to_string(),
                }),
            };
        }
        let timestamps = batch
            .column_by_name(KAFKA_TIMESTAMP)
            .ok_or(SpillError::MissingColumn(KAFKA_TIMESTAMP))?
            .as_primitive::<TimestampMicrosecondType>();
        Ok(match batch.column_by_name(CDC_LSN) {
            Some(lsn) => Order::Lsn(lsn.as_primitive::<Int64Type>(), timestamps),
            None => Order::Timestamp(timestamps),
        })
    }

    /// Whether the row has a place in the source's log (on a change-event
    /// table; rows of other tables need none).
    fn positioned(&self, row: usize) -> bool {
        match self {
            Order::Lsn(lsn, _) => lsn.is_valid(row),
            _ => true,
        }
    }

    fn at(&self, row: usize) -> i64 {
        let value = |array: &dyn Array, v: i64| if array.is_null(row) { i64::MIN } else { v };
        match self {
            Order::Lsn(lsn, _) if lsn.is_valid(row) => lsn.values()[row],
            Order::Lsn(_, a) => value(*a, a.values()[row]),
            Order::Long(a) => value(*a, a.values()[row]),
            Order::Int(a) => value(*a, i64::from(a.values()[row])),
            Order::Timestamp(a) => value(*a, a.values()[row]),
            Order::Absent => i64::MIN,
        }
    }
}

/// One partition's last word on a key in a sync, by `order_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Its winning row, or a tombstone.
    pub slot: Slot,
    /// Its version (a tombstone's carries the highest value it deleted).
    pub version: Version,
    /// A tombstone of the partition is, or came before, this winner: the
    /// table's row of the key from this partition is deleted.
    pub reset: bool,
}

/// What becomes of a key by `order_by`, its partitions' last words weighed
/// against the table's row (`old`, from one partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The table's row stays: it is newer than every message here.
    Keep,
    /// This part wins (a row is written, a tombstone deletes); whether the
    /// table's row goes with it (it always does when there is one).
    Take(Part),
}

/// The key's outcome by `order_by`: the table's row competes as its
/// partition's part unless that partition's messages replace it (a
/// tombstone, a row after one, or a higher value); a tombstone there
/// carries the row's value. Then the highest value wins across
/// partitions, as [`Version::supersedes`] orders them.
pub fn decide_by_value(parts: &[Part], old: Option<Stamp>) -> Decision {
    let mut best: Option<(Version, Option<Part>)> = None;
    let mut old_stands = old;
    let consider = |best: &mut Option<(Version, Option<Part>)>, v: Version, part: Option<Part>| {
        if best.as_ref().is_none_or(|(b, _)| v.supersedes(b)) {
            *best = Some((v, part));
        }
    };
    for part in parts {
        let mut part = *part;
        if let Some(o) = old.filter(|o| o.partition == part.version.partition) {
            if part.reset || part.slot == Slot::Tombstone {
                if part.slot == Slot::Tombstone {
                    part.version.timestamp = part.version.timestamp.max(o.timestamp);
                }
                old_stands = None;
            } else if part.version.replaces_in(&o, VersionOrder::Field) {
                old_stands = None;
            } else {
                continue;
            }
        }
        consider(&mut best, part.version, Some(part));
    }
    if let Some(o) = old_stands {
        // Before every message of its partition here (offset -1).
        let v = Version {
            timestamp: o.timestamp,
            partition: o.partition,
            offset: -1,
        };
        consider(&mut best, v, None);
    }
    match best {
        Some((_, Some(part))) => Decision::Take(part),
        _ => Decision::Keep,
    }
}

/// Where the winning version of a key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Held row number `.0` (counted over the sync's batches in arrival
    /// order, from 0).
    Row(u32),
    /// A tombstone: the key is deleted.
    Tombstone,
}

/// Sets bit `row` of a growing bit set.
fn mark(bits: &mut Vec<u64>, row: u32) {
    let word = row as usize / 64;
    if bits.len() <= word {
        bits.resize(word + 1, 0);
    }
    bits[word] |= 1 << (row % 64);
}

/// Whether bit `row` is set.
fn marked(bits: &[u64], row: u32) -> bool {
    bits.get(row as usize / 64)
        .is_some_and(|w| w & (1 << (row % 64)) != 0)
}

/// A key's change events on two partitions when one of its rows has no
/// place in the source's log: their order cannot be told (a delete's
/// Kafka tombstone has none of its own and counts as its delete did).
fn unordered(group: &[Entry], unpositioned: &[u64], topic: &str) -> Option<SpillError> {
    if unpositioned.is_empty() {
        return None;
    }
    let first = group.first()?.version;
    let other = group
        .iter()
        .find(|e| e.version.partition != first.partition)?
        .version;
    let lacking = group
        .iter()
        .find(|e| matches!(e.slot(), Slot::Row(r) if marked(unpositioned, r)))?
        .version;
    let second = if lacking.partition == first.partition {
        other
    } else {
        lacking
    };
    Some(SpillError::Unordered {
        topic: topic.to_owned(),
        first_partition: first.partition,
        first_offset: first.offset,
        second_partition: second.partition,
        second_offset: second.offset,
    })
}

/// A 16-byte `_olake_id`.
pub type KeyHash = [u8; 16];

/// Parses the 32 hex digits of an `_olake_id`.
pub fn parse_key_hash(hex: &str) -> Option<KeyHash> {
    topicberg_core::olake_id_bytes(hex.as_bytes())
}

/// Held rows per Arrow IPC file at most (a file ends at the first batch
/// that reaches it): the winning rows are written by several writers in
/// parallel, each taking a run of whole files.
const SEGMENT_ROWS: u32 = 1 << 18;

/// One Arrow IPC file of held rows, all of one shape.
#[derive(Debug, Clone)]
struct Segment {
    path: PathBuf,
    first_row: u32,
    rows: u32,
    shape: Arc<HeldShape>,
}

/// The sync's messages of one upsert table, held on local disk: the rows
/// in Arrow IPC files (a new file whenever the columns change, and every
/// [`SEGMENT_ROWS`] rows), and one
/// [`Entry`] per message (key, version, row) from which the winner per key
/// is found (see [`entries`]). Memory stays bounded by a batch plus the
/// entries' 40 MiB, whatever the number of messages. The folder is removed
/// when the buffer is dropped, or, after a crash, by the next sync with an
/// upsert table under the same spill directory (see [`folder`]).
pub struct UpsertBuffer {
    folder: SpillFolder,
    segments: Vec<Segment>,
    open: Option<StreamWriter<BufWriter<File>>>,
    rows: u32,
    entries: Entries,
    /// The `_olake_id` bytes of the batch being taken (reused).
    ids: Vec<u8>,
    /// [`SEGMENT_ROWS`], or `TOPICBERG_UPSERT_SEGMENT_ROWS` (a test hook:
    /// small syncs then write their winning rows with several writers).
    segment_rows: u32,
    /// The latest truncate of the source table taken (change events).
    truncated: Option<Version>,
    /// The stream's `order_by` column, if any.
    order_by: Option<String>,
    /// Whether each delete names a row that should exist (a change stream
    /// keyed by payload fields: its deletes are read from `before`), so
    /// that one naming none is worth a warning.
    deletes_name_rows: bool,
    /// The values the held rows' change events did not send.
    unsent: UnsentValues,
    /// The topic of the messages, for errors.
    topic: String,
    /// Held rows of a change-event table without a place in the source's
    /// log: one bit per row.
    unpositioned: Vec<u64>,
}

/// What the sync's messages say of a key besides its winner.
pub struct KeyFacts<'a> {
    /// Whether the key had a row (not only tombstones) among them.
    pub had_row: bool,
    /// The winning row's unsent values and where each comes from.
    pub fills: &'a [Fill],
}

impl UpsertBuffer {
    /// A buffer in a new folder under `spill_dir` (created if missing).
    pub fn new(spill_dir: &Path, order_by: Option<&str>) -> Result<Self, SpillError> {
        let folder = SpillFolder::create(spill_dir)?;
        Ok(UpsertBuffer {
            entries: Entries::new(folder.path(), VersionOrder::of(order_by)),
            order_by: order_by.map(str::to_owned),
            folder,
            segments: Vec::new(),
            open: None,
            rows: 0,
            ids: Vec::new(),
            segment_rows: crate::hooks::hooks()
                .upsert_segment_rows
                .unwrap_or(SEGMENT_ROWS),
            truncated: None,
            deletes_name_rows: false,
            unsent: UnsentValues::default(),
            topic: String::new(),
            unpositioned: Vec::new(),
        })
    }

    /// Marks the buffer's deletes as naming rows that should exist (see
    /// the field).
    pub fn set_deletes_name_rows(&mut self) {
        self.deletes_name_rows = true;
    }

    /// Names the topic the messages come from (for errors).
    pub fn set_topic(&mut self, topic: &str) {
        self.topic = topic.to_owned();
    }

    /// The topic the messages come from (empty when not named).
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Whether a delete naming no row is worth a warning.
    pub fn deletes_name_rows(&self) -> bool {
        self.deletes_name_rows
    }

    /// Takes a decoded batch (with the metadata columns): its rows go to
    /// the open segment, one entry per row to the entries.
    pub fn add_batch(&mut self, batch: RecordBatch) -> Result<(), SpillError> {
        self.add_batch_with_unsent(batch, Vec::new())
    }

    /// [`Self::add_batch`] with the values its change events did not send
    /// (nulls in the batch), filled from the key's earlier rows when the
    /// winning rows are written.
    pub fn add_batch_with_unsent(
        &mut self,
        batch: RecordBatch,
        unsent: Vec<topicberg_core::UnsentValue>,
    ) -> Result<(), SpillError> {
        if !unsent.is_empty() {
            self.unsent.extend(self.rows, unsent);
        }
        let column = |name: &'static str| {
            batch
                .column_by_name(name)
                .ok_or(SpillError::MissingColumn(name))
        };
        let ids = column("_olake_id")?.as_string::<i32>();
        let partitions = column("_kafka_partition")?.as_primitive::<Int32Type>();
        let offsets = column("_kafka_offset")?.as_primitive::<Int64Type>();
        let order = Order::of(&batch, self.order_by.as_deref())?;
        let first_row = self.rows;
        let rows = u32::try_from(batch.num_rows())
            .ok()
            .and_then(|n| first_row.checked_add(n).filter(|end| *end < u32::MAX))
            .ok_or(SpillError::TooManyMessages)?;
        self.ids.clear();
        for row in 0..batch.num_rows() {
            let key = parse_key_hash(ids.value(row))
                .ok_or_else(|| SpillError::BadKey(ids.value(row).to_string()))?;
            self.ids.extend_from_slice(&key);
            let version = Version {
                timestamp: order.at(row),
                partition: partitions.value(row),
                offset: offsets.value(row),
            };
            if !order.positioned(row) {
                mark(&mut self.unpositioned, first_row + row as u32);
            }
            self.entries.push(Entry {
                key,
                version,
                row: first_row + row as u32,
            })?;
        }
        self.write_rows(&batch)?;
        self.rows = rows;
        Ok(())
    }

    fn write_rows(&mut self, batch: &RecordBatch) -> Result<(), SpillError> {
        let shape = HeldShape::of(batch)?;
        let same = |s: &Segment| *s.shape == shape;
        if self.open.is_some() && !self.segments.last().is_some_and(same) {
            self.close_segment()?;
        }
        if self.open.is_none() {
            let path = self
                .folder
                .path()
                .join(format!("rows-{:04}.arrow", self.segments.len()));
            let file = File::create(&path).map_err(|e| SpillError::io(&path, e))?;
            let writer =
                StreamWriter::try_new(BufWriter::with_capacity(1 << 20, file), shape.held_schema())
                    .map_err(|e| SpillError::file(&path, e))?;
            self.segments.push(Segment {
                path,
                first_row: self.rows,
                rows: 0,
                shape: Arc::new(shape),
            });
            self.open = Some(writer);
        }
        let writer = self.open.as_mut().expect("opened above");
        let segment = self.segments.last_mut().expect("pushed with the writer");
        let held = segment.shape.hold(batch, &self.ids)?;
        writer
            .write(&held)
            .map_err(|e| SpillError::file(&segment.path, e))?;
        segment.rows += batch.num_rows() as u32;
        if segment.rows >= self.segment_rows {
            self.close_segment()?;
        }
        Ok(())
    }

    fn close_segment(&mut self) -> Result<(), SpillError> {
        if let Some(mut writer) = self.open.take() {
            let path = &self.segments.last().expect("open segment").path;
            writer
                .finish()
                .and_then(|_| writer.into_inner().map(|_| ()))
                .map_err(|e| SpillError::file(path, e))?;
        }
        Ok(())
    }

    /// Takes a truncate of the source table at `version`: every row
    /// whose version it supersedes goes (the sync's and the table's); the
    /// latest of several counts.
    pub fn truncate(&mut self, version: Version) {
        if self.truncated.is_none_or(|t| version.supersedes(&t)) {
            self.truncated = Some(version);
        }
    }

    /// How this buffer orders a key's versions.
    pub fn order(&self) -> VersionOrder {
        VersionOrder::of(self.order_by.as_deref())
    }

    /// The latest truncate taken, if any.
    pub fn truncated(&self) -> Option<Version> {
        self.truncated
    }

    /// Takes a tombstone for `key` (timestamp in microseconds).
    pub fn add_tombstone(&mut self, key: KeyHash, version: Version) -> Result<(), SpillError> {
        self.entries.push(Entry {
            key,
            version,
            row: Entry::row_or_tombstone(Slot::Tombstone),
        })
    }

    /// Rows held (row numbers are `0..rows()`).
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Messages taken (rows, tombstones and a truncate).
    pub fn messages(&self) -> u64 {
        self.entries.len() + u64::from(self.truncated.is_some())
    }

    /// Calls `f` with every key's winner and its version, keys in
    /// ascending order. Can be called again (a commit attempt that is
    /// recomputed).
    pub fn for_each_winner<E: From<SpillError>>(
        &mut self,
        mut f: impl FnMut(&KeyHash, Slot, Version) -> Result<(), E>,
    ) -> Result<(), E> {
        self.for_each_key(|key, slot, version, _, _| f(key, slot, version))
    }

    /// Whether a held row lacks a value its change event did not send.
    pub fn has_unsent(&self) -> bool {
        !self.unsent.is_empty()
    }

    /// [`Self::for_each_winner`], by `order_by` with each partition's last
    /// word on the key too ([`Part`]; empty otherwise), and what else the
    /// sync's messages say of it ([`KeyFacts`]).
    pub fn for_each_key<E: From<SpillError>>(
        &mut self,
        mut f: impl FnMut(&KeyHash, Slot, Version, &[Part], &KeyFacts<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.close_segment()?;
        let (unsent, truncate) = (&self.unsent, self.truncated);
        let (unpositioned, topic) = (&self.unpositioned, &self.topic);
        let moved_keys = unsent.moved_keys();
        let mut histories = Vec::new();
        let mut fills = Vec::new();
        self.entries
            .for_each_winner(|key, slot, version, parts, group| {
                if let Some(e) = unordered(group, unpositioned, topic) {
                    return Err(E::from(e));
                }
                if let (Slot::Row(row), false) = (slot, unsent.is_empty()) {
                    let winner = group
                        .iter()
                        .find(|e| e.row == row)
                        .expect("the winner's entry");
                    unsent::fills(group, winner, unsent, truncate, &mut fills);
                } else {
                    fills.clear();
                }
                if moved_keys.contains(key) {
                    histories.push((*key, group.to_vec()));
                }
                let facts = KeyFacts {
                    had_row: entries::had_row(group),
                    fills: &fills,
                };
                f(key, slot, version, parts, &facts)
            })?;
        for (key, group) in histories {
            self.unsent.keep_history(key, &group);
        }
        Ok(())
    }

    /// Where the value of `column` of key `from` before `at` comes from:
    /// a row that moved from that key by a primary-key change takes it
    /// (see [`FillFrom::Moved`]; call after [`Self::for_each_key`]).
    pub fn moved_value(&self, from: &KeyHash, at: Version, column: &str) -> FillFrom {
        self.unsent.moved_value(from, at, column, self.truncated)
    }

    /// The held rows cut into at most `parts` runs of whole files, in
    /// arrival order, with about as many rows each: run `i` holds rows
    /// before run `i + 1`'s. Read back from disk; call
    /// [`Self::for_each_winner`] (which closes the last file) first.
    pub fn parts(&self, parts: usize) -> Vec<HeldRows> {
        let parts = parts.clamp(1, self.segments.len().max(1));
        let mut out: Vec<HeldRows> = Vec::with_capacity(parts);
        let mut taken = 0u64;
        for segment in &self.segments {
            // Part of a file by the rows before its middle.
            let middle = taken + u64::from(segment.rows) / 2;
            let part = (middle * parts as u64 / u64::from(self.rows.max(1))) as usize;
            let part = part.min(parts - 1);
            if out.len() <= part {
                out.push(HeldRows::default());
            }
            out.last_mut()
                .expect("pushed")
                .segments
                .push(segment.clone());
            taken += u64::from(segment.rows);
        }
        out
    }

    /// The folder of this buffer's files.
    pub fn dir(&self) -> &Path {
        self.folder.path()
    }
}

/// A run of held rows' files (see [`UpsertBuffer::parts`]); the files
/// stay the buffer's, which removes them when dropped.
#[derive(Debug, Default)]
pub struct HeldRows {
    segments: Vec<Segment>,
}

impl HeldRows {
    /// The rows, batch by batch in arrival order, each with the row number
    /// of its first row.
    pub fn batches(
        &self,
    ) -> impl Iterator<Item = Result<(u32, HeldBatch), SpillError>> + Send + '_ {
        self.segments.iter().flat_map(Segment::batches)
    }
}

/// Held rows as read back (see [`winning_rows`]).
pub struct HeldBatch {
    batch: RecordBatch,
    shape: Arc<HeldShape>,
}

impl HeldBatch {
    /// The rows `rows` of this batch (whose first row is `first_row`;
    /// ascending) as they were decoded.
    pub fn take_rows(&self, first_row: u32, rows: &[u32]) -> Result<RecordBatch, SpillError> {
        let indices =
            arrow_array::UInt32Array::from_iter_values(rows.iter().map(|r| r - first_row));
        let taken = arrow_select::take::take_record_batch(&self.batch, &indices)
            .map_err(SpillError::arrow(None))?;
        let ops = StringArray::from(vec!["c"; rows.len()]);
        self.shape.restore(&taken, Arc::new(ops))
    }

    /// The held row numbers this batch covers, when its first is `first_row`.
    pub fn row_range(&self, first_row: u32) -> std::ops::Range<u32> {
        first_row..first_row + self.batch.num_rows() as u32
    }
}

impl Segment {
    /// The file's batches, each with the row number of its first row.
    fn batches(
        &self,
    ) -> Box<dyn Iterator<Item = Result<(u32, HeldBatch), SpillError>> + Send + '_> {
        let reader = File::open(&self.path)
            .map_err(|e| SpillError::io(&self.path, e))
            .and_then(|f| {
                StreamReader::try_new(BufReader::with_capacity(1 << 20, f), None)
                    .map_err(|e| SpillError::file(&self.path, e))
            });
        let mut next_row = self.first_row;
        match reader {
            Err(e) => Box::new(std::iter::once(Err(e))),
            Ok(reader) => Box::new(reader.map(move |batch| {
                let batch = batch.map_err(|e| SpillError::file(&self.path, e))?;
                let first = next_row;
                next_row += batch.num_rows() as u32;
                let shape = Arc::clone(&self.shape);
                Ok((first, HeldBatch { batch, shape }))
            })),
        }
    }
}

impl Drop for UpsertBuffer {
    fn drop(&mut self) {
        // The open file first; the folder goes with the field.
        self.open = None;
    }
}

/// A set of held row numbers: one bit per held row (1.2 MiB for 10
/// million rows), set in key order, so at random.
#[derive(Debug, Clone)]
pub struct RowSet {
    words: Vec<u64>,
}

impl RowSet {
    /// An empty set of rows `0..rows`.
    pub fn new(rows: u32) -> Self {
        RowSet {
            words: vec![0; (rows as usize).div_ceil(64)],
        }
    }

    /// Adds `row` (below the `rows` the set was made for).
    pub fn insert(&mut self, row: u32) {
        self.words[row as usize / 64] |= 1 << (row % 64);
    }

    /// Whether `row` is in the set.
    pub fn contains(&self, row: u32) -> bool {
        self.words
            .get(row as usize / 64)
            .is_some_and(|w| w & (1 << (row % 64)) != 0)
    }

    /// Whether any row of `rows` is in the set.
    pub fn any_in(&self, rows: std::ops::Range<u32>) -> bool {
        rows.into_iter().any(|r| self.contains(r))
    }

    /// The set's 64-row words, lowest rows first.
    pub fn words(&self) -> &[u64] {
        &self.words
    }
}

/// The winning rows of `held` (whose first row is `first_row`) as they
/// were decoded, with `_op_type` "u" for rows in `updates` and "c" for the
/// others; `None` when no row of it wins.
pub fn winning_rows(
    held: &HeldBatch,
    first_row: u32,
    winners: &RowSet,
    updates: &RowSet,
) -> Result<Option<RecordBatch>, SpillError> {
    let batch = &held.batch;
    let end = first_row + batch.num_rows() as u32;
    if !winners.any_in(first_row..end) {
        return Ok(None);
    }
    let mask: BooleanArray = (first_row..end)
        .map(|r| Some(winners.contains(r)))
        .collect();
    let filtered = filter_record_batch(batch, &mask).map_err(SpillError::arrow(None))?;
    let ops: StringArray = (first_row..end)
        .filter(|r| winners.contains(*r))
        .map(|r| Some(if updates.contains(r) { "u" } else { "c" }))
        .collect();
    held.shape.restore(&filtered, Arc::new(ops)).map(Some)
}
#[cfg(test)]
mod tests;
