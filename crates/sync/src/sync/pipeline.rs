//! The hot path: partitions drained in parallel threads, each decoding
//! straight into Arrow record batches, which flow to one data file writer
//! per table while fetching goes on.
//!
//! ```text
//!  thread 1: drain(topic A, p0,p2) -> BatchDecoder -> batch ─┐
//!  thread 2: drain(topic A, p1,p3) -> BatchDecoder -> batch ─┼─> channel -> DataFileWriter(A) -> S3
//!  thread 3: drain(topic B, p0)    -> BatchDecoder -> batch ─┘           -> DataFileWriter(B) -> S3
//! ```

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iceberg::spec::DataFile;
use tokio::sync::mpsc;
use topicberg_core::config::{ChangeEvents, OnInvalid};
use topicberg_core::{RegistryValues, TableColumns, ValueFormat};

pub use super::chunk::UpsertInput;
use super::chunk::{drain_chunk, Chunk, ChunkResult, Item, Shared, TableShared};
use super::chunk_route::drain_routed;
use super::evolve::EvolvingColumns;
use super::failure::DrainFailure;
use super::invalid::DeadRecord;
use super::progress::{SyncProgress, TableProgress};
use super::split::{merge_pieces, min_chunk_messages, split_ranges};
use super::upsert::UpsertBuffer;
use crate::columns::iceberg_columns;
use topicberg_iceberg::{DataFileWriter, Destination, TableHandle};
use topicberg_kafka::{DrainSettings, DrainedPartition, KafkaConnection, PartitionRange};

/// One table's share of the drain.
pub struct TableInput {
    /// The topic.
    pub topic: String,
    /// Upsert settings; `None` for append mode.
    pub upsert: Option<UpsertInput>,
    /// The table's columns, with the loaded table's field ids.
    pub columns: TableColumns,
    /// The loaded table.
    pub handle: TableHandle,
    /// The partitions to read (non-empty ranges only).
    pub ranges: Vec<PartitionRange>,
    /// What to do with a message that cannot become a row.
    pub on_invalid: OnInvalid,
    /// The stream's `columns` list, if set.
    pub payload_fields: Option<Arc<HashSet<String>>>,
    /// `sync.max_columns`: the table never grows past it.
    pub max_columns: usize,
    /// Registry-framed values; `None`: JSON.
    pub registry: Option<Arc<RegistryValues>>,
    /// How the message keys are encoded (`key_format`).
    pub key_format: ValueFormat,
    /// Whether values are change events (`change_events`).
    pub change_events: topicberg_core::config::ChangeEvents,
    /// What a truncate event does (`on_truncate`).
    pub on_truncate: topicberg_core::config::OnTruncate,
    /// Whether rows keep the message's headers (`kafka_headers`).
    pub kafka_headers: bool,
    /// Whether deleted rows are kept, marked (`soft_deletes`).
    pub soft_deletes: bool,
    /// Whether a value a change event did not send is kept for the commit
    /// to fill from the key's previous row (an upsert table, not a
    /// writer's round among workers: its staged rows cannot carry them).
    pub keep_unsent: bool,
    /// The route this table is one of (`route.rs`): the route's tables
    /// share one read of the topic.
    pub route: Option<Arc<super::route_group::RouteGroup>>,
}

/// One table's outcome.
pub struct TableOutput {
    /// Data files written (not yet committed); append mode. On error: the
    /// files written before it, to delete.
    pub data_files: Vec<DataFile>,
    /// The sync's messages held for deduplication; upsert mode.
    pub upsert: Option<UpsertBuffer>,
    /// Where each drained partition ended.
    pub drained: Vec<DrainedPartition>,
    /// The first failure; nothing of this table may be committed.
    pub error: Option<DrainFailure>,
    /// The table to commit through: with the columns this sync added or
    /// widened pending, when it did.
    pub handle: TableHandle,
    /// Columns added or widened, in words.
    pub schema_changes: Vec<String>,
    /// `(field, column)` for each payload field stored under another name.
    pub renamed: Vec<(String, String)>,
    /// Invalid messages for the dead-letter table (`on_invalid = "dlq"`).
    pub dead: Vec<DeadRecord>,
    /// Invalid messages skipped (`on_invalid = "skip"`).
    pub skipped: u64,
    /// A change stream's events read, by operation (`None`: the table
    /// does not read change events).
    pub changes: Option<super::report::ChangeOperations>,
}

