//! The hot path: partitions drained in parallel threads, each decoding
//! straight into Arrow record batches, which flow to one data file writer
//! per table while fetching goes on.
//!
//! ```text
//!  thread 1: drain(topic A, p0,p2) -> BatchDecoder -> batch ─┐
//!  thread 2: drain(topic A, p1,p3) -> BatchDecoder -> batch ─┼─> channel -> DataFileWriter(A) -> S3
//!  thread 3: drain(topic B, p0)    -> BatchDecoder -> batch ─┘           -> DataFileWriter(B) -> S3
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::RecordBatch;
use iceberg::spec::DataFile;
use tokio::sync::mpsc;
use topicberg_core::{
    kafka_key_olake_id, BatchDecoder, DecodeError, DecodeErrorKind, DecoderOptions, IdMode,
    TableColumns,
};

use super::upsert::{parse_key_hash, KeyHash, UpsertBuffer, Version};
use topicberg_iceberg::{DataFileWriter, IcebergTarget, TableHandle};
use topicberg_kafka::{
    drain, DrainError, DrainSettings, DrainedPartition, KafkaConnection, PartitionRange,
};

/// Upsert settings of a table.
#[derive(Clone)]
pub struct UpsertInput {
    /// The dedup key columns.
    pub key_columns: Vec<String>,
    /// `_kafka_key` is the single dedup key: tombstones delete.
    pub kafka_key_only: bool,
}

/// One table's share of the drain.
pub struct TableInput {
    /// Upsert settings; `None` for append mode.
    pub upsert: Option<UpsertInput>,
    /// The table's columns, with the loaded table's field ids.
    pub columns: TableColumns,
    /// The loaded table.
    pub handle: TableHandle,
    /// The partitions to read (non-empty ranges only).
    pub ranges: Vec<PartitionRange>,
}

/// One table's outcome.
pub struct TableOutput {
    /// Data files written (not yet committed); append mode.
    pub data_files: Vec<DataFile>,
    /// The sync's messages held for deduplication; upsert mode.
    pub upsert: Option<UpsertBuffer>,
    /// Where each drained partition ended.
    pub drained: Vec<DrainedPartition>,
    /// The first failure; nothing of this table may be committed.
    pub error: Option<String>,
}

/// Shared counters for the progress line.
#[derive(Default)]
pub struct Progress {
    /// Records decoded so far.
    pub records: AtomicU64,
    /// Key and value bytes read so far.
    pub bytes: AtomicU64,
}

enum Item {
    Batch(usize, RecordBatch),
    Tombstone(usize, KeyHash, Version),
}

#[derive(Debug, thiserror::Error)]
enum SinkError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("stopped: another part of this table failed")]
    Aborted,
    #[error("the file writer stopped")]
    WriterGone,
}

struct Chunk {
    table: usize,
    ranges: Vec<PartitionRange>,
}

struct Shared {
    connection: KafkaConnection,
    settings: DrainSettings,
    columns: Vec<TableColumns>,
    upsert: Vec<Option<UpsertInput>>,
    failed: Vec<AtomicBool>,
    queue: Mutex<VecDeque<Chunk>>,
    batch_rows: usize,
    olake_timestamp_micros: i64,
    progress: Arc<Progress>,
}

type ChunkResult = (usize, Result<Vec<DrainedPartition>, String>);

