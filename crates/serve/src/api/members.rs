//! `GET /api/jobs/{id}/members`: who reads the job's partitions now: the
//! members of its consumer group (this service's follower, workers on
//! other machines running `topicberg sync --follow`), each with its client
//! id, host and partitions, as the group's coordinator says
//! (docs/src/how-to/scale-out.md).

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use topicberg_kafka::{describe_group, GroupMembers, KafkaConnection, KafkaErrorKind};

use crate::error::{ApiError, ApiResult};
use crate::job_file::JobFileError;
use crate::state::AppState;

/// How long the coordinator may take to answer.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The job's consumer group and its members.
#[derive(Serialize)]
pub struct JobMembers {
    /// The consumer group.
    pub group: String,
    /// Its state, protocol and members.
    #[serde(flatten)]
    pub described: GroupMembers,
}

pub(super) async fn members(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<JobMembers>> {
    let job = match state.runner.load_job(id) {
        Ok(loaded) => loaded.job,
        Err(JobFileError::Config(e)) => return Err(ApiError::bad_request(e.to_string())),
        Err(e) => return Err(ApiError::internal(e)),
    };
    let group = job.consumer_group.clone();
    let asked = group.clone();
    let described = tokio::task::spawn_blocking(move || {
        describe_group(
            &KafkaConnection::from_source(&job.source),
            &asked,
            DESCRIBE_TIMEOUT,
        )
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|e| match e.kind {
        // Our own client could not be made: not Kafka's answer.
        KafkaErrorKind::Config => ApiError::internal(e),
        _ => ApiError::new(StatusCode::BAD_GATEWAY, e.to_string()),
    })?;
    Ok(Json(JobMembers { group, described }))
}
