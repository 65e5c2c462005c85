//! `GET /api/jobs/{id}/overview`: what the job page shows besides the job
//! itself: its last success and the consumer lag per topic (the figures
//! `/metrics` exports as `topicberg_consumer_lag_messages`).

use axum::extract::{Path, State};
use axum::Json;

use super::answers::{JobOverview, PartitionLagView, RunView, TopicLag};
use crate::error::ApiResult;
use crate::state::AppState;

/// The job's last success and its lag per topic (`null` until a run in
/// this process reached Kafka).
pub(super) async fn overview(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<JobOverview>> {
    let job = state.store.job(id)?;
    let (last_success, _) = state.store.latest_run_with_status(id, "succeeded")?;
    let lag = state.metrics.lag(&job.name).map(|partitions| {
        let mut topics: Vec<TopicLag> = Vec::new();
        for p in partitions {
            let view = PartitionLagView {
                lag: p.lag,
                partition: p.partition,
            };
            match topics.last_mut() {
                Some(t) if t.topic == p.topic => {
                    t.lag += p.lag;
                    t.partitions.push(view);
                }
                _ => topics.push(TopicLag {
                    lag: p.lag,
                    partitions: vec![view],
                    topic: p.topic,
                }),
            }
        }
        topics
    });
    Ok(Json(JobOverview {
        lag,
        last_success: last_success.as_ref().map(RunView::summary),
    }))
}
