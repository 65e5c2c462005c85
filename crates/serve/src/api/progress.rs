//! A run's live progress: what its sync has read so far, per table and
//! partition, polled by the run page while the run goes on.

use axum::extract::{Path, State};
use axum::Json;
use serde::Serialize;
use topicberg_sync::sync::progress::ProgressSnapshot;

use crate::error::ApiResult;
use crate::state::AppState;

/// `GET /api/runs/{id}/progress`.
#[derive(Serialize)]
pub struct RunProgress {
    /// The run's status (`running` while the progress is live).
    status: String,
    /// What the sync has read so far; `null` once the run ended (its
    /// report then has the figures).
    progress: Option<ProgressSnapshot>,
}

/// `GET /api/runs/{id}/progress`: the run's progress while it is running.
pub async fn progress(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<RunProgress>> {
    // Read before the status: a run that ends in between shows as ended.
    let progress = state.runner.progress(id);
    let run = state.store.run(id)?;
    let progress = progress.filter(|_| run.status == "running");
    Ok(Json(RunProgress {
        status: run.status,
        progress,
    }))
}
