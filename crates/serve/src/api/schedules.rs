//! `GET /api/schedules/next?schedule=...`: the next start times of a
//! schedule as the scheduler reads it, for the job form's "next runs"
//! line (the form asks as the user types; nothing is stored).

use axum::extract::Query;
use axum::routing::get;
use axum::{Json, Router};
use chrono::Utc;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};
use crate::scheduler::Schedule;
use crate::state::AppState;

/// How many start times the answer lists.
const SHOWN: usize = 5;

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/schedules/next", get(next_runs))
}

#[derive(Deserialize)]
struct NextQuery {
    /// The schedule as the job form holds it (empty: manual).
    #[serde(default)]
    schedule: String,
}

/// The next start times (UTC, RFC 3339), none for a manual schedule.
#[derive(Serialize)]
pub struct NextRuns {
    /// The next [`SHOWN`] start times after now.
    pub next: Vec<String>,
}

async fn next_runs(Query(q): Query<NextQuery>) -> ApiResult<Json<NextRuns>> {
    let schedule = Schedule::parse(&q.schedule)
        .map_err(|e| ApiError::bad_request(format!("schedule: {e}")))?;
    let mut next = Vec::with_capacity(SHOWN);
    let mut after = Utc::now();
    while next.len() < SHOWN {
        let Some(at) = schedule.next_after(after) else {
            break;
        };
        next.push(at.to_rfc3339());
        after = at;
    }
    Ok(Json(NextRuns { next }))
}
