//! A follower's tables kept healthy while it follows: every
//! `maintain.follow_every` a background task runs `maintain`'s steps on
//! the job's tables (compaction of the small files and delete files its
//! frequent commits leave, manifest rewrite, snapshot expiry past
//! `maintain.follow_max_snapshot_age`, orphan removal) through the
//! follower's own catalog client. Passes never overlap; the rounds go on
//! meanwhile. Every maintenance commit is guarded as `maintain`'s are: a
//! compaction carries over the deletes the rounds committed meanwhile (or
//! is planned again), a round whose commit meets the compaction carries its
//! deletes through the compaction's row moves (or computes them again), so
//! a row is never lost nor resurrected.
//!
//! In a job run by several workers, a worker's passes maintain only the
//! tables it leads ([`Leading`]: those whose first topic's partition 0 the
//! group assigned it), so each table is maintained in one place.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use topicberg_core::Job;
use topicberg_iceberg::Destination;
use tracing::Instrument;

use crate::maintain::{run_maintain_on, MaintainOptions, MaintainReport};
use crate::stop::StopSignal;

/// The topics whose partition 0 the group assigned this follower, kept
/// by the follower after every round; a pass maintains only the tables of
/// those (`MaintainOptions::leading`).
pub(crate) type Leading = Arc<std::sync::Mutex<BTreeSet<String>>>;

/// What the background maintenance did so far (shared with the report).
#[derive(Debug, Default)]
pub(crate) struct MaintenanceTotals {
    pub(crate) passes: AtomicU64,
    pub(crate) failed_passes: AtomicU64,
    pub(crate) files_compacted: AtomicU64,
    pub(crate) snapshots_expired: AtomicU64,
}

impl MaintenanceTotals {
    fn count(&self, report: &MaintainReport) {
        self.passes.fetch_add(1, Ordering::Relaxed);
        if !report.succeeded() {
            self.failed_passes.fetch_add(1, Ordering::Relaxed);
        }
        for table in &report.tables {
            if let Some(c) = &table.compaction {
                let files = c.data_files_rewritten as u64;
                self.files_compacted.fetch_add(files, Ordering::Relaxed);
            }
            if let Some(e) = &table.expiry {
                let expired = e.snapshots_expired as u64;
                self.snapshots_expired.fetch_add(expired, Ordering::Relaxed);
            }
        }
    }
}

/// The background maintenance of a follower.
pub(crate) struct Maintenance {
    /// Resolves when the thread's work ended (or the thread is gone).
    done: tokio::sync::oneshot::Receiver<()>,
    /// Cuts the pass in progress (past the stop timeout).
    cut: Arc<tokio::sync::Notify>,
}

/// Starts the background maintenance of a follower, if the job asks for
/// it (`maintain.follow_every` not `0s`). It ends after the pass in
/// progress once `stop` is requested. It runs on a thread of the blocking
/// pool (`maintain`'s steps hold borrows across their awaits, so they are
/// driven there rather than spawned as a task).
pub(crate) fn spawn(
    job: &Job,
    destination: Arc<Destination>,
    stop: Arc<StopSignal>,
    totals: Arc<MaintenanceTotals>,
    leading: Leading,
) -> Option<Maintenance> {
    let every = job.maintain.follow_every?;
    let mut job = job.clone();
    job.maintain.max_snapshot_age = job.maintain.follow_max_snapshot_age;
    let span = tracing::info_span!("follow_maintenance");
    let runtime = tokio::runtime::Handle::current();
    let cut = Arc::new(tokio::sync::Notify::new());
    let cut_here = Arc::clone(&cut);
    let (finished, done) = tokio::sync::oneshot::channel();
    // The future is made on the thread: it need not be `Send`.
    let thread = std::thread::Builder::new().name("follow-maintenance".into());
    let spawned = thread.spawn(move || {
        topicberg_iceberg::background::lower_priority("follow-maintenance");
        let work = async move {
            tracing::info!(
                every_s = every.as_secs(),
                max_snapshot_age_s = job.maintain.max_snapshot_age.as_secs(),
                "maintaining the tables while following"
            );
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = stop.wait() => return,
                }
                crate::hooks::pause_point("before_follow_maintenance").await;
                tokio::select! {
                    () = pass(&job, &destination, &totals, &leading) => {}
                    () = cut_here.notified() => return,
                }
            }
        };
        runtime.block_on(work.instrument(span));
        let _ = finished.send(());
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start the maintenance thread: the tables are not maintained while following");
        return None;
    }
    Some(Maintenance { done, cut })
}

async fn pass(job: &Job, destination: &Destination, totals: &MaintenanceTotals, leading: &Leading) {
    let leading = leading.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let options = MaintainOptions {
        tiered: true,
        rewrite_budget: job.maintain.follow_rewrite_bytes,
        leading: Some(leading),
        ..MaintainOptions::default()
    };
    match run_maintain_on(job, &options, destination).await {
        Ok(report) => {
            totals.count(&report);
            if !report.succeeded() {
                tracing::warn!("a table's maintenance failed; the next pass tries again");
            }
        }
        Err(e) => {
            totals.passes.fetch_add(1, Ordering::Relaxed);
            totals.failed_passes.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "maintenance pass failed; the next pass tries again");
        }
    }
}

/// Waits for the task to end its pass, at most `timeout`; then aborts it
/// (what a cut pass wrote and did not commit is an orphan a later pass
/// removes).
pub(crate) async fn finish(maintenance: Maintenance, timeout: Duration) {
    let Maintenance { mut done, cut } = maintenance;
    if tokio::time::timeout(timeout, &mut done).await.is_err() {
        tracing::warn!("the maintenance pass did not end within the stop timeout: cut");
        cut.notify_one();
        let _ = done.await;
    }
}
