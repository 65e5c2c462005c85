//! One drain thread's work: read a chunk of a table's partitions and decode
//! each message straight into Arrow batches. A message with new fields
//! grows the table's shared columns and is decoded again; an invalid one
//! is handled as the stream's `on_invalid` says; a tombstone on a
//! `_kafka_key` upsert stream becomes a delete.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use topicberg_core::config::{ChangeEvents, OnTruncate};

use arrow_array::RecordBatch;
use tokio::sync::mpsc;
use topicberg_core::config::OnInvalid;
use topicberg_core::{
    kafka_key_olake_id, BatchDecoder, DecodeError, DecodeErrorKind, DecoderConfigError,
    DecoderOptions, DedupKeys, IdMode, RegistryValues, SourceRecord, UnsentValue, ValueFormat,
};
use topicberg_kafka::{
    drain_checked, DrainError, DrainSettings, DrainedPartition, KafkaConnection, PartitionRange,
};

use super::evolve::{ColumnsWanted, EvolvingColumns, Refused};
use super::failure::{DrainFailure, SinkError};
use super::invalid::{is_invalid, DeadRecord, SkipLog};
use super::progress::{ChunkReads, SyncProgress, TableProgress};
use super::report::ChangeOperations;
use super::upsert::{parse_key_hash, KeyHash, Version};

/// Upsert settings of a table.
#[derive(Clone)]
pub struct UpsertInput {
    /// The dedup key (`_kafka_key` alone: tombstones delete).
    pub keys: DedupKeys,
    /// Where the sync's messages are held until the drain ends.
    pub spill_dir: std::path::PathBuf,
    /// The stream's `order_by` column.
    pub order_by: Option<String>,
}

impl UpsertInput {
    /// Whether the key has a payload field (not only the message key's).
    pub fn keys_in_payload(&self) -> bool {
        match &self.keys {
            DedupKeys::KafkaKey => false,
            DedupKeys::Columns(names) => names.iter().any(|n| {
                n != topicberg_core::columns::KAFKA_KEY
                    && !n.starts_with(topicberg_core::decode::KEY_FIELD_PREFIX)
            }),
        }
    }
}

/// What drain threads send to the file writers.
pub(super) enum Item {
    /// Decoded rows of table `.0`, decoded with columns version `.1`, and
    /// the values its change events did not send (written as nulls).
    Batch(usize, u64, RecordBatch, Vec<UnsentValue>),
    /// A tombstone of a `_kafka_key` upsert table.
    Tombstone(usize, KeyHash, Version),
    /// A truncate of the source table (a change event): every row before
    /// it goes.
    Truncate(usize, Version),
    /// An invalid message for the dead-letter table.
    Dead(usize, Box<DeadRecord>),
}

/// Partitions of one table read by one thread; or of a route's tables
/// (`routed`: their indices), each message going to the table it names.
pub(super) struct Chunk {
    pub(super) table: usize,
    pub(super) ranges: Vec<PartitionRange>,
    pub(super) routed: Option<Arc<[usize]>>,
}

/// What the drain threads share about one table.
pub(super) struct TableShared {
    pub(super) topic: String,
    /// What was read of each planned partition.
    pub(super) progress: Arc<TableProgress>,
    pub(super) columns: Mutex<EvolvingColumns>,
    pub(super) upsert: Option<UpsertInput>,
    pub(super) on_invalid: OnInvalid,
    pub(super) payload_fields: Option<Arc<HashSet<String>>>,
    pub(super) registry: Option<Arc<RegistryValues>>,
    pub(super) key_format: ValueFormat,
    /// Whether values are change events (`change_events`).
    pub(super) change_events: topicberg_core::config::ChangeEvents,
    /// What a truncate event does (`on_truncate`).
    pub(super) on_truncate: topicberg_core::config::OnTruncate,
    /// Whether rows keep the message's headers (`kafka_headers`).
    pub(super) kafka_headers: bool,
    /// Whether deleted rows are kept, marked (`soft_deletes`).
    pub(super) soft_deletes: bool,
    /// See `TableInput::keep_unsent`.
    pub(super) keep_unsent: bool,
    /// The partitions planned (a routed table's cut of its route's read).
    pub(super) ranges: Vec<PartitionRange>,
    /// The route this table is one of, if any.
    pub(super) route: Option<Arc<super::route_group::RouteGroup>>,
    /// The table's name (what a routed message names).
    pub(super) name: String,
    /// Kafka tombstones passed on a change stream keyed by payload fields,
    /// and the delete events read: more of the first means deletes that
    /// reached the topic as tombstones only (a flattened stream in
    /// `tombstone` mode), which such a stream cannot apply.
    pub(super) passed_tombstones: AtomicU64,
    /// See `passed_tombstones`.
    pub(super) delete_events: AtomicU64,
    pub(super) failed: AtomicBool,
    pub(super) skipped: AtomicU64,
    /// A change stream's events by operation (see [`ChangeTally`]).
    pub(super) changes: ChangeTally,
}

