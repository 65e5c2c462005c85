//! Committing an upsert table's sync: the winning rows become data files,
//! the rows they replace (and the keys tombstones delete) become position
//! deletes (v2), deletion vectors (v3) or equality deletes on `_olake_id`,
//! all in one snapshot, and the key index records the new locations only
//! after the commit landed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use roaring::RoaringTreemap;
use topicberg_core::config::DeleteFormat;
use topicberg_iceberg::key_index::{IndexState, KeyIndex};
use topicberg_iceberg::row_delta::RowDelta;
use topicberg_iceberg::{
    CommittedSnapshot, Destination, IcebergError, OffsetsAdvance, TableHandle,
};

use super::failure::{CommitError, UpsertError};
use super::kept_index::IndexHome;
use super::table::CommitRefused;
use super::upsert::{winning_rows, KeyHash, RowSet, Slot, UpsertBuffer};

/// What an upsert commit did.
pub struct UpsertCommit {
    /// The snapshot.
    pub snapshot: CommittedSnapshot,
    /// Rows written (one per key that ended on a message).
    pub rows: u64,
    /// Old rows retired (replaced or tombstoned).
    pub deletes: u64,
    /// Bytes of the data files written (delete files not counted).
    pub data_file_bytes: u64,
    /// Attempts beyond the first: recomputed after another writer's commit,
    /// or a commit request tried again.
    pub retries: u32,
}

/// Attempts at an upsert commit: each one that meets another writer's
/// commit starts over from the key index brought up to that commit.
const UPSERT_ATTEMPTS: u32 = 5;

/// Writes, deletes, commits and records one upsert table's sync.
///
/// When another writer commits first (HTTP 409, or an unconfirmed commit
/// that a reload shows did not land), the deletes computed from the key
/// index may be stale: the other writer may have replaced a row this sync
/// retires. So nothing is rebased blindly: this attempt's files are
/// deleted, the key index replays the other writer's snapshots, and the
/// rows, deletes and `_op_type`s are computed again on the new table.
pub async fn commit_upsert(
    destination: &Destination,
    handle: &mut TableHandle,
    mut buffer: UpsertBuffer,
    delete_format: DeleteFormat,
    home: IndexHome<'_>,
    offsets: OffsetsAdvance,
    writers: usize,
) -> Result<UpsertCommit, CommitRefused> {
    let table = handle.qualified_name();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let outcome = commit_upsert_once(
            destination,
            handle,
            &mut buffer,
            delete_format,
            home,
            offsets.clone(),
            writers,
        )
        .await;
        match outcome {
            Attempt::Done(mut done) => {
                done.retries += attempt - 1;
                return Ok(done);
            }
            Attempt::Failed(e) => return Err(e),
            Attempt::Moved(e, written) if attempt < UPSERT_ATTEMPTS => {
                tracing::warn!(table = %table, attempt, error = %e, "another writer committed first; recomputing the upsert on the new table");
                if let Some(files) = written {
                    let left = destination.delete_uncommitted(&files).await;
                    for (path, error) in left {
                        tracing::warn!(path = %path, error = %error, "could not delete an uncommitted file; delete it by hand");
                    }
                }
            }
            Attempt::Moved(source, _) => {
                return Err(CommitRefused::Failed(CommitError::GaveUp {
                    attempts: attempt,
                    source,
                }))
            }
        }
    }
}

/// How one attempt ended.
enum Attempt {
    Done(UpsertCommit),
    /// Nothing committed; the table moved (the handle holds it as it is
    /// now): recompute and try again. The files this attempt wrote, when
    /// the commit surely failed (else they are kept: it may still land).
    Moved(IcebergError, Option<Vec<iceberg::spec::DataFile>>),
    Failed(CommitRefused),
}

