//! An upsert table's round: committed alone (a scheduled sync, a single
//! follower), staged by a writer among workers, or committed by the
//! table's committer together with the writers' staged sets
//! (`handoff.rs`).
//!
//! A writer stages its round's winning row per key (and its winning
//! tombstones) without reading the key index; the committer reads the
//! staged rows and tombstones into its own round's buffer, where the one
//! key rule (`upsert.rs`) picks each key's winner among every worker's
//! messages, and commits them as its own: one snapshot, one key index,
//! `_op_type` from the table as it is. The staged files are deleted once
//! the commit landed; they are never part of the table.

use std::path::Path;

use futures::TryStreamExt;
use topicberg_iceberg::{Destination, OffsetsAdvance, TableHandle};

use super::failure::{CommitError, UpsertError};
use super::files_commit::{commit_files, drop_stale, gather_sets, hand_over, Handing};
use super::handoff::{self, Gathered, HandedSets};
use super::kept_index::IndexHome;
use super::report::{CommitReport, TableStatus};
use super::table::{CommitRefused, Stage, TableState};
use super::upsert::{UpsertBuffer, Version};
use super::upsert_commit;

/// An upsert table's round: its buffered messages, where it moves the
/// offsets and its messages.
pub(super) struct UpsertRound {
    pub(super) buffer: UpsertBuffer,
    pub(super) advance: OffsetsAdvance,
    pub(super) records: u64,
    /// The offsets move even when no message is held: invalid messages
    /// were read, or a committer took staged sets of such ranges.
    pub(super) moves_without_rows: bool,
}

/// Commits an upsert table's round: its winning rows and the deletes of
/// the rows they replace in one snapshot (only the offsets when no
/// message is held but the offsets move).
pub(super) async fn commit_upsert_table(
    destination: &Destination,
    home: IndexHome<'_>,
    state: &mut TableState,
    handle: &mut TableHandle,
    round: UpsertRound,
    writers: usize,
) {
    let UpsertRound {
        buffer,
        advance,
        records,
        moves_without_rows,
    } = round;
    if buffer.messages() == 0 {
        if moves_without_rows {
            // Only invalid messages (or staged sets of such ranges): a
            // snapshot that just moves the offsets.
            commit_files(destination, state, handle, Vec::new(), advance, records).await;
        }
        return;
    }
    let delete_format = state
        .settings
        .upsert()
        .expect("an upsert table")
        .delete_format;
    let done = upsert_commit::commit_upsert(
        destination,
        handle,
        buffer,
        delete_format,
        home,
        advance.clone(),
        writers,
    )
    .await;
    match done {
        Ok(done) => {
            let snapshot_id = done.snapshot.snapshot_id;
            let commit = CommitReport::from_summary(snapshot_id, &done.snapshot.summary);
            state.report.status = TableStatus::Committed;
            state.report.snapshot_id = Some(snapshot_id);
            state.report.data_files = commit.added_data_files as usize;
            state.report.data_file_bytes = done.data_file_bytes;
            state.report.commit_retries = done.retries;
            state.report.older_than_table = done.outranked;
            state.report.commit = Some(commit);
            state.record_committed(&advance);
            tracing::info!(
                table = %state.table, snapshot_id, records, rows = done.rows,
                deletes = done.deletes, older_than_table = done.outranked,
                attempts = done.snapshot.attempts,
                "committed upsert snapshot: {} records into {}, {} rows written, {} deleted",
                topicberg_core::human::count(records), state.table,
                topicberg_core::human::count(done.rows), topicberg_core::human::count(done.deletes)
            );
        }
        Err(CommitRefused::Superseded(e)) => state.supersede(e.detail),
        Err(CommitRefused::Failed(e)) => state.fail(Stage::Commit, e),
    }
}