/// A change stream's events by operation, added to by every chunk once a
/// batch: `created`, `read`, `updated`, `deleted`, `truncated`,
/// `unstated` in [`ChangeOperations`]' order.
#[derive(Default)]
pub(super) struct ChangeTally([AtomicU64; 6]);

impl ChangeTally {
    fn add(&self, counts: &mut [u64; 6]) {
        for (total, n) in self.0.iter().zip(counts.iter_mut()) {
            if *n > 0 {
                total.fetch_add(*n, Ordering::Relaxed);
                *n = 0;
            }
        }
    }

    /// The totals.
    pub(super) fn operations(&self) -> ChangeOperations {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        ChangeOperations {
            created: n(0),
            read: n(1),
            updated: n(2),
            deleted: n(3),
            truncated: n(4),
            unstated: n(5),
        }
    }
}

/// The [`ChangeTally`] slot of a row's operation.
fn slot_of(op: Option<&str>) -> usize {
    match op {
        Some("c") => 0,
        Some("r") => 1,
        Some("u") => 2,
        Some("d") => 3,
        Some("t") => 4,
        _ => 5,
    }
}

/// What every drain thread shares.
pub(super) struct Shared {
    pub(super) connection: KafkaConnection,
    pub(super) settings: DrainSettings,
    pub(super) tables: Vec<TableShared>,
    pub(super) queue: Mutex<VecDeque<Chunk>>,
    pub(super) batch_rows: usize,
    pub(super) olake_timestamp_micros: i64,
    pub(super) progress: Arc<SyncProgress>,
    /// Set when the sync is cancelled: every drain stops at its next message.
    pub(super) cancel: Arc<AtomicBool>,
}

impl Shared {
    /// Whether the sync was cancelled: every drain stops at its next message.
    pub(super) fn check_cancelled(&self) -> Result<(), SinkError> {
        match self.cancel.load(Ordering::Relaxed) {
            true => Err(SinkError::Cancelled),
            false => Ok(()),
        }
    }
}

/// A chunk's table, its ranges and how it ended.
pub(super) type ChunkResult = (
    usize,
    Vec<PartitionRange>,
    Result<Vec<DrainedPartition>, DrainFailure>,
);

/// Attempts at one message: evolving the columns or finishing a full batch
/// first each take one.
const ATTEMPTS_PER_MESSAGE: usize = 4;

/// Rows of a batch decoded before it reserves room for the rest (enough to
/// project the width of its strings; a batch smaller than this grows as
/// it goes).
const RESERVE_AFTER_ROWS: usize = 1_024;

pub(super) fn drain_chunk(
    shared: &Shared,
    tx: &mpsc::Sender<Item>,
    chunk: &Chunk,
) -> Result<Vec<DrainedPartition>, DrainFailure> {
    let mut writer = ChunkWriter::new(shared, tx, chunk.table, &chunk.ranges)?;
    let cancelled = || shared.check_cancelled();
    let drained = drain_checked(
        &shared.connection,
        &chunk.ranges,
        &shared.settings,
        cancelled,
        |record| writer.take(record),
    );
    writer.finish(drained)
}