async fn commit_upsert_once(
    destination: &Destination,
    handle: &mut TableHandle,
    buffer: &mut UpsertBuffer,
    delete_format: DeleteFormat,
    home: IndexHome<'_>,
    offsets: OffsetsAdvance,
    writers: usize,
) -> Attempt {
    let index = match home.open(destination, handle).await {
        Ok(index) => index,
        Err(e) => {
            return Attempt::Failed(CommitRefused::Failed(UpsertError::OpenKeyIndex(e).into()))
        }
    };
    let table = handle.qualified_name();
    match index.state() {
        IndexState::Fresh => {}
        state => {
            let stats = index.build_stats();
            tracing::info!(
                table = %table,
                state = ?state,
                rows_read = stats.rows_read,
                rows_moved = stats.rows_moved,
                "key index brought up to date"
            );
        }
    }
    let prepared =
        prepare_upsert(destination, handle, buffer, delete_format, &index, writers).await;
    let (attempt, index) = match prepared {
        Err(e) => (Attempt::Failed(CommitRefused::Failed(e.into())), index),
        Ok(prepared) => prepared.commit(destination, handle, offsets, index).await,
    };
    home.close(index);
    attempt
}

/// One attempt's files and what the key index must learn once they land.
struct PreparedUpsert {
    table: String,
    delta: RowDelta,
    /// The written keys and their held row numbers, in key order (kept on
    /// disk: one per key of the sync).
    winner_keys: PathBuf,
    /// Held row number -> position among the written rows.
    ranks: RowRanks,
    rows: u64,
    deleted: Vec<KeyHash>,
    deletes: u64,
}

impl PreparedUpsert {
    /// Commits; the attempt, and the key index (with the commit recorded
    /// when it landed).
    async fn commit(
        self,
        destination: &Destination,
        handle: &mut TableHandle,
        offsets: OffsetsAdvance,
        mut index: KeyIndex,
    ) -> (Attempt, KeyIndex) {
        let Self {
            table,
            mut delta,
            winner_keys,
            ranks,
            rows,
            deleted,
            deletes,
        } = self;
        delta.offsets = Some(offsets);
        // Files of a partitioned spec, and files sorted by the table's
        // sort order, do not hold the written rows in write order (see
        // `WrittenRows`): their positions are read back.
        let read_back = delta
            .data_files
            .iter()
            .any(|f| !f.partition().fields().is_empty() || f.sort_order_id().is_some());
        let data_file_bytes = delta
            .data_files
            .iter()
            .map(|f| f.file_size_in_bytes())
            .sum();
        let delta_files: Vec<(String, u64)> = delta
            .data_files
            .iter()
            .map(|f| (f.file_path().to_string(), f.record_count()))
            .collect();
        let written: Vec<iceberg::spec::DataFile> = delta
            .data_files
            .iter()
            .chain(&delta.delete_files)
            .cloned()
            .collect();
        // One request: a conflict comes back here to be recomputed.
        let snapshot = match destination
            .commit_row_delta_with_retry(handle, delta, 1)
            .await
        {
            Ok(snapshot) => snapshot,
            Err(e) => return (refused(destination, e, written).await, index),
        };
        crate::hooks::fault_point("before_key_index_update");
        let files: Vec<String> = delta_files.iter().map(|(p, _)| p.clone()).collect();
        let counts: Vec<u64> = delta_files.iter().map(|(_, n)| *n).collect();
        let applied = if read_back {
            // Rows were split per partition or sorted: read their positions back.
            index
                .apply_read_back(
                    destination.file_io(),
                    handle,
                    snapshot.snapshot_id,
                    snapshot.parent_snapshot_id,
                    &files,
                    &deleted,
                )
                .await
                .map_err(UpsertError::KeyIndex)
        } else {
            WrittenRows::open(&winner_keys, ranks, &counts).and_then(|rows| {
                std::thread::scope(|scope| {
                    // The key index takes the rows' errors as text.
                    let rows = rows
                        .in_background(scope)
                        .map(|row| row.map_err(|e| e.to_string()));
                    index
                        .apply_each(
                            snapshot.snapshot_id,
                            snapshot.parent_snapshot_id,
                            &files,
                            rows,
                            &deleted,
                        )
                        .map_err(UpsertError::KeyIndex)
                })
            })
        };
        if let Err(e) = applied {
            // The table is right; the index catches up from the table next time.
            tracing::warn!(table = %table, error = %e, "recording the commit in the key index failed; the next sync replays it");
        }
        let retries = snapshot.attempts.saturating_sub(1);
        let done = Attempt::Done(UpsertCommit {
            snapshot,
            rows,
            deletes,
            data_file_bytes,
            retries,
        });
        (done, index)
    }
}