/// Drains every table's ranges with up to `threads` parallel consumers and
/// writes the rows into data files. Returns one output per input, in order.
#[allow(clippy::too_many_arguments)]
pub async fn drain_and_write(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    destination: &Destination,
    tables: &[TableInput],
    threads: usize,
    batch_rows: usize,
    olake_timestamp_micros: i64,
    progress: Arc<SyncProgress>,
    counters: Vec<Arc<TableProgress>>,
    cancel: Arc<AtomicBool>,
) -> Vec<TableOutput> {
    let queue = chunks(tables, threads);
    let workers = queue.len().min(threads.max(1));
    let shared = Arc::new(Shared {
        connection: connection.clone(),
        settings: settings.clone(),
        tables: tables
            .iter()
            .zip(counters)
            .map(|(t, counters)| TableShared::new(t, counters))
            .collect(),
        queue: Mutex::new(queue),
        batch_rows: batch_rows.max(1),
        olake_timestamp_micros,
        progress,
        cancel,
    });
    let (tx, rx) = mpsc::channel::<Item>(workers.max(1));
    let results: Arc<Mutex<Vec<ChunkResult>>> = Arc::default();
    // The threads log inside the caller's span (a service run's log is
    // captured by the `run_id` of its span).
    let span = tracing::Span::current();
    let threads: Vec<_> = (0..workers)
        .map(|_| {
            let (shared, tx) = (Arc::clone(&shared), tx.clone());
            let (results, span) = (Arc::clone(&results), span.clone());
            std::thread::spawn(move || {
                let _entered = span.enter();
                worker(&shared, &tx, &results)
            })
        })
        .collect();
    drop(tx);

    let mut sinks: Vec<TableSink> = tables.iter().map(TableSink::new).collect();
    receive(rx, &mut sinks, &shared, destination).await;
    let joined = tokio::task::spawn_blocking(move || {
        for t in threads {
            let _ = t.join();
        }
    })
    .await;
    if joined.is_err() {
        for sink in sinks.iter_mut().filter(|s| s.error.is_none()) {
            sink.error = Some(DrainFailure::ThreadPanicked);
        }
    }
    let results = std::mem::take(&mut *results.lock().expect("results"));
    let pieces = drained_pieces(results, &mut sinks, tables.len());
    finish_outputs(sinks, &shared, pieces).await
}

/// A drain thread: takes chunks until none are left.
pub(super) fn worker(shared: &Shared, tx: &mpsc::Sender<Item>, results: &Mutex<Vec<ChunkResult>>) {
    loop {
        if shared.cancel.load(Ordering::Relaxed) {
            return;
        }
        let Some(chunk) = shared.queue.lock().expect("queue").pop_front() else {
            return;
        };
        if let Some(members) = &chunk.routed {
            let routed = drain_routed(shared, tx, &chunk.ranges, members);
            for (index, _, result) in &routed {
                if result.is_err() {
                    shared.tables[*index].failed.store(true, Ordering::Relaxed);
                }
            }
            results.lock().expect("results").extend(routed);
            continue;
        }
        let index = chunk.table;
        let result = drain_chunk(shared, tx, &chunk);
        if result.is_err() {
            shared.tables[index].failed.store(true, Ordering::Relaxed);
        }
        results
            .lock()
            .expect("results")
            .push((index, chunk.ranges, result));
    }
}