/// Drains every table's ranges with up to `threads` parallel consumers and
/// writes the rows into data files. Returns one output per input, in order.
#[allow(clippy::too_many_arguments)]
pub async fn drain_and_write(
    connection: &KafkaConnection,
    settings: &DrainSettings,
    target: &IcebergTarget,
    tables: &[TableInput],
    threads: usize,
    batch_rows: usize,
    olake_timestamp_micros: i64,
    progress: Arc<Progress>,
) -> Vec<TableOutput> {
    let mut queue = VecDeque::new();
    for (index, table) in tables.iter().enumerate() {
        // Split a table's partitions round-robin into at most `threads`
        // chunks; every chunk reads one topic (see `drain`).
        let parts = table.ranges.len().min(threads.max(1));
        let mut chunks: Vec<Vec<PartitionRange>> = vec![Vec::new(); parts];
        for (i, r) in table.ranges.iter().enumerate() {
            chunks[i % parts].push(r.clone());
        }
        queue.extend(chunks.into_iter().map(|ranges| Chunk {
            table: index,
            ranges,
        }));
    }
    let workers = queue.len().min(threads.max(1));
    let shared = Arc::new(Shared {
        connection: connection.clone(),
        settings: settings.clone(),
        columns: tables.iter().map(|t| t.columns.clone()).collect(),
        upsert: tables.iter().map(|t| t.upsert.clone()).collect(),
        failed: tables.iter().map(|_| AtomicBool::new(false)).collect(),
        queue: Mutex::new(queue),
        batch_rows: batch_rows.max(1),
        olake_timestamp_micros,
        progress,
    });
    let (tx, mut rx) = mpsc::channel::<Item>(workers.max(1) * 2);
    let results: Arc<Mutex<Vec<ChunkResult>>> = Arc::default();
    let mut handles = Vec::new();
    for _ in 0..workers {
        let shared = Arc::clone(&shared);
        let tx = tx.clone();
        let results = Arc::clone(&results);
        handles.push(std::thread::spawn(move || worker(&shared, &tx, &results)));
    }
    drop(tx);

    // Writers, created on a table's first batch; upsert tables hold their
    // batches until every message of the sync is known.
    let mut writers: Vec<Option<DataFileWriter>> = tables.iter().map(|_| None).collect();
    let mut buffers: Vec<Option<UpsertBuffer>> = tables
        .iter()
        .map(|t| t.upsert.as_ref().map(|_| UpsertBuffer::default()))
        .collect();
    let mut errors: Vec<Option<String>> = tables.iter().map(|_| None).collect();
    while let Some(item) = rx.recv().await {
        let (index, batch) = match item {
            Item::Tombstone(index, key, version) => {
                if let Some(buffer) = buffers[index].as_mut() {
                    buffer.add_tombstone(key, version);
                }
                continue;
            }
            Item::Batch(index, batch) => (index, batch),
        };
        if errors[index].is_some() {
            continue;
        }
        if let Some(buffer) = buffers[index].as_mut() {
            if let Err(e) = buffer.add_batch(batch) {
                errors[index] = Some(e);
                shared.failed[index].store(true, Ordering::Relaxed);
            }
            continue;
        }
        if writers[index].is_none() {
            match target.data_file_writer(&tables[index].handle).await {
                Ok(w) => writers[index] = Some(w),
                Err(e) => {
                    errors[index] = Some(format!("opening a data file writer: {e}"));
                    shared.failed[index].store(true, Ordering::Relaxed);
                    continue;
                }
            }
        }
        if let Err(e) = writers[index].as_mut().expect("writer").write(&batch).await {
            errors[index] = Some(format!("writing data files: {e}"));
            shared.failed[index].store(true, Ordering::Relaxed);
            writers[index] = None;
        }
    }
    let joined = tokio::task::spawn_blocking(move || {
        for h in handles {
            let _ = h.join();
        }
    })
    .await;
    if joined.is_err() {
        for e in errors.iter_mut().filter(|e| e.is_none()) {
            *e = Some("a drain thread panicked".into());
        }
    }

    let mut drained: Vec<Vec<DrainedPartition>> = tables.iter().map(|_| Vec::new()).collect();
    for (index, result) in std::mem::take(&mut *results.lock().expect("results")) {
        match result {
            Ok(parts) => drained[index].extend(parts),
            Err(e) => {
                if errors[index].is_none() {
                    errors[index] = Some(e);
                }
            }
        }
    }
    let mut outputs = Vec::with_capacity(tables.len());
    for (index, writer) in writers.into_iter().enumerate() {
        let mut output = TableOutput {
            data_files: Vec::new(),
            upsert: buffers[index].take(),
            drained: std::mem::take(&mut drained[index]),
            error: errors[index].take(),
        };
        if output.error.is_none() {
            if let Some(writer) = writer {
                match writer.finish().await {
                    Ok(files) => output.data_files = files,
                    Err(e) => output.error = Some(format!("closing data files: {e}")),
                }
            }
        }
        outputs.push(output);
    }
    outputs
}

