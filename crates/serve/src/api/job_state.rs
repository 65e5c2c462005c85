//! A job as it is now: its view (running, next run, latest run, its
//! follower) and its follower kept in step with it.

use super::answers::JobView;
use crate::error::{ApiError, ApiResult};
use crate::run_store::{JobMode, Trigger};
use crate::scheduler;
use crate::state::AppState;
use crate::store::JobRow;

/// The view of `job`: is it running, its next run, its latest sync and
/// maintenance runs, its follower.
pub(crate) fn job_view(state: &AppState, job: &JobRow) -> ApiResult<JobView> {
    let last = state.store.latest_run_of_kind(job.id, false)?;
    let last_maintain = state.store.latest_run_of_kind(job.id, true)?;
    let next_run = if job.schedule.is_empty() || job.paused || job.mode == JobMode::Continuous {
        None
    } else {
        scheduler::next_run(&job.schedule, chrono::Utc::now())
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    };
    let running = state.runner.is_running(job.id);
    let mut view = JobView::new(job, running, next_run, last.as_ref());
    view.last_maintain = last_maintain.as_ref().map(super::answers::RunView::summary);
    view.follower = state.runner.follower(job.id);
    view.current_run = state.runner.current_run(job.id);
    Ok(view)
}

/// Brings the job's follower in step with the job after a change
/// (created, edited, started, stopped, paused, resumed, the service's
/// start): running when it is continuous and not paused, stopped
/// otherwise; `restart`: its settings changed (see
/// `Runner::keep_follower_in_step`).
pub(crate) fn keep_follower(
    state: &AppState,
    id: i64,
    trigger: Trigger,
    restart: bool,
) -> ApiResult<()> {
    let job = state.store.job(id)?;
    let wanted = job.mode == JobMode::Continuous && !job.paused;
    state
        .runner
        .keep_follower_in_step(id, wanted, trigger, restart)
        .map_err(ApiError::internal)
}