/// Every table's offsets cut into at most `threads` chunks of about equal
/// size; every chunk reads one topic (see `drain`).
fn chunks(tables: &[TableInput], threads: usize) -> VecDeque<Chunk> {
    let min_chunk = min_chunk_messages();
    let mut queue = VecDeque::new();
    for (index, table) in tables.iter().enumerate() {
        if let Some(group) = &table.route {
            let members: Vec<usize> = (0..tables.len())
                .filter(|&i| {
                    tables[i]
                        .route
                        .as_ref()
                        .is_some_and(|g| Arc::ptr_eq(g, group))
                })
                .collect();
            if members[0] == index {
                let union = route_union(members.iter().map(|&i| &tables[i].ranges));
                let members: Arc<[usize]> = members.into();
                let chunks = split_ranges(&union, threads, min_chunk);
                queue.extend(chunks.into_iter().map(|ranges| Chunk {
                    table: index,
                    ranges,
                    routed: Some(Arc::clone(&members)),
                }));
            }
            continue;
        }
        let chunks = split_ranges(&table.ranges, threads, min_chunk);
        queue.extend(chunks.into_iter().map(|ranges| Chunk {
            table: index,
            ranges,
            routed: None,
        }));
    }
    queue
}

/// The writer's loop: every batch, tombstone and dead letter the drain
/// threads send goes to its table's sink, until every thread is done.
async fn receive(
    mut rx: mpsc::Receiver<Item>,
    sinks: &mut [TableSink],
    shared: &Shared,
    destination: &Destination,
) {
    while let Some(item) = rx.recv().await {
        let index = match &item {
            Item::Batch(index, ..)
            | Item::Tombstone(index, ..)
            | Item::Truncate(index, _)
            | Item::Dead(index, _) => *index,
        };
        let sink = &mut sinks[index];
        if sink.error.is_none() && shared.cancel.load(Ordering::Relaxed) {
            // Cancelled: write no more; the files written are deleted.
            sink.error = Some(DrainFailure::Cancelled);
        }
        if sink.error.is_some() {
            continue;
        }
        let result = match item {
            Item::Tombstone(_, key, version) => match sink.buffer.as_mut() {
                Some(buffer) => buffer.add_tombstone(key, version).map_err(Into::into),
                None => Ok(()),
            },
            Item::Truncate(_, version) => {
                if let Some(buffer) = sink.buffer.as_mut() {
                    buffer.truncate(version);
                }
                Ok(())
            }
            Item::Dead(_, dead) => {
                sink.dead.push(*dead);
                Ok(())
            }
            Item::Batch(_, version, batch, unsent) => {
                sink.take_batch(destination, &shared.tables[index], version, batch, unsent)
                    .await
            }
        };
        if let Err(e) = result {
            sink.error = Some(e);
            shared.tables[index].failed.store(true, Ordering::Relaxed);
        }
    }
}

/// The chunks' drained partitions, per table (a chunk's failure becomes
/// its table's error).
fn drained_pieces(
    results: Vec<ChunkResult>,
    sinks: &mut [TableSink],
    tables: usize,
) -> Vec<Vec<(PartitionRange, DrainedPartition)>> {
    let mut pieces: Vec<Vec<(PartitionRange, DrainedPartition)>> = vec![Vec::new(); tables];
    for (index, ranges, result) in results {
        match result {
            Ok(parts) => {
                for part in parts {
                    let range = ranges
                        .iter()
                        .find(|r| r.partition == part.partition)
                        .expect("a drained partition is one of the chunk's")
                        .clone();
                    pieces[index].push((range, part));
                }
            }
            Err(e) => {
                sinks[index].error.get_or_insert(e);
            }
        }
    }
    pieces
}

