//! A maintenance run of the service: `topicberg maintain` on the job's
//! tables (compaction, snapshot expiry, orphan removal), started by hand
//! (`POST /api/jobs/{id}/maintain`) or by the job's maintenance schedule.
//! It shares the job's one-run-at-a-time slot with its syncs, so it never
//! runs at the same time as that job's sync in this service (and the
//! commit rules keep it safe beside syncs elsewhere). It is not cancelled:
//! each table's steps commit or leave the table as it was.

use tracing::Instrument;

use topicberg_sync::maintain::{run_maintain, MaintainOptions, MaintainReport};

use super::{Outcome, RunError, RunReport, Runner};
use crate::job_file::load_job;
use crate::run_store::RunStatus;

impl Runner {
    /// Loads the job file and maintains the job's tables.
    pub(super) fn maintain(&self, job_id: i64, toml: &str, span: &tracing::Span) -> Outcome {
        let job = match load_job(toml, self.data_dir.as_deref()) {
            Ok(loaded) => loaded.job,
            Err(e) => return Outcome::invalid(toml, job_id, e),
        };
        let runtime = tokio::runtime::Handle::current();
        let result = runtime
            .block_on(run_maintain(&job, &MaintainOptions::default()).instrument(span.clone()))
            .map(RunReport::Maintain)
            .map_err(RunError::from);
        Outcome {
            job_name: job.name.clone(),
            result,
            lag: None,
        }
    }
}

/// A maintenance run's status: failed when a table's maintenance failed,
/// naming each.
pub(super) fn classify(report: &MaintainReport) -> (RunStatus, Option<String>) {
    if report.succeeded() {
        return (RunStatus::Succeeded, None);
    }
    let errors: Vec<String> = report
        .tables
        .iter()
        .filter_map(|t| Some(format!("{}: {}", t.table, t.error.as_deref()?)))
        .collect();
    (RunStatus::Failed, Some(errors.join("; ")))
}