/// A commit the catalog refused: recomputed when the table moved (the
/// files kept when the commit may still land), superseded (its files
/// deleted when it surely did not land), or failed.
async fn refused(
    destination: &Destination,
    e: IcebergError,
    written: Vec<iceberg::spec::DataFile>,
) -> Attempt {
    let surely_failed = super::commit_surely_failed(&e);
    if moved_on(&e) {
        return Attempt::Moved(e, surely_failed.then_some(written));
    }
    let refused = CommitRefused::from_iceberg(e);
    if matches!(refused, CommitRefused::Superseded(_)) && surely_failed {
        let left = destination.delete_uncommitted(&written).await;
        for (path, error) in left {
            tracing::warn!(path = %path, error = %error, "could not delete an uncommitted file; delete it by hand");
        }
    }
    Attempt::Failed(refused)
}

/// Whether a failed single-request commit left the table untouched and
/// moved by another writer (or briefly failing): worth recomputing.
fn moved_on(e: &topicberg_iceberg::IcebergError) -> bool {
    use topicberg_iceberg::{CatalogErrorKind, IcebergErrorKind};
    matches!(
        e.kind,
        IcebergErrorKind::Catalog(
            CatalogErrorKind::Conflict | CatalogErrorKind::Server | CatalogErrorKind::Unreachable
        )
    )
}

async fn prepare_upsert(
    destination: &Destination,
    handle: &mut TableHandle,
    buffer: &mut UpsertBuffer,
    delete_format: DeleteFormat,
    index: &KeyIndex,
    writers: usize,
) -> Result<PreparedUpsert, UpsertError> {
    let table = handle.qualified_name();
    let found = find_winners(index, buffer, delete_format)?;
    let (data_files, rows) =
        write_winning_rows(destination, handle, buffer, &found, writers).await?;

    // What to retire: the old row of every written key, and of every
    // tombstoned key the table has. Equality deletes name those keys
    // instead: rows with that `_olake_id` in earlier commits go, this
    // commit's new rows (same sequence number) stay.
    let deletes_written = destination
        .write_deletes(handle, delete_format, found.retire, found.retired_keys)
        .await
        .map_err(UpsertError::Write)?;
    Ok(PreparedUpsert {
        table,
        delta: RowDelta {
            data_files,
            delete_files: deletes_written.delete_files,
            replaced_dvs: deletes_written.replaced_dvs,
            summary_extra: BTreeMap::new(),
            offsets: None,
        },
        winner_keys: found.winner_keys,
        ranks: RowRanks::new(&found.winners),
        rows,
        deleted: found.deleted,
        deletes: found.deletes,
    })
}

/// Every key's winner, against the key index.
struct Winners {
    /// Held rows to write.
    winners: Arc<RowSet>,
    /// Of those, the ones whose key the table has (`_op_type` `u`).
    updates: Arc<RowSet>,
    /// Tombstoned keys the table has.
    deleted: Vec<KeyHash>,
    /// Keys whose old row retires, per data file of that row (equality
    /// deletes name them, in the data file's partition).
    retired_keys: BTreeMap<String, Vec<KeyHash>>,
    /// Old rows to retire: data file -> positions.
    retire: BTreeMap<String, RoaringTreemap>,
    /// How many old rows retire.
    deletes: u64,
    /// The written keys and their held row numbers, in key order.
    winner_keys: PathBuf,
}