/// Each table's files finished and its output put together.
async fn finish_outputs(
    sinks: Vec<TableSink>,
    shared: &Shared,
    mut pieces: Vec<Vec<(PartitionRange, DrainedPartition)>>,
) -> Vec<TableOutput> {
    let mut outputs = Vec::with_capacity(sinks.len());
    for (index, mut sink) in sinks.into_iter().enumerate() {
        let table = &shared.tables[index];
        warn_of_unkeyed_tombstones(table);
        let (schema_changes, renamed, latest) = {
            let columns = table.columns.lock().expect("columns");
            (
                columns.changes().to_vec(),
                columns.renamed().to_vec(),
                columns.current(),
            )
        };
        let finished = sink.finish(latest).await;
        if let Err(e) = finished {
            sink.error.get_or_insert(e);
        }
        outputs.push(TableOutput {
            data_files: sink.files,
            upsert: sink.buffer,
            drained: merge_pieces(std::mem::take(&mut pieces[index])),
            error: sink.error,
            handle: sink.handle,
            schema_changes,
            renamed,
            dead: sink.dead,
            skipped: table.skipped.load(Ordering::Relaxed),
            changes: (table.change_events != ChangeEvents::None)
                .then(|| table.changes.operations()),
        });
    }
    outputs
}

/// A change stream keyed by payload fields passes Kafka tombstones (they
/// name no row); more of them than delete events means deletes that came
/// as tombstones only (`ExtractNewRecordState` in `tombstone` mode), which
/// such a stream cannot apply: said once per sync.
fn warn_of_unkeyed_tombstones(table: &TableShared) {
    let tombstones = table.passed_tombstones.load(Ordering::Relaxed);
    let delete_events = table.delete_events.load(Ordering::Relaxed);
    if tombstones > delete_events {
        tracing::warn!(
            topic = %table.topic, tombstones, delete_events,
            "tombstones without delete events on a change stream keyed by payload fields: \
             their rows cannot be found and stay; for flattened records set \
             delete.tombstone.handling.mode=rewrite (or rewrite-with-tombstone)"
        );
    }
}

/// The ranges a route's tables read, as one read: per partition from the
/// earliest start among them to the latest end.
fn route_union<'a>(ranges: impl Iterator<Item = &'a Vec<PartitionRange>>) -> Vec<PartitionRange> {
    let mut union: Vec<PartitionRange> = Vec::new();
    for r in ranges.flatten() {
        match union.iter_mut().find(|u| u.partition == r.partition) {
            Some(u) => {
                u.start = u.start.min(r.start);
                u.end = u.end.max(r.end);
            }
            None => union.push(r.clone()),
        }
    }
    union.sort_by_key(|r| r.partition);
    union
}

/// The table's columns as this sync starts growing them: with
/// `_kafka_headers` added when the stream keeps headers and the table
/// lacks them, and `_cdc_op` on a change-event table made before it
/// existed (`_cdc_lsn` is not added: its rows would order by two
/// measures).
fn evolving_columns(t: &TableInput) -> EvolvingColumns {
    let last_column_id = t.handle.metadata().last_column_id();
    let mut columns = EvolvingColumns::new(t.columns.clone(), last_column_id, t.max_columns);
    let wanted = [
        (t.kafka_headers, topicberg_core::columns::KAFKA_HEADERS),
        (
            t.change_events != ChangeEvents::None,
            topicberg_core::columns::CDC_OP,
        ),
    ];
    for (_, name) in wanted.into_iter().filter(|(wanted, _)| *wanted) {
        // Added only when missing, with ids after every one in use: the
        // column list stays valid.
        columns
            .add_metadata_column(name)
            .expect("a new column with new ids");
    }
    columns
}

impl TableShared {
    fn new(t: &TableInput, progress: Arc<TableProgress>) -> Self {
        Self {
            topic: t.topic.clone(),
            progress,
            columns: Mutex::new(evolving_columns(t)),
            upsert: t.upsert.clone(),
            on_invalid: t.on_invalid,
            payload_fields: t.payload_fields.clone(),
            registry: t.registry.clone(),
            key_format: t.key_format,
            change_events: t.change_events,
            on_truncate: t.on_truncate,
            kafka_headers: t.kafka_headers,
            soft_deletes: t.soft_deletes,
            keep_unsent: t.keep_unsent,
            ranges: t.ranges.clone(),
            route: t.route.clone(),
            name: t.handle.name().to_owned(),
            passed_tombstones: AtomicU64::new(0),
            delete_events: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            skipped: AtomicU64::new(0),
            changes: Default::default(),
        }
    }
}