/// One chunk's decoding: the decoder for the table's current columns, and
/// what goes to the file writer (batches, tombstones, dead letters).
pub(super) struct ChunkWriter<'a> {
    shared: &'a Shared,
    table: &'a TableShared,
    index: usize,
    tx: &'a mpsc::Sender<Item>,
    options: DecoderOptions,
    decoder: BatchDecoder,
    /// The columns version `decoder` decodes into.
    version: u64,
    /// Tombstones delete rows (a `_kafka_key` upsert stream).
    tombstones_delete: bool,
    /// The `after_records:<n>` crash hook.
    kill_after: Option<u64>,
    skips: SkipLog,
    /// Rows not yet added to the shared progress.
    unpublished: u64,
    /// Messages planned for the chunk and not yet in a sent batch: what
    /// the batch being decoded reserves room for (up to `batch_rows`).
    planned_left: usize,
    /// Offsets and bytes read, per range, not yet added to the table's.
    reads: ChunkReads,
    /// Change events by operation not yet added to the table's tally.
    changes: [u64; 6],
}

impl<'a> ChunkWriter<'a> {
    /// The writer of table `index` reading `ranges`.
    pub(super) fn new(
        shared: &'a Shared,
        tx: &'a mpsc::Sender<Item>,
        index: usize,
        ranges: &[PartitionRange],
    ) -> Result<Self, DecoderConfigError> {
        let table = &shared.tables[index];
        table.progress.set_status("reading");
        let upsert = table.upsert.as_ref();
        let mut options = DecoderOptions::append(shared.olake_timestamp_micros);
        if let Some(u) = upsert {
            options.id_mode = IdMode::Upsert {
                key_columns: u.keys.columns(),
            };
        }
        options.payload_fields = table.payload_fields.clone();
        options.registry = table.registry.clone();
        options.key_format = table.key_format;
        options.change_events = table.change_events;
        options.kafka_headers = table.kafka_headers;
        options.soft_deletes = table.soft_deletes;
        options.events_as_rows = upsert.is_none() && table.change_events != ChangeEvents::None;
        options.truncates_as_rows =
            options.events_as_rows && table.on_truncate == OnTruncate::EmptyTable;
        // An upsert table fills a value the event did not send from the
        // key's previous row (`upsert.rs`).
        options.keep_unsent = table.keep_unsent;
        let (columns, version) = table.columns.lock().expect("columns").current();
        let decoder = BatchDecoder::new(&columns, options.clone())?;
        Ok(Self {
            shared,
            table,
            index,
            tx,
            options,
            decoder,
            version,
            tombstones_delete: upsert.is_some_and(|u| u.keys == DedupKeys::KafkaKey),
            kill_after: crate::hooks::hooks().fault_after_records(),
            skips: SkipLog::default(),
            unpublished: 0,
            planned_left: ranges
                .iter()
                .map(|r| usize::try_from(r.end - r.start).unwrap_or(0))
                .sum(),
            reads: ChunkReads::new(&table.progress, ranges),
            changes: [0; 6],
        })
    }

    /// Deletes the row whose `_olake_id` is `olake_id` (32 hex digits),
    /// at `record`'s version.
    fn send_delete(&self, olake_id: &str, record: &SourceRecord<'_>) -> Result<(), SinkError> {
        let hash = parse_key_hash(olake_id).expect("32 hex digits");
        self.send(Item::Tombstone(self.index, hash, self.version_of(record)))
    }

    fn send(&self, item: Item) -> Result<(), SinkError> {
        self.tx
            .blocking_send(item)
            .map_err(|_| SinkError::WriterGone)
    }

    fn send_batch(&mut self) -> Result<(), SinkError> {
        let batch = self.decoder.finish();
        self.planned_left = self.planned_left.saturating_sub(batch.num_rows());
        let unsent = self.decoder.take_unsent();
        self.send(Item::Batch(self.index, self.version, batch, unsent))
    }

    fn publish(&mut self) {
        let records = &self.shared.progress.records;
        records.fetch_add(self.unpublished, Ordering::Relaxed);
        self.unpublished = 0;
        self.table.changes.add(&mut self.changes);
    }

    /// Counts a change event of operation `op` (`None`: a row whose event
    /// names none); nothing on a table that does not read change events.
    fn count_change(&mut self, op: Option<&str>) {
        if self.table.change_events != ChangeEvents::None {
            self.changes[slot_of(op)] += 1;
        }
    }