/// Every key's winner, in key order, against the key index: which held
/// rows are written (`u` for keys the table has), which old rows retire.
/// The written keys with their held row go to a file, in key order: the
/// key index is updated in that order after the commit (sequential B-tree
/// inserts).
fn find_winners(
    index: &KeyIndex,
    buffer: &mut UpsertBuffer,
    delete_format: DeleteFormat,
) -> Result<Winners, UpsertError> {
    let reader = index.reader().map_err(UpsertError::KeyIndex)?;
    let mut winners = RowSet::new(buffer.rows());
    let mut updates = RowSet::new(buffer.rows());
    let mut deleted: Vec<KeyHash> = Vec::new();
    let mut retired_by_id: BTreeMap<u32, Vec<KeyHash>> = BTreeMap::new();
    let mut retire_by_id: BTreeMap<u32, RoaringTreemap> = BTreeMap::new();
    let mut deletes = 0u64;
    let winner_keys = buffer.dir().join("winners.bin");
    let file_err = UpsertError::winners_file(&winner_keys);
    let mut keys_out = BufWriter::new(File::create(&winner_keys).map_err(&file_err)?);
    buffer.for_each_winner(|key, slot| {
        let old = reader.get(key).map_err(UpsertError::KeyIndex)?;
        match slot {
            Slot::Row(row) => {
                winners.insert(row);
                if old.is_some() {
                    updates.insert(row);
                }
                keys_out
                    .write_all(key)
                    .and_then(|_| keys_out.write_all(&row.to_le_bytes()))
                    .map_err(&file_err)?;
            }
            Slot::Tombstone if old.is_some() => deleted.push(*key),
            Slot::Tombstone => {}
        }
        if let Some((file, pos)) = old {
            retire_by_id.entry(file).or_default().insert(pos);
            deletes += 1;
            if delete_format == DeleteFormat::Equality {
                retired_by_id.entry(file).or_default().push(*key);
            }
        }
        Ok::<_, UpsertError>(())
    })?;
    keys_out.flush().map_err(&file_err)?;
    drop((keys_out, file_err));
    let mut retire: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    for (id, positions) in retire_by_id {
        retire.insert(reader.path(id).map_err(UpsertError::KeyIndex)?, positions);
    }
    let mut retired_keys: BTreeMap<String, Vec<KeyHash>> = BTreeMap::new();
    for (id, keys) in retired_by_id {
        retired_keys.insert(reader.path(id).map_err(UpsertError::KeyIndex)?, keys);
    }
    Ok(Winners {
        winners: Arc::new(winners),
        updates: Arc::new(updates),
        deleted,
        retired_keys,
        retire,
        deletes,
        winner_keys,
    })
}

