//! The HTTP endpoints of a worker (`topicberg sync --follow --listen
//! ADDR`), for an orchestrator and a metrics scraper: `/healthz`
//! (liveness: the process answers, whatever its rounds do, so a catalog
//! outage, during which the follower spills, never gets it restarted),
//! `/readyz` (200 while its rounds succeed; 503 once its last successful
//! round is older than 10 commit intervals, at least a minute: the
//! staleness serve's `/readyz` reports for its continuous jobs) and
//! `/metrics` (serve's Prometheus metrics of the job's rounds, behind
//! `TOPICBERG_METRICS_TOKEN` when set). No UI, no API, no session: nothing
//! here reads or changes a job.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use topicberg_sync::follow::{FollowLive, StopSignal};

use crate::guard::Guard;
use crate::metrics::Metrics;
use crate::server::{healthz, metrics_response, staleness, ServeError};

/// What the endpoints read.
#[derive(Clone)]
struct Worker {
    live: Arc<FollowLive>,
    metrics: Metrics,
    guard: Arc<Guard>,
}

/// Binds the worker's endpoints to `listen` (before the follower starts,
/// so that a taken port stops the worker at once).
pub async fn bind_worker_endpoints(
    listen: SocketAddr,
) -> Result<tokio::net::TcpListener, ServeError> {
    tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: listen,
            source,
        })
}

/// Serves the worker's endpoints on `listener` until `stop` is requested.
pub async fn serve_worker_endpoints(
    listener: tokio::net::TcpListener,
    live: Arc<FollowLive>,
    metrics: Metrics,
    metrics_token: Option<String>,
    stop: Arc<StopSignal>,
) -> Result<(), ServeError> {
    if let Ok(listen) = listener.local_addr() {
        tracing::info!(listen = %listen, "worker endpoints: /healthz, /readyz, /metrics");
    }
    let worker = Worker {
        live,
        metrics,
        guard: Arc::new(Guard::new(&[], metrics_token, Default::default())),
    };
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(worker);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.wait().await })
        .await
        .map_err(ServeError::Server)
}

/// 200 `{"status": "ready"}`, or 503 `{"status": "stale", ...}` with how
/// long since the last successful round and the bound.
async fn readyz(State(worker): State<Worker>) -> axum::response::Response {
    let report = worker.live.snapshot();
    let now = crate::auth::now_ms().max(0) as u64;
    match staleness(&report, now) {
        None => Json(serde_json::json!({"status": "ready"})).into_response(),
        Some((age, bound)) => {
            let body = serde_json::json!({
                "status": "stale",
                "job": report.job,
                "seconds_since_success": age / 1000,
                "bound_seconds": bound / 1000,
                "last_error": report.last_error,
            });
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

async fn metrics_text(
    State(worker): State<Worker>,
    headers: HeaderMap,
) -> axum::response::Response {
    metrics_response(&worker.guard, &worker.metrics, &headers)
}
