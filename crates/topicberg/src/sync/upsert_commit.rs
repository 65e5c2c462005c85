//! Committing an upsert table's sync: the winning rows become data files,
//! the rows they replace (and the keys tombstones delete) become position
//! deletes (v2), deletion vectors (v3) or equality deletes on `_olake_id`,
//! all in one snapshot, and the key index records the new locations only
//! after the commit landed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use roaring::RoaringTreemap;
use topicberg_core::config::DeleteFormat;
use topicberg_iceberg::key_index::{IndexState, KeyIndex, RowLocation};
use topicberg_iceberg::row_delta::RowDelta;
use topicberg_iceberg::{CommittedSnapshot, IcebergTarget, TableHandle};

use super::upsert::{KeyHash, UpsertBuffer};

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
    buffer: UpsertBuffer,
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
            &buffer,
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
    buffer: &UpsertBuffer,
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
    upserts: Vec<(KeyHash, String, u64)>,
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
            upserts,
            deleted,
            deletes,
        } = self;
        delta.summary_extra = summary_extra;
        let written: Vec<iceberg::spec::DataFile> = delta
            .data_files
            .iter()
            .chain(&delta.delete_files)
            .cloned()
            .collect();
        let rows = upserts.len() as u64;
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
        if let Err(e) = index.apply(
            snapshot.snapshot_id,
            snapshot.parent_snapshot_id,
            &upserts,
            &deleted,
        ) {
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
    buffer: &UpsertBuffer,
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
    let written = buffer.written_keys();
    let deleted = buffer.deleted_keys();
    let old_written = index
        .lookup(written.iter().copied())
        .map_err(|e| e.to_string())?;
    let old_deleted = index
        .lookup(deleted.iter().copied())
        .map_err(|e| e.to_string())?;
    let existing: HashSet<KeyHash> = written
        .iter()
        .zip(&old_written)
        .filter(|(_, old)| old.is_some())
        .map(|(k, _)| *k)
        .collect();

    // The winning rows, `u` for keys the table already has.
    let batches = buffer.winning_batches(|k| if existing.contains(k) { "u" } else { "c" })?;
    let mut writer = target
        .data_file_writer(handle)
        .await
        .map_err(|e| e.to_string())?;
    for batch in &batches {
        writer.write(batch).await.map_err(|e| e.to_string())?;
    }
    let data_files = writer.finish().await.map_err(|e| e.to_string())?;
    // Rows were written in `written` order, file after file.
    let mut upserts: Vec<(KeyHash, String, u64)> = Vec::with_capacity(written.len());
    let mut keys = written.iter();
    for file in &data_files {
        for pos in 0..file.record_count() {
            let key = keys
                .next()
                .ok_or("more rows in the data files than keys written")?;
            upserts.push((*key, file.file_path().to_string(), pos));
        }
    }
    if keys.next().is_some() {
        return Err("fewer rows in the data files than keys written".into());
    }

    // What to retire: the old row of every written key, and of every
    // tombstoned key the table has. Equality deletes name those keys
    // instead: rows with that `_olake_id` in earlier commits go, this
    // commit's new rows (same sequence number) stay.
    let retired_keys: Vec<KeyHash> = written
        .iter()
        .zip(&old_written)
        .chain(deleted.iter().zip(&old_deleted))
        .filter(|(_, old)| old.is_some())
        .map(|(k, _)| *k)
        .collect();
    let mut retire: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for RowLocation { data_file, pos } in old_written.into_iter().chain(old_deleted).flatten() {
        retire.entry(data_file).or_default().push(pos);
    }
    let deletes: u64 = retire.values().map(|p| p.len() as u64).sum();
    let (delete_files, replaced_dvs) = match delete_format {
        _ if retire.is_empty() => (Vec::new(), Vec::new()),
        DeleteFormat::Position => {
            let grouped: Vec<(String, Vec<u64>)> = retire
                .into_iter()
                .map(|(f, mut p)| {
                    p.sort_unstable();
                    (f, p)
                })
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
            for (data_file, positions) in retire {
                let mut bitmap: RoaringTreemap = positions.into_iter().collect();
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
        upserts,
        deleted,
        deletes,
    })
}
