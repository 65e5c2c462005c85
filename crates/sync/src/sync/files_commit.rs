//! Committing data files as they are: an append's snapshot, a writer's
//! file set handed to its table's committer, and a committer's snapshot of
//! its own files with the sets handed to it (`handoff.rs`); the files of a
//! commit that surely failed are deleted.

use topicberg_iceberg::{Destination, OffsetsAdvance, TableHandle};

use super::failure::CommitError;
use super::handoff::{self, Gathered, HandedSets};
use super::report::{CommitReport, TableStatus};
use super::table::{CommitRefused, Stage, TableState};

/// A follower's part in committing tables shared among workers
/// (`handoff.rs`).
#[derive(Clone, Copy)]
pub(super) struct Handing<'a> {
    /// Its sets handed over and not yet seen committed.
    pub(super) handed: &'a HandedSets,
    /// It owns every partition of the table's topic.
    pub(super) owns_all: bool,
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
                attempts = snapshot.attempts, "committed snapshot: {} records into {}",
                topicberg_core::human::count(records), state.table
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
pub(super) async fn hand_over(
    destination: &Destination,
    state: &mut TableState,
    handed: &HandedSets,
    handle: &mut TableHandle,
    set: topicberg_iceberg::FileSet,
) {
    let records = set.records;
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
    drop_stale(destination, state, &gathered.stale).await;
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

/// Deletes the sets that can never land, whatever becomes of this
/// round's commit (their writers read those ranges again).
pub(super) async fn drop_stale(destination: &Destination, state: &TableState, stale: &[String]) {
    if stale.is_empty() {
        return;
    }
    tracing::info!(
        table = %state.table, sets = stale.len(),
        "dropping handed file sets that can never land (the table holds their ranges, or they waited too long for the sets before them); their writers read those ranges again"
    );
    destination.drop_file_sets(stale).await;
}

/// The sets a committer takes this round (none when it need not list, or
/// the listing failed: its own files commit and the sets wait).
pub(super) async fn gather_sets(
    destination: &Destination,
    state: &TableState,
    handle: &TableHandle,
    handing: Handing<'_>,
) -> Gathered {
    if !handing.handed.must_list(&state.table, handing.owns_all) {
        return Gathered::default();
    }
    let own = state.plans.iter().map(|p| p.range.partition).collect();
    let staged = state.settings.upsert().is_some();
    let topic = state.topic();
    match handoff::gather(destination, handle, topic, &state.offsets, &own, staged).await {
        Ok(gathered) => gathered,
        Err(e) => {
            tracing::warn!(table = %state.table, error = %e, "the handed file sets could not be read; they wait for the next round");
            Gathered::default()
        }
    }
}
