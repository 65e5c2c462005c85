//! A continuous job's follower: started and stopped through the API, and
//! kept in step with the job (`reconcile`) whenever it is created, edited,
//! paused or resumed, and when the service starts.
//!
//! Start and Stop are the job's `paused` flag: a stopped continuous job
//! stays stopped across a restart of the service; a started one is
//! started again with it.

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};

use super::answers::JobView;
use crate::error::{ApiError, ApiResult};
use crate::run_store::{JobMode, Trigger};
use crate::runner::{Runner, StartError};
use crate::state::AppState;
use crate::store::Store;

/// The follower routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/jobs/{id}/start", post(start))
        .route("/api/jobs/{id}/stop", post(stop))
}

/// `POST /api/jobs/{id}/start`: a continuous job follows its topics (and
/// will again after a restart of the service).
async fn start(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<JobView>> {
    continuous(&state, id)?;
    state.store.set_paused(id, false)?;
    reconcile(&state.store, &state.runner, id, Trigger::Manual, false)?;
    Ok(Json(super::jobs::job_view(&state, &state.store.job(id)?)?))
}

/// `POST /api/jobs/{id}/stop`: the follower commits what it read, leaves
/// the consumer group and ends; the job stays stopped.
async fn stop(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<JobView>> {
    continuous(&state, id)?;
    state.store.set_paused(id, true)?;
    reconcile(&state.store, &state.runner, id, Trigger::Manual, false)?;
    Ok(Json(super::jobs::job_view(&state, &state.store.job(id)?)?))
}

fn continuous(state: &AppState, id: i64) -> ApiResult<()> {
    match state.store.job(id)?.mode {
        JobMode::Continuous => Ok(()),
        JobMode::Scheduled => Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            format!(
                "job {id} is scheduled: it syncs on its schedule or with Sync Now; \
                 set its mode to continuous to follow its topics"
            ),
        )),
    }
}

/// Brings the job's follower in step with the job: running when the job
/// is continuous and not paused, stopped otherwise. `restart`: the job's
/// settings changed, so a running follower is stopped and started again
/// (with the new job file) once it has committed and left.
pub(crate) fn reconcile(
    store: &Store,
    runner: &Runner,
    id: i64,
    trigger: Trigger,
    restart: bool,
) -> ApiResult<()> {
    let job = store.job(id)?;
    let wanted = job.mode == JobMode::Continuous && !job.paused;
    let following = runner.follower(id).is_some();
    match (wanted, following) {
        (true, false) => start_follower(runner, id, trigger),
        (true, true) if restart => {
            runner.stop_follower(id);
            let runner = runner.clone();
            tokio::spawn(async move {
                runner.follower_stopped(id).await;
                if let Err(e) = start_follower(&runner, id, trigger) {
                    tracing::error!(job_id = id, error = %e.message, "restarting the follower failed");
                }
            });
            Ok(())
        }
        (false, true) => {
            runner.stop_follower(id);
            Ok(())
        }
        _ => Ok(()),
    }
}

fn start_follower(runner: &Runner, id: i64, trigger: Trigger) -> ApiResult<()> {
    match runner.start_follower(id, trigger) {
        Ok(run_id) => {
            tracing::info!(job_id = id, run_id, "follower started");
            Ok(())
        }
        // Started by a concurrent request, or stopping with the service.
        Err(StartError::AlreadyRunning | StartError::ShuttingDown) => Ok(()),
        Err(e) => Err(ApiError::internal(e)),
    }
}