fn worker(shared: &Shared, tx: &mpsc::Sender<Item>, results: &Mutex<Vec<ChunkResult>>) {
    loop {
        let Some(chunk) = shared.queue.lock().expect("queue").pop_front() else {
            return;
        };
        let index = chunk.table;
        let result = drain_chunk(shared, tx, &chunk);
        if result.is_err() {
            shared.failed[index].store(true, Ordering::Relaxed);
        }
        results.lock().expect("results").push((index, result));
    }
}

fn drain_chunk(
    shared: &Shared,
    tx: &mpsc::Sender<Item>,
    chunk: &Chunk,
) -> Result<Vec<DrainedPartition>, String> {
    let index = chunk.table;
    let upsert = shared.upsert[index].as_ref();
    let mut options = DecoderOptions::append(shared.olake_timestamp_micros);
    if let Some(u) = upsert {
        options.id_mode = IdMode::Upsert {
            key_columns: u.key_columns.clone(),
        };
    }
    let mut decoder =
        BatchDecoder::new(&shared.columns[index], options).map_err(|e| e.to_string())?;
    let tombstones_delete = upsert.is_some_and(|u| u.kafka_key_only);
    let failed = &shared.failed[index];
    let progress = &shared.progress;
    let kill_after = super::fault_after_records();
    let drained = drain(
        &shared.connection,
        &chunk.ranges,
        &shared.settings,
        |record| {
            if failed.load(Ordering::Relaxed) {
                return Err(SinkError::Aborted);
            }
            match decoder.append(record) {
                Ok(()) => {}
                Err(e) if tombstones_delete && e.kind == DecodeErrorKind::Tombstone => {
                    let Some(key) = record.key else {
                        return Err(SinkError::Decode(e));
                    };
                    let hash = parse_key_hash(&kafka_key_olake_id(key)).expect("32 hex digits");
                    let version = Version {
                        timestamp: record.timestamp_ms.map_or(i64::MIN, |ms| ms * 1000),
                        partition: record.partition,
                        offset: record.offset,
                    };
                    tx.blocking_send(Item::Tombstone(index, hash, version))
                        .map_err(|_| SinkError::WriterGone)?;
                    return Ok(());
                }
                Err(e) => return Err(SinkError::Decode(e)),
            }
            let seen = progress.records.fetch_add(1, Ordering::Relaxed) + 1;
            if kill_after.is_some_and(|n| seen >= n) {
                super::kill_self();
            }
            progress.bytes.fetch_add(
                (record.key.map_or(0, <[u8]>::len) + record.value.map_or(0, <[u8]>::len)) as u64,
                Ordering::Relaxed,
            );
            if decoder.len() >= shared.batch_rows {
                tx.blocking_send(Item::Batch(index, decoder.finish()))
                    .map_err(|_| SinkError::WriterGone)?;
            }
            Ok(())
        },
    );
    match drained {
        Ok(parts) => {
            if !decoder.is_empty() {
                tx.blocking_send(Item::Batch(index, decoder.finish()))
                    .map_err(|_| "the file writer stopped".to_string())?;
            }
            Ok(parts)
        }
        Err(DrainError::Sink(SinkError::Aborted)) => {
            Err("stopped: another part of this table failed".into())
        }
        Err(e) => Err(e.to_string()),
    }
}

/// How often the progress line is printed.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(2);
