//! Committing an upsert table's sync: the winning rows become data files,
//! the rows they replace (and the keys tombstones delete) become position
//! deletes (v2), deletion vectors (v3) or equality deletes on `_olake_id`,
//! all in one snapshot, and the key index records the new locations only
//! after the commit landed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use roaring::RoaringTreemap;
use topicberg_core::config::DeleteFormat;
use topicberg_iceberg::key_index::{IndexState, KeyIndex};
use topicberg_iceberg::row_delta::RowDelta;
use topicberg_iceberg::{
    CommittedSnapshot, Destination, IcebergError, OffsetsAdvance, SetTombstone, TableHandle,
};

use super::failure::{CommitError, UpsertError};
use super::kept_index::IndexHome;
use super::table::CommitRefused;
use super::upsert::{winning_rows, KeyHash, RowSet, Slot, UpsertBuffer};

mod previous_values;
mod winners;
mod written_rows;
use previous_values::{read_previous_values, PreviousValues};
use winners::find_winners;
use written_rows::{RowRanks, WrittenRows};

/// What an upsert commit did.
pub struct UpsertCommit {
    /// The snapshot.
    pub snapshot: CommittedSnapshot,
    /// Rows written (one per key that ended on a message).
    pub rows: u64,
    /// Old rows retired (replaced or tombstoned).
    pub deletes: u64,
    /// Keys left as the table has them: their newest message here was
    /// older than the table's row, from another partition.
    pub outranked: u64,
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
    let mut carried = None;
    loop {
        attempt += 1;
        let rows = match carried.take() {
            Some(prepared) => Rows::Carried(prepared),
            None => Rows::Compute {
                buffer: &mut buffer,
                delete_format,
                writers,
            },
        };
        let outcome = commit_upsert_once(destination, handle, home, offsets.clone(), rows).await;
        match outcome {
            Attempt::Done(mut done) => {
                done.retries += attempt - 1;
                return Ok(done);
            }
            Attempt::Failed(e) => return Err(e),
            Attempt::Moved(e, prepared) if attempt < UPSERT_ATTEMPTS => {
                tracing::warn!(table = %table, attempt, error = %e, "another commit landed first; carrying the upsert over or computing it again on the new table");
                if let Some(prepared) = prepared {
                    carried = prepared.carry_onto(destination, handle).await;
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
    /// now): carry over or compute again, and try again. What the attempt
    /// prepared, when the commit surely failed (else its files are kept:
    /// it may still land).
    Moved(IcebergError, Option<Box<PreparedUpsert>>),
    Failed(CommitRefused),
}

/// What an attempt commits: rows and deletes computed from the held
/// messages against the key index, or those the attempt before prepared,
/// carried over.
enum Rows<'a> {
    Compute {
        buffer: &'a mut UpsertBuffer,
        delete_format: DeleteFormat,
        writers: usize,
    },
    Carried(Box<PreparedUpsert>),
}

/// One attempt: the key index brought up to the table, then `rows`
/// computed or carried over, and committed.
async fn commit_upsert_once(
    destination: &Destination,
    handle: &mut TableHandle,
    home: IndexHome<'_>,
    offsets: OffsetsAdvance,
    rows: Rows<'_>,
) -> Attempt {
    let mut index = match home.open(destination, handle).await {
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
                state = %state,
                rows_read = stats.rows_read,
                rows_moved = stats.rows_moved,
                "key index brought up to date"
            );
        }
    }
    let prepared = match rows {
        Rows::Carried(prepared) => Ok(prepared),
        Rows::Compute {
            buffer,
            delete_format,
            writers,
        } => {
            // A truncate walks every key of the index, in one run.
            let merged = match buffer.truncated() {
                Some(_) => index.merge_all().map_err(UpsertError::KeyIndex),
                None => Ok(()),
            };
            match merged {
                Ok(()) => {
                    prepare_upsert(destination, handle, buffer, delete_format, &index, writers)
                        .await
                        .map(Box::new)
                }
                Err(e) => Err(e),
            }
        }
    };
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
    delete_format: DeleteFormat,
    /// The old rows the deletes retire (data file -> positions), and the
    /// snapshot they were found on: what carrying them over moves.
    retire: BTreeMap<String, RoaringTreemap>,
    base: Option<i64>,
    /// The written keys and their held row numbers, in key order (kept on
    /// disk: one per key of the sync).
    winner_keys: PathBuf,
    /// Held row number -> position among the written rows.
    ranks: RowRanks,
    rows: u64,
    deleted: Vec<KeyHash>,
    deletes: u64,
    outranked: u64,
}

impl PreparedUpsert {
    /// Commits; the attempt, and the key index (with the commit recorded
    /// when it landed).
    async fn commit(
        self: Box<Self>,
        destination: &Destination,
        handle: &mut TableHandle,
        offsets: OffsetsAdvance,
        mut index: KeyIndex,
    ) -> (Attempt, KeyIndex) {
        crate::hooks::pause_point("before_upsert_commit").await;
        let mut delta = self.delta.clone();
        delta.offsets = Some(offsets);
        // One request: a conflict comes back here to be carried over or
        // computed again.
        let snapshot = match destination
            .commit_row_delta_with_retry(handle, delta, 1)
            .await
        {
            Ok(snapshot) => snapshot,
            Err(e) => return (refused(destination, e, self).await, index),
        };
        crate::hooks::fault_point("before_key_index_update");
        let Self {
            table,
            delta,
            winner_keys,
            ranks,
            rows,
            deleted,
            deletes,
            outranked,
            ..
        } = *self;
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
        let files: Vec<String> = delta
            .data_files
            .iter()
            .map(|f| f.file_path().to_string())
            .collect();
        let counts: Vec<u64> = delta.data_files.iter().map(|f| f.record_count()).collect();
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
                    let rows = rows.in_background(scope);
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
            outranked,
            data_file_bytes,
            retries,
        });
        (done, index)
    }

    /// The data files and delete files this attempt wrote.
    fn written(&self) -> impl Iterator<Item = &iceberg::spec::DataFile> {
        self.delta.data_files.iter().chain(&self.delta.delete_files)
    }

    /// This attempt carried onto the table as it is now (`handle`, after
    /// its commit was refused), when only this process's own compactions
    /// and manifest rewrites landed since its deletes were found: a
    /// compaction changes no row's key or liveness, only its place. The
    /// data files stay; the deleted rows are moved through the
    /// compactions' row moves and their delete files written again.
    /// `None`, with every file of the attempt deleted, when the deletes
    /// must be computed again (another writer committed, the table uses
    /// equality deletes, or a row did not move as a live one).
    async fn carry_onto(
        mut self: Box<Self>,
        destination: &Destination,
        handle: &TableHandle,
    ) -> Option<Box<Self>> {
        let started = std::time::Instant::now();
        let carried = match self.delete_format {
            DeleteFormat::Equality => None,
            _ => destination.carry_positions(handle.metadata(), self.base, &self.retire),
        };
        let Some(retire) = carried else {
            let written: Vec<_> = self.written().cloned().collect();
            delete_uncommitted(destination, &written).await;
            return None;
        };
        let old_deletes = std::mem::take(&mut self.delta.delete_files);
        delete_uncommitted(destination, &old_deletes).await;
        let written = destination
            .write_deletes(handle, self.delete_format, retire.clone(), BTreeMap::new())
            .await;
        match written {
            Ok(written) => {
                self.delta.delete_files = written.delete_files;
                self.delta.replaced_dvs = written.replaced_dvs;
                self.retire = retire;
                self.base = handle.metadata().current_snapshot_id();
                tracing::info!(
                    table = %self.table,
                    deletes = self.deletes,
                    delete_files = self.delta.delete_files.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "carried the upsert's deletes over this process's compaction"
                );
                Some(self)
            }
            Err(e) => {
                tracing::warn!(table = %self.table, error = %e, "could not write the carried deletes; computing the upsert again");
                delete_uncommitted(destination, &self.delta.data_files).await;
                None
            }
        }
    }
}