impl TableSink {
    fn new(t: &TableInput) -> Self {
        let buffer = t
            .upsert
            .as_ref()
            .map(|u| {
                let mut buffer = UpsertBuffer::new(&u.spill_dir, u.order_by.as_deref())?;
                buffer.set_topic(&t.topic);
                if t.change_events != ChangeEvents::None && u.keys_in_payload() {
                    buffer.set_deletes_name_rows();
                }
                Ok::<_, super::upsert::SpillError>(buffer)
            })
            .transpose();
        let (buffer, error) = match buffer {
            Ok(buffer) => (buffer, None),
            Err(e) => (None, Some(e.into())),
        };
        Self {
            handle: t.handle.clone(),
            writer: None,
            writer_version: 0,
            files: Vec::new(),
            buffer,
            dead: Vec::new(),
            error,
        }
    }
}

/// The writing side of one table.
struct TableSink {
    /// The table, with the columns this sync added pending once a batch
    /// needed them.
    handle: TableHandle,
    writer: Option<DataFileWriter>,
    /// The columns version `handle` has.
    writer_version: u64,
    /// Files finished so far.
    files: Vec<DataFile>,
    buffer: Option<UpsertBuffer>,
    dead: Vec<DeadRecord>,
    error: Option<DrainFailure>,
}

impl TableSink {
    /// Holds (upsert) or writes (append) a batch; a batch decoded with
    /// newer columns than the open file's first moves the table to them
    /// and starts new files.
    async fn take_batch(
        &mut self,
        destination: &Destination,
        table: &TableShared,
        version: u64,
        batch: arrow_array::RecordBatch,
        unsent: Vec<topicberg_core::UnsentValue>,
    ) -> Result<(), DrainFailure> {
        if let Some(buffer) = self.buffer.as_mut() {
            return Ok(buffer.add_batch_with_unsent(batch, unsent)?);
        }
        if version > self.writer_version {
            let latest = table.columns.lock().expect("columns").current();
            self.evolve(latest)?;
            if let Some(writer) = self.writer.take() {
                let files = writer
                    .finish()
                    .await
                    .map_err(DrainFailure::write("closing data files"))?;
                self.files.extend(files);
            }
        }
        if self.writer.is_none() {
            let writer = destination
                .data_file_writer(&self.handle)
                .await
                .map_err(DrainFailure::write("opening a data file writer"))?;
            self.writer = Some(writer);
        }
        let written = self.writer.as_mut().expect("writer").write(&batch).await;
        written.map_err(|e| {
            self.writer = None;
            DrainFailure::write("writing data files")(e)
        })
    }

    /// Moves the handle to the latest columns (locally; committed with the
    /// snapshot).
    fn evolve(&mut self, (latest, version): (TableColumns, u64)) -> Result<(), DrainFailure> {
        if version > self.writer_version {
            self.handle = self
                .handle
                .with_columns(&iceberg_columns(&latest))
                .map_err(DrainFailure::Evolve)?;
            self.writer_version = version;
        }
        Ok(())
    }

    /// Closes the open file and moves the handle to the final columns
    /// (held upsert batches are fitted to them as they are written). After
    /// an error the open file is still closed, so that it can be deleted.
    async fn finish(&mut self, latest: (TableColumns, u64)) -> Result<(), DrainFailure> {
        if let Some(writer) = self.writer.take() {
            let files = writer
                .finish()
                .await
                .map_err(DrainFailure::write("closing data files"))?;
            self.files.extend(files);
        }
        if self.error.is_some() {
            return Ok(());
        }
        self.evolve(latest)
    }
}

/// How often the progress line is printed.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);