/// The winning rows, read back from the held files, fitted to the table's
/// final columns and written as data files; the files (in the held rows'
/// order) and the rows. Up to `writers` writers run in parallel, each on
/// a run of the held files; the files of a failed attempt are deleted.
async fn write_winning_rows(
    destination: &Destination,
    handle: &TableHandle,
    buffer: &mut UpsertBuffer,
    found: &Winners,
    writers: usize,
) -> Result<(Vec<iceberg::spec::DataFile>, u64), UpsertError> {
    let parts = buffer.parts(writers);
    // Every writer opened before any starts: a failure to open one leaves
    // no task running and no file written.
    let mut opened = Vec::with_capacity(parts.len());
    for _ in &parts {
        let writer = destination
            .data_file_writer_of(handle, parts.len())
            .await
            .map_err(UpsertError::Write)?;
        opened.push(writer);
    }
    let mut tasks = Vec::new();
    for (part, writer) in parts.into_iter().zip(opened) {
        let schema = handle.arrow_schema().clone();
        let (winners, updates) = (Arc::clone(&found.winners), Arc::clone(&found.updates));
        tasks.push(tokio::spawn(async move {
            let mut writer = writer;
            let mut rows = 0u64;
            for item in part.batches() {
                let (first_row, batch) = item?;
                let Some(mut batch) = winning_rows(&batch, first_row, &winners, &updates)? else {
                    continue;
                };
                if batch.schema() != schema {
                    batch = topicberg_iceberg::conform::conform(&batch, &schema)
                        .map_err(UpsertError::Conform)?;
                }
                rows += batch.num_rows() as u64;
                writer.write(&batch).await.map_err(UpsertError::Write)?;
            }
            let files = writer.finish().await.map_err(UpsertError::Write)?;
            Ok::<_, UpsertError>((files, rows))
        }));
    }
    let (mut data_files, mut rows, mut failed) = (Vec::new(), 0u64, None);
    for task in tasks {
        match task.await.map_err(UpsertError::WriterStopped) {
            Ok(Ok((files, n))) => {
                data_files.extend(files);
                rows += n;
            }
            Ok(Err(e)) | Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        for (path, error) in destination.delete_uncommitted(&data_files).await {
            tracing::warn!(path = %path, error = %error, "could not delete an uncommitted file; delete it by hand");
        }
        return Err(e);
    }
    let in_files: u64 = data_files.iter().map(|f| f.record_count()).sum();
    if in_files != rows {
        return Err(UpsertError::RowCount {
            in_files,
            written: rows,
        });
    }
    Ok((data_files, rows))
}

/// The position of a held row among the written (winning) rows: per 64
/// rows, their winners' bits and the winners before them, side by side
/// (one cache line read per row; rows come in key order, so at random).
struct RowRanks {
    blocks: Vec<[u64; 2]>,
}

impl RowRanks {
    fn new(winners: &RowSet) -> Self {
        let mut count = 0u64;
        let blocks = winners
            .words()
            .iter()
            .map(|word| {
                let block = [*word, count];
                count += u64::from(word.count_ones());
                block
            })
            .collect();
        RowRanks { blocks }
    }

    /// Winning rows before `row`.
    fn rank(&self, row: u32) -> u64 {
        let [word, before] = self.blocks[row as usize / 64];
        before + u64::from((word & ((1u64 << (row % 64)) - 1)).count_ones())
    }
}

/// Winners file entries read and ranked at a time: the ranks' memory
/// reads of one chunk are independent, so they overlap.
const RANK_CHUNK: usize = 4096;

/// The written rows' (key, data file number, position) in key order, read
/// back from the winners file: a row's place among the written rows is
/// its rank, and the data files hold the written rows in order.
struct WrittenRows {
    keys: BufReader<File>,
    path: PathBuf,
    ranks: RowRanks,
    /// Written rows before each data file, and after the last.
    starts: Vec<u64>,
    /// The chunk read last: (key, rank), and how many were handed out.
    chunk: Vec<([u8; 16], u64)>,
    next: usize,
}

/// A chunk of written rows, or why the winners file could not be read.
type WrittenChunk = Result<Vec<([u8; 16], usize, u64)>, UpsertError>;

impl WrittenRows {
    fn open(path: &Path, ranks: RowRanks, counts: &[u64]) -> Result<Self, UpsertError> {
        let file = File::open(path).map_err(UpsertError::winners_file(path))?;
        let mut starts = vec![0u64];
        for count in counts {
            starts.push(starts.last().expect("one at least") + count);
        }
        Ok(WrittenRows {
            keys: BufReader::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
            ranks,
            starts,
            chunk: Vec::with_capacity(RANK_CHUNK),
            next: 0,
        })
    }

    /// Reads and ranks the next chunk of the winners file (empty at its end).
    fn read_chunk(&mut self) -> Result<(), UpsertError> {
        self.chunk.clear();
        self.next = 0;
        let mut entry = [0u8; 20];
        while self.chunk.len() < RANK_CHUNK {
            match self.keys.read_exact(&mut entry) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(UpsertError::winners_file(&self.path)(e)),
            }
            let mut key = [0u8; 16];
            key.copy_from_slice(&entry[..16]);
            let row = u32::from_le_bytes(entry[16..].try_into().expect("4 bytes"));
            self.chunk.push((key, u64::from(row)));
        }
        for (_, row) in &mut self.chunk {
            *row = self.ranks.rank(*row as u32);
        }
        Ok(())
    }
}

impl WrittenRows {
    /// The same rows, read and ranked a chunk ahead by a thread of
    /// `scope` while the caller takes them (the key index writes them).
    /// The thread ends when the rows do or the iterator is dropped.
    fn in_background<'scope>(
        self,
        scope: &'scope std::thread::Scope<'scope, '_>,
    ) -> impl Iterator<Item = Result<([u8; 16], usize, u64), UpsertError>> + 'scope {
        let (tx, rx) = std::sync::mpsc::sync_channel::<WrittenChunk>(2);
        scope.spawn(move || {
            let mut rows = self.peekable();
            while rows.peek().is_some() {
                let chunk: WrittenChunk = rows.by_ref().take(RANK_CHUNK).collect();
                let failed = chunk.is_err();
                if tx.send(chunk).is_err() || failed {
                    return;
                }
            }
        });
        rx.into_iter().flat_map(|chunk| {
            let rows: Box<dyn Iterator<Item = _>> = match chunk {
                Ok(rows) => Box::new(rows.into_iter().map(Ok)),
                Err(e) => Box::new(std::iter::once(Err(e))),
            };
            rows
        })
    }
}

