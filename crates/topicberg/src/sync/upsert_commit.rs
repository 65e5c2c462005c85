//! Committing an upsert table's sync: the winning rows become data files,
//! the rows they replace (and the keys tombstones delete) become position
//! deletes (v2), deletion vectors (v3) or equality deletes on `_olake_id`,
//! all in one snapshot, and the key index records the new locations only
//! after the commit landed.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use roaring::{RoaringBitmap, RoaringTreemap};
use topicberg_core::config::DeleteFormat;
use topicberg_iceberg::key_index::{IndexState, KeyIndex};
use topicberg_iceberg::row_delta::RowDelta;
use topicberg_iceberg::{CommittedSnapshot, IcebergTarget, TableHandle};

use super::upsert::{parse_key_hash, winning_rows, KeyHash, Slot, UpsertBuffer};

/// What an upsert commit did.
pub struct UpsertCommit {
    /// The snapshot.
    pub snapshot: CommittedSnapshot,
    /// Rows written (one per key that ended on a message).
    pub rows: u64,
    /// Old rows retired (replaced or tombstoned).
    pub deletes: u64,
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
    target: &IcebergTarget,
    handle: &mut TableHandle,
    mut buffer: UpsertBuffer,
    delete_format: DeleteFormat,
    state_dir: &Path,
    summary_extra: BTreeMap<String, String>,
) -> Result<UpsertCommit, String> {
    let table = format!("{}.{}", handle.namespace().join("."), handle.name());
    let mut attempt = 0;
    loop {
        attempt += 1;
        let outcome = commit_upsert_once(
            target,
            handle,
            &mut buffer,
            delete_format,
            state_dir,
            summary_extra.clone(),
        )
        .await;
        match outcome {
            Attempt::Done(done) => return Ok(done),
            Attempt::Failed(e) => return Err(e),
            Attempt::Moved(e, written) if attempt < UPSERT_ATTEMPTS => {
                tracing::warn!(table = %table, attempt, error = %e, "another writer committed first; recomputing the upsert on the new table");
                if let Some(files) = written {
                    let left = target.delete_uncommitted(&files).await;
                    for (path, error) in left {
                        tracing::warn!(path = %path, error = %error, "could not delete an uncommitted file; delete it by hand");
                    }
                }
            }
            Attempt::Moved(e, _) => {
                return Err(format!(
                    "committing the snapshot: {e} (gave up after {attempt} attempts)"
                ))
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
    Moved(String, Option<Vec<iceberg::spec::DataFile>>),
    Failed(String),
}

async fn commit_upsert_once(
    target: &IcebergTarget,
    handle: &mut TableHandle,
    buffer: &mut UpsertBuffer,
    delete_format: DeleteFormat,
    state_dir: &Path,
    summary_extra: BTreeMap<String, String>,
) -> Attempt {
    match prepare_upsert(target, handle, buffer, delete_format, state_dir).await {
        Err(e) => Attempt::Failed(e),
        Ok(prepared) => prepared.commit(target, handle, summary_extra).await,
    }
}

/// One attempt's files and what the key index must learn once they land.
struct PreparedUpsert {
    table: String,
    index: KeyIndex,
    delta: RowDelta,
    /// The written rows' keys, 16 bytes each, in the order of the rows in
    /// the data files (kept on disk: one per key of the sync).
    written_keys: PathBuf,
    rows: u64,
    deleted: Vec<KeyHash>,
    deletes: u64,
}

impl PreparedUpsert {
    async fn commit(
        self,
        target: &IcebergTarget,
        handle: &mut TableHandle,
        summary_extra: BTreeMap<String, String>,
    ) -> Attempt {
        let Self {
            table,
            mut index,
            mut delta,
            written_keys,
            rows,
            deleted,
            deletes,
        } = self;
        delta.summary_extra = summary_extra;
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
        let snapshot = match target.commit_row_delta_with_retry(handle, delta, 1).await {
            Ok(snapshot) => snapshot,
            Err(e) if moved_on(&e) => {
                drop(index);
                let written = super::commit_surely_failed(&e).then_some(written);
                return Attempt::Moved(e.to_string(), written);
            }
            Err(e) => return Attempt::Failed(format!("committing the snapshot: {e}")),
        };
        super::fault_point("before_key_index_update");
        let files: Vec<String> = delta_files.iter().map(|(p, _)| p.clone()).collect();
        let counts: Vec<u64> = delta_files.iter().map(|(_, n)| *n).collect();
        let applied = WrittenRows::open(&written_keys, counts).and_then(|upserts| {
            index
                .apply_each(
                    snapshot.snapshot_id,
                    snapshot.parent_snapshot_id,
                    &files,
                    upserts,
                    &deleted,
                )
                .map_err(|e| e.to_string())
        });
        if let Err(e) = applied {
            // The table is right; the index catches up from the table next time.
            tracing::warn!(table = %table, error = %e, "recording the commit in the key index failed; the next sync replays it");
        }
        Attempt::Done(UpsertCommit {
            snapshot,
            rows,
            deletes,
        })
    }
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
    target: &IcebergTarget,
    handle: &mut TableHandle,
    buffer: &mut UpsertBuffer,
    delete_format: DeleteFormat,
    state_dir: &Path,
) -> Result<PreparedUpsert, String> {
    let table = format!("{}.{}", handle.namespace().join("."), handle.name());
    let index = KeyIndex::open(state_dir, handle, target.file_io())
        .await
        .map_err(|e| format!("opening the key index: {e}"))?;
    match index.state() {
        IndexState::Fresh => {}
        state => tracing::info!(table = %table, state = ?state, "key index brought up to date"),
    }

    // Every key's winner, in key order, against the key index: which held
    // rows are written (`u` for keys the table has), which old rows retire.
    let reader = index.reader().map_err(|e| e.to_string())?;
    let mut winners = RoaringBitmap::new();
    let mut updates = RoaringBitmap::new();
    let mut deleted: Vec<KeyHash> = Vec::new();
    let mut retired_keys: Vec<KeyHash> = Vec::new();
    let mut retire_by_id: BTreeMap<u32, RoaringTreemap> = BTreeMap::new();
    let mut deletes = 0u64;
    buffer.for_each_winner(|key, slot| {
        let old = reader.get(key).map_err(|e| e.to_string())?;
        match slot {
            Slot::Row(row) => {
                winners.insert(row);
                if old.is_some() {
                    updates.insert(row);
                }
            }
            Slot::Tombstone if old.is_some() => deleted.push(*key),
            Slot::Tombstone => {}
        }
        if let Some((file, pos)) = old {
            retire_by_id.entry(file).or_default().insert(pos);
            deletes += 1;
            if delete_format == DeleteFormat::Equality {
                retired_keys.push(*key);
            }
        }
        Ok(())
    })?;
    let mut retire: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
    for (id, positions) in retire_by_id {
        retire.insert(reader.path(id).map_err(|e| e.to_string())?, positions);
    }
    drop(reader);

    // The winning rows, read back from the held files, fitted to the
    // table's final columns; their keys noted in row order.
    let schema = handle.arrow_schema().clone();
    let written_keys = buffer.dir().join("written.keys");
    let mut keys_out = BufWriter::new(
        File::create(&written_keys).map_err(|e| format!("{}: {e}", written_keys.display()))?,
    );
    let mut writer = target
        .data_file_writer(handle)
        .await
        .map_err(|e| e.to_string())?;
    let mut rows = 0u64;
    for item in buffer.batches() {
        let (first_row, batch) = item?;
        let Some(mut batch) = winning_rows(&batch, first_row, &winners, &updates)? else {
            continue;
        };
        if batch.schema() != schema {
            batch = topicberg_iceberg::conform::conform(&batch, &schema)?;
        }
        let ids = batch
            .column_by_name("_olake_id")
            .ok_or("the batch has no _olake_id column")?
            .as_string::<i32>();
        for row in 0..batch.num_rows() {
            let key = parse_key_hash(ids.value(row)).ok_or("bad _olake_id")?;
            keys_out
                .write_all(&key)
                .map_err(|e| format!("{}: {e}", written_keys.display()))?;
        }
        rows += batch.num_rows() as u64;
        writer.write(&batch).await.map_err(|e| e.to_string())?;
    }
    keys_out
        .flush()
        .map_err(|e| format!("{}: {e}", written_keys.display()))?;
    let data_files = writer.finish().await.map_err(|e| e.to_string())?;
    let in_files: u64 = data_files.iter().map(|f| f.record_count()).sum();
    if in_files != rows {
        return Err(format!("{in_files} rows in the data files, {rows} written"));
    }

    // What to retire: the old row of every written key, and of every
    // tombstoned key the table has. Equality deletes name those keys
    // instead: rows with that `_olake_id` in earlier commits go, this
    // commit's new rows (same sequence number) stay.
    let (delete_files, replaced_dvs) = match delete_format {
        _ if retire.is_empty() => (Vec::new(), Vec::new()),
        DeleteFormat::Position => {
            let grouped: Vec<(String, Vec<u64>)> = retire
                .into_iter()
                .map(|(f, p)| (f, p.into_iter().collect()))
                .collect();
            let file = target
                .write_position_deletes(handle, &grouped)
                .await
                .map_err(|e| e.to_string())?;
            (file.into_iter().collect(), Vec::new())
        }
        DeleteFormat::Dv => {
            let current: HashMap<String, iceberg::spec::DataFile> = target
                .current_deletion_vectors(handle)
                .await
                .map_err(|e| e.to_string())?;
            let mut vectors = Vec::new();
            let mut replaced = Vec::new();
            for (data_file, mut bitmap) in retire {
                if let Some(old) = current.get(&data_file) {
                    bitmap |= target
                        .read_deletion_vector(old)
                        .await
                        .map_err(|e| e.to_string())?;
                    replaced.push(old.clone());
                }
                vectors.push((data_file, bitmap));
            }
            let files = target
                .write_deletion_vectors(handle, &vectors)
                .await
                .map_err(|e| e.to_string())?;
            (files, replaced)
        }
        DeleteFormat::Equality => {
            retired_keys.sort_unstable();
            let file = target
                .write_equality_deletes(handle, &retired_keys)
                .await
                .map_err(|e| e.to_string())?;
            (file.into_iter().collect(), Vec::new())
        }
    };
    Ok(PreparedUpsert {
        table,
        index,
        delta: RowDelta {
            data_files,
            delete_files,
            replaced_dvs,
            summary_extra: BTreeMap::new(),
        },
        written_keys,
        rows,
        deleted,
        deletes,
    })
}

/// The written rows' (key, data file number, position), read back from
/// the keys file with the data files' row counts.
struct WrittenRows {
    keys: BufReader<File>,
    path: PathBuf,
    counts: Vec<u64>,
    file: usize,
    pos: u64,
}

impl WrittenRows {
    fn open(path: &Path, counts: Vec<u64>) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(WrittenRows {
            keys: BufReader::with_capacity(1 << 20, file),
            path: path.to_path_buf(),
            counts,
            file: 0,
            pos: 0,
        })
    }
}

impl Iterator for WrittenRows {
    type Item = Result<([u8; 16], usize, u64), String>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.file < self.counts.len() && self.pos == self.counts[self.file] {
            self.file += 1;
            self.pos = 0;
        }
        if self.file == self.counts.len() {
            return None;
        }
        let mut key = [0u8; 16];
        if let Err(e) = self.keys.read_exact(&mut key) {
            return Some(Err(format!("{}: {e}", self.path.display())));
        }
        let item = (key, self.file, self.pos);
        self.pos += 1;
        Some(Ok(item))
    }
}
