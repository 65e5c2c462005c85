//! The commit stage of one table: dead letters, then the snapshot that
//! moves the table's offsets; files of a commit that surely failed are
//! deleted.

use topicberg_iceberg::{Destination, OffsetsAdvance, TableHandle};

use super::failure::CommitError;
use super::kept_index::IndexHome;
use super::pipeline::TableOutput;
use super::report::{CommitReport, TableStatus};
use super::table::{CommitRefused, Stage, TableState};
use super::{dlq, upsert_commit};
use crate::hooks;

/// Commits one table's sync: its dead letters first, then one snapshot
/// (append, or the upsert's data and deletes) that moves its offsets.
/// `writers`: data file writers an upsert's winning rows may use at once.
pub(super) async fn commit_table(
    destination: &Destination,
    home: IndexHome<'_>,
    state: &mut TableState,
    output: TableOutput,
    handle: &mut TableHandle,
    olake_timestamp_micros: i64,
    writers: usize,
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
    )
    .await;
    state.report.commit_ms = started.elapsed().as_millis() as u64;
}

async fn commit_stages(
    destination: &Destination,
    home: IndexHome<'_>,
    state: &mut TableState,
    mut output: TableOutput,
    handle: &mut TableHandle,
    olake_timestamp_micros: i64,
    writers: usize,
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
    if let Some(buffer) = output.upsert.take() {
        if buffer.messages() == 0 {
            if invalid > 0 {
                // Only invalid messages: a snapshot that just moves the offsets.
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
                state.report.commit = Some(commit);
                state.record_committed(&advance);
                tracing::info!(
                    table = %state.table, snapshot_id, records, rows = done.rows,
                    deletes = done.deletes, attempts = done.snapshot.attempts, "committed upsert snapshot"
                );
            }
            Err(CommitRefused::Superseded(e)) => state.supersede(e.detail),
            Err(CommitRefused::Failed(e)) => state.fail(Stage::Commit, e),
        }
        return;
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

/// Commits an append of `data_files` (possibly none: only the offsets move)
/// and records the outcome in the table's report.
pub(super) async fn commit_files(
    destination: &Destination,
    state: &mut TableState,
    handle: &mut TableHandle,
    data_files: Vec<iceberg::spec::DataFile>,
    advance: OffsetsAdvance,
    records: u64,
) {
    state.report.data_files = data_files.len();
    state.report.data_file_bytes = data_files.iter().map(|f| f.file_size_in_bytes()).sum();
    let written = data_files.clone();
    match destination
        .commit_append_moving(handle, data_files, advance.clone())
        .await
    {
        Ok(snapshot) => {
            state.report.status = TableStatus::Committed;
            state.report.snapshot_id = Some(snapshot.snapshot_id);
            state.report.commit = Some(CommitReport::from_summary(
                snapshot.snapshot_id,
                &snapshot.summary,
            ));
            state.record_committed(&advance);
            state.report.commit_retries = snapshot.attempts.saturating_sub(1);
            tracing::info!(
                table = %state.table, snapshot_id = snapshot.snapshot_id, records,
                data_files = state.report.data_files, attempts = snapshot.attempts, "committed snapshot"
            );
        }
        Err(e) => {
            let surely_failed = super::commit_surely_failed(&e);
            match CommitRefused::from_iceberg(e) {
                CommitRefused::Superseded(e) => {
                    state.report.data_files = 0;
                    state.report.data_file_bytes = 0;
                    state.supersede(e.detail);
                }
                CommitRefused::Failed(why) => state.fail(Stage::Commit, why),
            }
            state.report.orphan_files = if surely_failed {
                remove_uncommitted(destination, &written).await
            } else {
                // The commit may still land: the files may become live.
                written.iter().map(|f| f.file_path().to_string()).collect()
            };
        }
    }
}

/// Deletes files a failed table wrote and no snapshot references; returns
/// those that could not be deleted (listed in the report for cleanup).
pub(super) async fn remove_uncommitted(
    destination: &Destination,
    files: &[iceberg::spec::DataFile],
) -> Vec<String> {
    if files.is_empty() {
        return Vec::new();
    }
    let left = destination.delete_uncommitted(files).await;
    for (path, error) in &left {
        tracing::warn!(path = %path, error = %error, "could not delete an uncommitted file; delete it by hand");
    }
    tracing::info!(
        files = files.len(),
        left = left.len(),
        "deleted the files of a failed table"
    );
    left.into_iter().map(|(path, _)| path).collect()
}