/// Deletes files no commit names; says which could not be.
pub(super) async fn delete_uncommitted(
    destination: &Destination,
    files: &[iceberg::spec::DataFile],
) {
    for (path, error) in destination.delete_uncommitted(files).await {
        tracing::warn!(path = %path, error = %error, "could not delete an uncommitted file; delete it by hand");
    }
}

/// A commit the catalog refused: carried over or computed again when the
/// table moved (the attempt's files kept, not handed back, when the
/// commit may still land), superseded (its files deleted when it surely
/// did not land), or failed.
async fn refused(
    destination: &Destination,
    e: IcebergError,
    prepared: Box<PreparedUpsert>,
) -> Attempt {
    let surely_failed = super::commit_surely_failed(&e);
    if moved_on(&e) {
        return Attempt::Moved(e, surely_failed.then_some(prepared));
    }
    let refused = CommitRefused::from_iceberg(e);
    if matches!(refused, CommitRefused::Superseded(_)) && surely_failed {
        let written: Vec<_> = prepared.written().cloned().collect();
        delete_uncommitted(destination, &written).await;
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
    if found.unmatched_deletes > 0 {
        tracing::warn!(
            table = %table, deletes = found.unmatched_deletes,
            "delete events named rows the table does not have (their `before` may lack the \
             dedup key's values: with payload dedup_keys set REPLICA IDENTITY FULL on the \
             source table); those rows are left as they are"
        );
    }
    let previous = read_previous_values(destination, handle, buffer, &found.fillings).await?;
    if !previous.is_empty() {
        tracing::info!(
            table = %table, values = previous.len(),
            "filled values the change events did not send (unchanged TOASTed columns) from the \
             keys' previous rows"
        );
    }
    let (data_files, rows) = write_winning_rows(
        destination,
        handle,
        buffer,
        (&found.winners, &found.updates),
        Arc::new(previous),
        writers,
    )
    .await?;

    // What to retire: the old row of every written key, and of every
    // tombstoned key the table has. Equality deletes name those keys
    // instead: rows with that `_olake_id` in earlier commits go, this
    // commit's new rows (same sequence number) stay.
    let retire = match delete_format {
        DeleteFormat::Equality => BTreeMap::new(),
        _ => found.retire.clone(),
    };
    let deletes_written = destination
        .write_deletes(handle, delete_format, found.retire, found.retired_keys)
        .await
        .map_err(UpsertError::Write)?;
    Ok(PreparedUpsert {
        table,
        delete_format,
        retire,
        base: index.snapshot_id(),
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
        outranked: found.outranked,
    })
}

/// A writer's round of an upsert table among workers, staged for the
/// table's committer (`upsert_round.rs`): each key's winning row of its
/// own messages written as data files (with `_op_type` "c": the committer
/// gives each row its own), and each key whose winner is a tombstone. No
/// key index is read: the committer settles the keys against the table.
pub(super) async fn stage_winners(
    destination: &Destination,
    handle: &TableHandle,
    buffer: &mut UpsertBuffer,
    writers: usize,
) -> Result<(Vec<iceberg::spec::DataFile>, Vec<SetTombstone>), UpsertError> {
    refuse_among_workers(buffer)?;
    refuse_unsent(buffer)?;
    let mut winners = RowSet::new(buffer.rows());
    let mut tombstones = Vec::new();
    buffer.for_each_winner(|key, slot, version| {
        match slot {
            Slot::Row(row) => winners.insert(row),
            Slot::Tombstone => tombstones.push(SetTombstone {
                key: *key,
                timestamp: version.timestamp,
                partition: version.partition,
                offset: version.offset,
            }),
        }
        Ok::<_, UpsertError>(())
    })?;
    let no_updates = Arc::new(RowSet::new(0));
    let (files, _) = write_winning_rows(
        destination,
        handle,
        buffer,
        (&Arc::new(winners), &no_updates),
        Arc::new(PreviousValues::default()),
        writers,
    )
    .await?;
    Ok((files, tombstones))
}

/// A writer's staged rows carry no unsent values: its decoders do not
/// keep them (`TableInput::keep_unsent`), so this guards the rule.
pub(super) fn refuse_unsent(buffer: &UpsertBuffer) -> Result<(), UpsertError> {
    match buffer.has_unsent() {
        true => Err(UpsertError::UnsentAmongWorkers),
        false => Ok(()),
    }
}

/// What the workers of a scaled-out job do not apply yet: a truncate,
/// and `order_by`.
pub(super) fn refuse_among_workers(buffer: &UpsertBuffer) -> Result<(), UpsertError> {
    if let Some(t) = buffer.truncated() {
        return Err(UpsertError::TruncateAmongWorkers {
            partition: t.partition,
            offset: t.offset,
        });
    }
    if buffer.order() == super::upsert::VersionOrder::Field {
        return Err(UpsertError::OrderByAmongWorkers);
    }
    Ok(())
}

/// The winning rows, read back from the held files, fitted to the table's
/// final columns and written as data files; the files (in the held rows'
/// order) and the rows. Up to `writers` writers run in parallel, each on
/// a run of the held files; the files of a failed attempt are deleted.
async fn write_winning_rows(
    destination: &Destination,
    handle: &TableHandle,
    buffer: &mut UpsertBuffer,
    (winners, updates): (&Arc<RowSet>, &Arc<RowSet>),
    previous: Arc<PreviousValues>,
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
        let (winners, updates) = (Arc::clone(winners), Arc::clone(updates));
        let previous = Arc::clone(&previous);
        tasks.push(tokio::spawn(async move {
            let mut writer = writer;
            let mut rows = 0u64;
            for item in part.batches() {
                let (first_row, held) = item?;
                let Some(mut batch) = winning_rows(&held, first_row, &winners, &updates)? else {
                    continue;
                };
                if batch.schema() != schema {
                    batch = topicberg_iceberg::conform::conform(&batch, &schema)
                        .map_err(UpsertError::Conform)?;
                }
                // In the table's columns: a value's column may be one the
                // decoder of its row did not have yet.
                if !previous.is_empty() {
                    let won: Vec<u32> = held
                        .row_range(first_row)
                        .filter(|r| winners.contains(*r))
                        .collect();
                    batch = previous.fill(batch, &won)?;
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
        delete_uncommitted(destination, &data_files).await;
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