impl Iterator for WrittenRows {
    type Item = Result<([u8; 16], usize, u64), UpsertError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next == self.chunk.len() {
            if let Err(e) = self.read_chunk() {
                return Some(Err(e));
            }
            if self.chunk.is_empty() {
                return None;
            }
        }
        let (key, at) = self.chunk[self.next];
        self.next += 1;
        // The data file whose rows include `at`.
        let file = self.starts.partition_point(|start| *start <= at) - 1;
        if file + 1 >= self.starts.len() {
            return Some(Err(UpsertError::RowBeyondFiles(at)));
        }
        Some(Ok((key, file, at - self.starts[file])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_rank_counts_the_winning_rows_before_it() {
        let rows = [0u32, 3, 63, 64, 65, 200];
        let mut winners = RowSet::new(201);
        rows.iter().for_each(|r| winners.insert(*r));
        let ranks = RowRanks::new(&winners);
        let got: Vec<u64> = rows.iter().map(|r| ranks.rank(*r)).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn written_rows_map_keys_in_key_order_to_their_file_and_position() {
        // Held rows 1, 4, 5 and 9 won; written in row order into two files
        // of 3 and 1 rows. The winners file lists them in key order.
        let mut winners = RowSet::new(10);
        [1u32, 4, 5, 9].iter().for_each(|r| winners.insert(*r));
        let ranks = RowRanks::new(&winners);
        let path = std::env::temp_dir().join(format!("winners-{}.bin", uuid::Uuid::new_v4()));
        let mut bytes = Vec::new();
        for (key, row) in [(1u8, 9u32), (2, 4), (3, 1), (4, 5)] {
            bytes.extend_from_slice(&[key; 16]);
            bytes.extend_from_slice(&row.to_le_bytes());
        }
        std::fs::write(&path, bytes).unwrap();
        let rows: Vec<_> = WrittenRows::open(&path, ranks, &[3, 1])
            .unwrap()
            .map(|r| r.map(|(k, f, p)| (k[0], f, p)))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, vec![(1, 1, 0), (2, 0, 1), (3, 0, 0), (4, 0, 2)]);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn written_rows_rank_across_chunks_of_the_winners_file() {
        // Odd held rows win: 3 * RANK_CHUNK of them, listed in reverse
        // (key order is not row order), in files of 5,000 rows.
        let n = (3 * RANK_CHUNK) as u32;
        let mut winners = RowSet::new(2 * n);
        let mut bytes = Vec::new();
        for i in (0..n).rev() {
            winners.insert(2 * i + 1);
            bytes.extend_from_slice(&u128::from(i).to_be_bytes());
            bytes.extend_from_slice(&(2 * i + 1).to_le_bytes());
        }
        let ranks = RowRanks::new(&winners);
        let path = std::env::temp_dir().join(format!("winners-{}.bin", uuid::Uuid::new_v4()));
        std::fs::write(&path, bytes).unwrap();
        let counts: Vec<u64> = (0..u64::from(n).div_ceil(5000))
            .map(|f| (u64::from(n) - f * 5000).min(5000))
            .collect();
        let rows: Vec<_> = std::thread::scope(|scope| {
            WrittenRows::open(&path, ranks, &counts)
                .unwrap()
                .in_background(scope)
                .collect::<Result<_, _>>()
                .unwrap()
        });
        std::fs::remove_file(&path).unwrap();
        assert_eq!(rows.len(), n as usize);
        for (key, file, pos) in rows {
            let i = u128::from_be_bytes(key) as u64;
            assert_eq!((file as u64, pos), (i / 5000, i % 5000));
        }
    }
}