    /// One message: decoded into the batch (or a tombstone, or invalid as
    /// `on_invalid` says); a full batch goes to the writer.
    pub(super) fn take(&mut self, record: &SourceRecord<'_>) -> Result<(), SinkError> {
        if self.shared.cancel.load(Ordering::Relaxed) {
            return Err(SinkError::Cancelled);
        }
        if self.table.failed.load(Ordering::Relaxed) {
            return Err(SinkError::Aborted);
        }
        let bytes = record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len);
        self.reads.note(record.partition, record.offset, bytes);
        match self.decode(record)? {
            Decoded::Row if self.decoder.len() == RESERVE_AFTER_ROWS => {
                let rows = self.planned_left.min(self.shared.batch_rows);
                self.decoder.reserve_rows(rows);
            }
            Decoded::Row => {}
            Decoded::Tombstone => return Ok(()),
            Decoded::Invalid(e) => return self.invalid(record, e),
        }
        // Counted here, published to the shared progress once a batch
        // (no shared-cache-line traffic per message).
        self.unpublished += 1;
        if let Some(n) = self.kill_after {
            let seen = self.shared.progress.records.load(Ordering::Relaxed) + self.unpublished;
            if seen >= n {
                crate::hooks::kill_self();
            }
        }
        if self.decoder.len() >= self.shared.batch_rows {
            self.publish();
            self.send_batch()?;
            self.skips.flush(&self.table.topic);
        }
        Ok(())
    }

    /// Decodes one message, sending a full batch or moving to grown
    /// columns first when the decoder asks (at most
    /// [`ATTEMPTS_PER_MESSAGE`] attempts).
    fn decode(&mut self, record: &SourceRecord<'_>) -> Result<Decoded, SinkError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let e = match self.decoder.append(record) {
                Ok(()) => {
                    self.count_change(self.decoder.change_op());
                    // A change event that moved its row to another key.
                    if let Some(old) = self.decoder.take_replaced_key() {
                        self.send_delete(&old, record)?;
                    }
                    return Ok(Decoded::Row);
                }
                Err(e) => e,
            };
            let last = attempt >= ATTEMPTS_PER_MESSAGE;
            if e.kind == DecodeErrorKind::BatchFull && !last && !self.decoder.is_empty() {
                self.send_batch()?;
                continue;
            }
            // A delete event (not the Kafka tombstone after it), a truncate.
            let deleted = e.kind == DecodeErrorKind::Tombstone && record.value.is_some();
            if deleted || matches!(e.kind, DecodeErrorKind::DeleteKey { .. }) {
                self.count_change(Some("d"));
            } else if e.kind == DecodeErrorKind::Truncate {
                self.count_change(Some("t"));
            }
            // Soft deletes: the delete event kept the row, marked; its
            // tombstone must not remove it.
            if e.kind == DecodeErrorKind::Tombstone && self.decoder.keeps_deleted_rows() {
                return Ok(Decoded::Tombstone);
            }
            if e.kind == DecodeErrorKind::Tombstone && self.decoder.key_from_message_key() {
                let id = match self.decoder.key_olake_id(record) {
                    Ok(id) => id,
                    Err(e) => return Ok(Decoded::Invalid(e)),
                };
                self.send_delete(&id, record)?;
                return Ok(Decoded::Tombstone);
            }
            if let DecodeErrorKind::DeleteKey { olake_id } = &e.kind {
                self.table.delete_events.fetch_add(1, Ordering::Relaxed);
                self.send_delete(olake_id, record)?;
                return Ok(Decoded::Tombstone);
            }
            // A change stream keyed by payload fields: the Kafka tombstone
            // after a delete names no row; its delete event did the work
            // (counted: more tombstones than delete events is warned about,
            // see `TableShared::passed_tombstones`).
            if e.kind == DecodeErrorKind::Tombstone
                && self.table.change_events != ChangeEvents::None
                && self.decoder.key_in_payload()
            {
                self.table.passed_tombstones.fetch_add(1, Ordering::Relaxed);
                return Ok(Decoded::Tombstone);
            }
            if e.kind == DecodeErrorKind::Truncate
                && self.table.on_truncate == OnTruncate::EmptyTable
            {
                self.send(Item::Truncate(self.index, self.version_of(record)))?;
                return Ok(Decoded::Tombstone);
            }
            if self.tombstones_delete && e.kind == DecodeErrorKind::Tombstone {
                if let Some(key) = record.key {
                    self.send_delete(&kafka_key_olake_id(key), record)?;
                    return Ok(Decoded::Tombstone);
                }
            }
            if let Some(wanted) = ColumnsWanted::from_error(&e).filter(|_| !last) {
                let evolved = self.table.columns.lock().expect("columns").apply(&wanted);
                match evolved {
                    Ok((columns, latest)) => {
                        if !self.decoder.is_empty() {
                            self.send_batch()?;
                        }
                        self.decoder = BatchDecoder::new(&columns, self.options.clone())?;
                        self.version = latest;
                        continue;
                    }
                    // A field that cannot be named, or too many columns:
                    // the message is invalid, named as the decoder would.
                    Err(Refused::Invalid { field, kind }) => {
                        return Ok(Decoded::Invalid(DecodeError {
                            topic: record.topic.to_owned(),
                            partition: record.partition,
                            offset: record.offset,
                            field,
                            kind,
                        }));
                    }
                    Err(
                        Refused::NoColumn(_) | Refused::NotWidening { .. } | Refused::Columns(_),
                    ) => {}
                }
            }
            return Ok(Decoded::Invalid(e));
        }
    }

    /// A message that did not decode: the stream's `on_invalid` for an
    /// invalid message, a failure for anything else.
    fn invalid(&mut self, record: &SourceRecord<'_>, e: DecodeError) -> Result<(), SinkError> {
        if !is_invalid(&e) {
            return Err(SinkError::Decode(e));
        }
        match self.table.on_invalid {
            OnInvalid::Fail => return Err(SinkError::Decode(e)),
            OnInvalid::Skip => {
                self.skips.record(&e);
                self.table.skipped.fetch_add(1, Ordering::Relaxed);
            }
            OnInvalid::Dlq => {
                let dead = Box::new(DeadRecord::new(record, &e));
                self.send(Item::Dead(self.index, dead))?
            }
        }
        Ok(())
    }

    /// A tombstone's (or truncate's) version, to order it against the
    /// key's rows: by its timestamp; with `order_by` by none (it has no
    /// value); on a change-event table (rows ordered by `_cdc_lsn`) by the
    /// delete or truncate event's place in the source's log, or its
    /// timestamp when it has none (as its rows); a Kafka tombstone there
    /// has none, so it counts as the delete before it on its partition.
    fn version_of(&self, record: &SourceRecord<'_>) -> Version {
        let ordered_by_field = self
            .table
            .upsert
            .as_ref()
            .is_some_and(|u| u.order_by.is_some());
        let timestamp = if ordered_by_field {
            // A tombstone has no `order_by` value.
            i64::MIN
        } else if self.decoder.has_change_lsn() && record.value.is_none() {
            // A Kafka tombstone: it counts as the delete before it.
            i64::MIN
        } else if let Some(lsn) = self
            .decoder
            .change_lsn()
            .filter(|_| self.decoder.has_change_lsn())
        {
            lsn
        } else {
            record.timestamp_ms.map_or(i64::MIN, |ms| ms * 1000)
        };
        Version {
            timestamp,
            partition: record.partition,
            offset: record.offset,
        }
    }

    /// The chunk's end: the last rows sent, the drain's outcome as the
    /// chunk's result.
    pub(super) fn finish(
        mut self,
        drained: Result<Vec<DrainedPartition>, DrainError<SinkError>>,
    ) -> Result<Vec<DrainedPartition>, DrainFailure> {
        self.skips.flush(&self.table.topic);
        self.publish();
        if drained.is_ok() {
            self.reads.finish();
        } else {
            self.reads.publish();
        }
        match drained {
            Ok(parts) => {
                if !self.decoder.is_empty() {
                    let batch = self.decoder.finish();
                    let unsent = self.decoder.take_unsent();
                    self.tx
                        .blocking_send(Item::Batch(self.index, self.version, batch, unsent))
                        .map_err(|_| DrainFailure::WriterGone)?;
                }
                Ok(parts)
            }
            Err(e) => Err(DrainFailure::Read(e)),
        }
    }
}

/// What became of one message.
enum Decoded {
    /// A row in the batch.
    Row,
    /// A tombstone (or a truncate) sent to the writer.
    Tombstone,
    /// Not decodable: the error names the message and field.
    Invalid(DecodeError),
}
