//! A continuous job's Start and Stop (its follower is kept in step with
//! the job by `job_state::keep_follower`).
//!
//! Start and Stop are the job's `paused` flag: a stopped continuous job
//! stays stopped across a restart of the service; a started one is
//! started again with it.

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};

use super::answers::JobView;
use super::job_state::{job_view, keep_follower};
use crate::error::{ApiError, ApiResult};
use crate::run_store::{JobMode, Trigger};
use crate::state::AppState;

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
    keep_follower(&state, id, Trigger::Manual, false)?;
    Ok(Json(job_view(&state, &state.store.job(id)?)?))
}

/// `POST /api/jobs/{id}/stop`: the follower commits what it read, leaves
/// the consumer group and ends; the job stays stopped.
async fn stop(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<JobView>> {
    continuous(&state, id)?;
    state.store.set_paused(id, true)?;
    keep_follower(&state, id, Trigger::Manual, false)?;
    Ok(Json(job_view(&state, &state.store.job(id)?)?))
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