/// A writer's round of an upsert table shared among workers: its winners
/// staged as a set for the table's committer.
pub(super) async fn hand_over_upsert(
    destination: &Destination,
    state: &mut TableState,
    handed: &HandedSets,
    handle: &mut TableHandle,
    round: UpsertRound,
    writers: usize,
) {
    let UpsertRound {
        mut buffer,
        advance,
        records,
        moves_without_rows,
    } = round;
    if buffer.messages() == 0 && !moves_without_rows {
        return;
    }
    let staged = match buffer.messages() {
        0 => Ok((Vec::new(), Vec::new())),
        _ => upsert_commit::stage_winners(destination, handle, &mut buffer, writers).await,
    };
    drop(buffer);
    let (files, tombstones) = match staged {
        Ok(staged) => staged,
        Err(e) => return state.fail(Stage::Commit, CommitError::Upsert(e)),
    };
    let Some(mut set) = handoff::file_set(&advance, files, records) else {
        return;
    };
    set.staged = true;
    set.tombstones = tombstones;
    hand_over(destination, state, handed, handle, set).await;
}

/// What a committer's round of an upsert table brings of its own.
pub(super) enum OwnRound<'a> {
    /// Its buffered messages.
    Read(Box<UpsertRound>),
    /// Nothing read of the table: a buffer is made under this folder
    /// when a set is taken.
    Nothing {
        spill_dir: &'a Path,
        /// The stream's `order_by`.
        order_by: Option<&'a str>,
    },
}

/// A committer's round of an upsert table shared among workers: the
/// staged sets that continue the table's offsets read into its own
/// round's buffer, then committed as one round.
pub(super) async fn commit_upsert_with_sets(
    destination: &Destination,
    home: IndexHome<'_>,
    state: &mut TableState,
    handle: &mut TableHandle,
    own: OwnRound<'_>,
    writers: usize,
    handing: Handing<'_>,
) {
    let gathered = gather_sets(destination, state, handle, handing).await;
    let nothing_waits = gathered.waiting == 0;
    drop_stale(destination, state, &gathered.stale).await;
    let round = match own {
        OwnRound::Read(round) => Some(*round),
        OwnRound::Nothing { .. } if gathered.taken.is_empty() => None,
        OwnRound::Nothing {
            spill_dir,
            order_by,
        } => match UpsertBuffer::new(spill_dir, order_by) {
            Ok(buffer) => Some(UpsertRound {
                buffer,
                advance: OffsetsAdvance {
                    topic: state.topic().to_string(),
                    partitions: Default::default(),
                },
                records: 0,
                moves_without_rows: false,
            }),
            Err(e) => return state.fail(Stage::Commit, CommitError::Upsert(e.into())),
        },
    };
    if let Some(mut round) = round {
        if let Err(e) = upsert_commit::refuse_among_workers(&round.buffer) {
            return state.fail(Stage::Commit, CommitError::Upsert(e));
        }
        if !gathered.taken.is_empty() {
            if let Err(e) = take_staged(destination, &mut round.buffer, &gathered).await {
                return state.fail(Stage::Commit, e);
            }
            round.advance.partitions.extend(gathered.partitions.clone());
            round.moves_without_rows = true;
        }
        commit_upsert_table(destination, home, state, handle, round, writers).await;
    }
    let committed = state.report.status == TableStatus::Committed;
    if committed && !gathered.taken.is_empty() {
        state.report.handed_sets = gathered.taken.len() as u64;
        state.report.handed_records = gathered.records;
        destination.drop_file_sets(&gathered.taken).await;
        // The staged rows are in the table's own files now.
        upsert_commit::delete_uncommitted(destination, &gathered.data_files).await;
    }
    let untouched = state.report.status == TableStatus::Unchanged;
    if (committed || untouched) && nothing_waits && handing.owns_all {
        handing.handed.listed_alone(&state.table);
    }
}

/// Reads the taken sets' staged rows and tombstones into `buffer`.
async fn take_staged(
    destination: &Destination,
    buffer: &mut UpsertBuffer,
    gathered: &Gathered,
) -> Result<(), CommitError> {
    for file in &gathered.data_files {
        let mut rows = destination
            .staged_rows(file)
            .await
            .map_err(CommitError::Handoff)?;
        while let Some(batch) = rows.try_next().await.map_err(CommitError::Handoff)? {
            buffer.add_batch(batch).map_err(UpsertError::from)?;
        }
    }
    for t in &gathered.tombstones {
        let version = Version {
            timestamp: t.timestamp,
            partition: t.partition,
            offset: t.offset,
        };
        buffer
            .add_tombstone(t.key, version)
            .map_err(UpsertError::from)?;
    }
    Ok(())
}
