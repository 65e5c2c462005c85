//! The commit stage of one table: dead letters, then the snapshot that
//! moves the table's offsets; files of a commit that surely failed are
//! deleted.

use topicberg_iceberg::{Destination, OffsetsAdvance, TableHandle};

use super::failure::CommitError;
use super::handoff::{self, Gathered, HandedSets, Role};
use super::kept_index::IndexHome;
use super::pipeline::TableOutput;
use super::report::{CommitReport, TableStatus};
use super::table::{CommitRefused, Stage, TableState};
use super::{dlq, upsert_commit};
use crate::hooks;

/// A follower's part in committing tables shared among workers
/// (`handoff.rs`).
#[derive(Clone, Copy)]
pub(super) struct Handing<'a> {
    /// Its sets handed over and not yet seen committed.
    pub(super) handed: &'a HandedSets,
    /// It owns every partition of the table's topic.
    pub(super) owns_all: bool,
}

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
    match (state.role, handing) {
        (Role::Writer, Some(handing)) => {
            if moves {
                let files = output.data_files;
                hand_over(
                    destination,
                    state,
                    handing.handed,
                    handle,
                    files,
                    advance,
                    records,
                )
                .await;
            }
            return;
        }
        (Role::Committer, Some(handing)) if output.upsert.is_none() => {
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
    if let Some(buffer) = output.upsert.take() {
        let upsert = UpsertRound {
            buffer,
            advance,
            records,
            invalid,
        };
        commit_upsert_table(destination, home, state, handle, upsert, writers).await;
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
    let own = data_files.len();
    commit_files_of(
        destination,
        state,
        handle,
        data_files,
        own,
        advance,
        records,
    )
    .await;
}

/// [`commit_files`] where only the first `own` files are this worker's
/// (the others were handed over by other workers: they are neither
/// counted in its report nor deleted when the commit fails, since their
/// set may still land).
async fn commit_files_of(
    destination: &Destination,
    state: &mut TableState,
    handle: &mut TableHandle,
    data_files: Vec<iceberg::spec::DataFile>,
    own: usize,
    advance: OffsetsAdvance,
    records: u64,
) {
    let written: Vec<_> = data_files[..own].to_vec();
    let data_files_total = data_files.len();
    state.report.data_files = own;
    state.report.data_file_bytes = written.iter().map(|f| f.file_size_in_bytes()).sum();
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
                data_files = state.report.data_files, handed_files = data_files_total - own,
                attempts = snapshot.attempts, "committed snapshot"
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

/// A writer's round of a table shared among workers: its files, handed to
/// the table's committer as a file set (`handoff.rs`). Columns the round
/// added go into the table first, in a snapshot of their own (the set's
/// files use them).
async fn hand_over(
    destination: &Destination,
    state: &mut TableState,
    handed: &HandedSets,
    handle: &mut TableHandle,
    data_files: Vec<iceberg::spec::DataFile>,
    advance: OffsetsAdvance,
    records: u64,
) {
    let Some(set) = handoff::file_set(&advance, data_files, records) else {
        return;
    };
    state.report.data_files = set.data_files.len();
    state.report.data_file_bytes = set.data_files.iter().map(|f| f.file_size_in_bytes()).sum();
    let published = async {
        if !handle.pending_schema_changes().is_empty() {
            destination
                .commit_append(handle, Vec::new(), Default::default())
                .await?;
        }
        destination.publish_file_set(handle, &set).await
    };
    match published.await {
        Ok(location) => {
            tracing::info!(
                table = %state.table, set = %location, records,
                data_files = set.data_files.len(), "handed files to the table's committer"
            );
            handed.push(&state.table, location, set.partitions);
            state.report.status = TableStatus::Handed;
        }
        Err(e) => {
            state.report.data_files = 0;
            state.report.data_file_bytes = 0;
            state.fail(Stage::Commit, CommitError::Handoff(e));
            state.report.orphan_files = remove_uncommitted(destination, &set.data_files).await;
        }
    }
}

/// What a committer's own round of a table adds to its snapshot.
pub(super) struct Own {
    pub(super) data_files: Vec<iceberg::spec::DataFile>,
    pub(super) advance: OffsetsAdvance,
    pub(super) records: u64,
}

impl Own {
    /// A round with nothing of its own to commit.
    pub(super) fn nothing(topic: String) -> Self {
        Self {
            data_files: Vec::new(),
            advance: OffsetsAdvance {
                topic,
                partitions: Default::default(),
            },
            records: 0,
        }
    }
}

/// A committer's round of a table shared among workers: its own files and
/// the sets the writers handed over that continue the table's offsets, in
/// one snapshot (`handoff.rs`). Nothing of its own and no set: no snapshot.
pub(super) async fn commit_with_sets(
    destination: &Destination,
    state: &mut TableState,
    handle: &mut TableHandle,
    own: Own,
    handing: Handing<'_>,
) {
    let gathered = gather_sets(destination, state, handle, handing).await;
    let nothing_waits = gathered.waiting == 0;
    if !gathered.stale.is_empty() {
        tracing::info!(
            table = %state.table, sets = gathered.stale.len(),
            "dropping handed file sets that can never land (the table holds their ranges, or they waited too long for the sets before them); their writers read those ranges again"
        );
        // They can never land, whatever becomes of this commit.
        destination.drop_file_sets(&gathered.stale).await;
    }
    if own.advance.partitions.is_empty() && gathered.taken.is_empty() {
        if nothing_waits && handing.owns_all {
            handing.handed.listed_alone(&state.table);
        }
        return;
    }
    let Gathered {
        data_files: handed_files,
        partitions,
        records: handed_records,
        taken,
        ..
    } = gathered;
    let mut advance = own.advance;
    advance.partitions.extend(partitions);
    let own_files = own.data_files.len();
    let mut data_files = own.data_files;
    data_files.extend(handed_files);
    commit_files_of(
        destination,
        state,
        handle,
        data_files,
        own_files,
        advance,
        own.records,
    )
    .await;
    if state.report.status == TableStatus::Committed {
        state.report.handed_sets = taken.len() as u64;
        state.report.handed_records = handed_records;
        destination.drop_file_sets(&taken).await;
        if nothing_waits && handing.owns_all {
            handing.handed.listed_alone(&state.table);
        }
    }
}

/// The sets a committer takes this round (none when it need not list, or
/// the listing failed: its own files commit and the sets wait).
async fn gather_sets(
    destination: &Destination,
    state: &TableState,
    handle: &TableHandle,
    handing: Handing<'_>,
) -> Gathered {
    if !handing.handed.must_list(&state.table, handing.owns_all) {
        return Gathered::default();
    }
    let own = state.plans.iter().map(|p| p.range.partition).collect();
    match handoff::gather(destination, handle, state.topic(), &state.offsets, &own).await {
        Ok(gathered) => gathered,
        Err(e) => {
            tracing::warn!(table = %state.table, error = %e, "the handed file sets could not be read; they wait for the next round");
            Gathered::default()
        }
    }
}

/// An upsert table's round: its buffered messages, where it moves the
/// offsets, its messages and invalid ones.
struct UpsertRound {
    buffer: super::upsert::UpsertBuffer,
    advance: OffsetsAdvance,
    records: u64,
    invalid: u64,
}

/// Commits an upsert table's round: its winning rows and the deletes of
/// the rows they replace in one snapshot (only the offsets when every
/// message was invalid).
async fn commit_upsert_table(
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
        invalid,
    } = round;
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
}
