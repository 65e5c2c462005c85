//! The commit stage of one table: dead letters, then the snapshot that
//! moves the table's offsets (`files_commit.rs` for an append's files,
//! `upsert_round.rs` for an upsert's round), or, among workers, the
//! writer's hand-over to the table's committer.

use topicberg_iceberg::{Destination, OffsetsAdvance, TableHandle};

use super::dlq;
use super::failure::CommitError;
use super::files_commit::{
    commit_files, commit_with_sets, hand_over, remove_uncommitted, Handing, Own,
};
use super::handoff::{self, Role};
use super::kept_index::IndexHome;
use super::pipeline::TableOutput;
use super::table::{Stage, TableState};
use super::upsert_round::{
    commit_upsert_table, commit_upsert_with_sets, hand_over_upsert, OwnRound, UpsertRound,
};
use crate::hooks;

/// Commits one table's sync: its dead letters first, then one snapshot
/// (append, or the upsert's data and deletes) that moves its offsets; a
/// writer hands its files to the table's committer instead, a committer
/// commits the sets handed to it with its own files.
/// `writers`: data file writers an upsert's winning rows may use at once.
#[allow(clippy::too_many_arguments)]
pub(super) async fn commit_table(
    destination: &Destination,
    home: IndexHome<'_>,
    state: &mut TableState,
    output: TableOutput,
    handle: &mut TableHandle,
    olake_timestamp_micros: i64,
    writers: usize,
    handing: Option<Handing<'_>>,
) {
    let started = std::time::Instant::now();
    let state = &mut *state;
    commit_stages(
        destination,
        home,
        state,
        output,
        handle,
        olake_timestamp_micros,
        writers,
        handing,
    )
    .await;
    state.report.commit_ms = started.elapsed().as_millis() as u64;
}

#[allow(clippy::too_many_arguments)]
async fn commit_stages(
    destination: &Destination,
    home: IndexHome<'_>,
    state: &mut TableState,
    mut output: TableOutput,
    handle: &mut TableHandle,
    olake_timestamp_micros: i64,
    writers: usize,
    handing: Option<Handing<'_>>,
) {
    let invalid = output.skipped + output.dead.len() as u64;
    let records: u64 = output
        .drained
        .iter()
        .map(|d| d.records)
        .sum::<u64>()
        .saturating_sub(invalid);
    state.report.records = records;
    state.report.bytes = output.drained.iter().map(|d| d.bytes).sum();
    state.report.newest_timestamp_ms = output
        .drained
        .iter()
        .filter_map(|d| d.newest_timestamp_ms)
        .max();
    let advance = state.advance(&output.drained);
    let micros = olake_timestamp_micros;
    let dead_letters = commit_dead_letters(destination, state, &output, handle, &advance, micros);
    if !dead_letters.await {
        state.report.orphan_files = remove_uncommitted(destination, &output.data_files).await;
        return;
    }
    let moves = (records > 0 && !output.data_files.is_empty()) || invalid > 0;
    if let Some(buffer) = output.upsert.take() {
        let round = UpsertRound {
            buffer,
            advance,
            records,
            moves_without_rows: invalid > 0,
        };
        match (state.role, handing) {
            (Role::Writer, Some(handing)) => {
                hand_over_upsert(destination, state, handing.handed, handle, round, writers).await
            }
            (Role::Committer, Some(handing)) => {
                let own = OwnRound::Read(Box::new(round));
                commit_upsert_with_sets(destination, home, state, handle, own, writers, handing)
                    .await
            }
            _ => commit_upsert_table(destination, home, state, handle, round, writers).await,
        }
        return;
    }
    match (state.role, handing) {
        (Role::Writer, Some(handing)) => {
            let set = handoff::file_set(&advance, output.data_files, records);
            if let Some(set) = set.filter(|_| moves) {
                hand_over(destination, state, handing.handed, handle, set).await;
            }
            return;
        }
        (Role::Committer, Some(handing)) => {
            // Only transaction markers read: no snapshot of its own.
            let own = match moves {
                true => Own {
                    data_files: output.data_files,
                    advance,
                    records,
                },
                false => Own::nothing(advance.topic),
            };
            commit_with_sets(destination, state, handle, own, handing).await;
            return;
        }
        _ => {}
    }
    if (records == 0 || output.data_files.is_empty()) && invalid == 0 {
        // Nothing to add (e.g. only transaction markers were left); the
        // table keeps its offsets and the group is repaired to them.
        return;
    }
    commit_files(
        destination,
        state,
        handle,
        output.data_files,
        advance,
        records,
    )
    .await;
}

/// The dead letters first: a crash before the table's commit leaves them
/// ahead, and the rerun skips what they already hold. False when their
/// commit failed (the table then commits nothing).
async fn commit_dead_letters(
    destination: &Destination,
    state: &mut TableState,
    output: &TableOutput,
    handle: &TableHandle,
    advance: &OffsetsAdvance,
    micros: i64,
) -> bool {
    if output.dead.is_empty() {
        return true;
    }
    let (namespace, table) = (handle.namespace(), handle.name());
    match dlq::commit_dead_letters(destination, namespace, table, &output.dead, advance, micros)
        .await
    {
        Ok(done) => {
            state.report.dead_letter_records = output.dead.len() as u64;
            state.report.dead_letter_table = Some(done.table);
            hooks::fault_point("after_dead_letter_commit");
            true
        }
        Err(e) => {
            state.fail(Stage::Commit, CommitError::DeadLetters(e));
            false
        }
    }
}
