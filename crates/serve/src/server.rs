//! The service's start-up and shutdown (`serve`), and the router: the
//! JSON API, the web UI, `/metrics` and `/healthz`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{middleware, Json, Router};

use crate::forwarded::Transport;
use crate::guard::Guard;
use crate::metrics::Metrics;
use crate::run_store::{self, RunStore};
use crate::runner::{self, Runner};
use crate::state::AppState;
use crate::store::{self, Store};
use crate::{api, auth, error, guard, scheduler, ui};

/// The default listen address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8000";

/// What `topicberg serve` is started with.
#[derive(Clone)]
pub struct ServeArgs {
    /// The folder holding `topicberg.db`, the embedded catalog's default
    /// folder and the upsert state.
    pub data_dir: PathBuf,
    /// Where to listen.
    pub listen: SocketAddr,
    /// The buffers of the per-run log layer installed in the process's
    /// tracing subscriber (`runner::log_capture_layer`); runs' logs stay
    /// empty without it.
    pub log_capture: runner::LogCapture,
    /// See [`AppState::retention_warning_fraction`].
    pub retention_warning_fraction: f64,
    /// Host names requests may name besides 127.0.0.1, localhost and ::1
    /// (`--allowed-host`).
    pub allowed_hosts: Vec<String>,
    /// The token `/metrics` requires (`TOPICBERG_METRICS_TOKEN`), if any.
    pub metrics_token: Option<String>,
    /// Networks of the reverse proxies whose `X-Forwarded-Proto` and
    /// `X-Forwarded-For` are believed (`--trusted-proxy`).
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// Whether login may set its cookie over plain HTTP on a host other
    /// than loopback (`--allow-plain-http`).
    pub allow_plain_http: bool,
}

/// Errors that stop the service from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The database could not be opened or migrated.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The admin password from the environment could not be stored.
    #[error("admin password: {0}")]
    Admin(#[source] auth::PasswordError),
    /// The listen address could not be bound.
    #[error("listening on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The server failed.
    #[error("http server: {0}")]
    Server(#[source] std::io::Error),
}

/// The whole HTTP surface for `state`.
pub fn router(state: AppState) -> Router {
    let protected = api::protected_routes()
        .merge(ui::protected_routes())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_session,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .merge(api::public_routes())
        .merge(ui::public_routes())
        .merge(protected)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state.guard),
            guard::require_allowed_host,
        ))
        .layer(middleware::from_fn(guard::security_headers))
        .with_state(state)
}

/// `GET /healthz`: `{"status": "ok"}`.
#[derive(serde::Serialize)]
pub(crate) struct Health {
    status: &'static str,
}

pub(crate) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// A follower is stale when its last successful round (committing or
/// idle) is older than this many commit intervals, and at least
/// [`STALE_AFTER_MIN`].
const STALE_AFTER_INTERVALS: u64 = 10;
const STALE_AFTER_MIN: Duration = Duration::from_secs(60);

/// `GET /readyz`: 200 `{"status": "ready"}` while every continuous job's
/// follower keeps finishing rounds; 503 `{"status": "stale", "stale":
/// [...]}` naming each follower whose last successful round is older than
/// its bound (10 commit intervals, at least a minute): Kafka, the catalog
/// or the store has kept it from committing. A follower of an idle topic
/// finishes idle rounds, so it is ready. `/healthz` (liveness) answers as
/// long as the process does, stale or not.
async fn readyz(State(state): State<AppState>) -> axum::response::Response {
    let now = auth::now_ms().max(0) as u64;
    let jobs = match state.store.jobs() {
        Ok(jobs) => jobs,
        Err(e) => return error::ApiError::internal(e).into_response(),
    };
    let stale: Vec<serde_json::Value> = jobs
        .iter()
        .filter_map(|job| {
            let follower = state.runner.follower(job.id)?;
            let report = &follower.report;
            let (age, bound) = staleness(report, now)?;
            Some(serde_json::json!({
                "job": job.name,
                "seconds_since_success": age / 1000,
                "bound_seconds": bound / 1000,
                "last_error": report.last_error,
            }))
        })
        .collect();
    if stale.is_empty() {
        Json(serde_json::json!({"status": "ready"})).into_response()
    } else {
        let body = serde_json::json!({"status": "stale", "stale": stale});
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}

/// How long since the follower's last successful round, and its bound
/// (ms), when that is longer than the bound.
pub(crate) fn staleness(
    report: &topicberg_sync::follow::FollowReport,
    now_ms: u64,
) -> Option<(u64, u64)> {
    let bound =
        (report.commit_interval_ms * STALE_AFTER_INTERVALS).max(STALE_AFTER_MIN.as_millis() as u64);
    let since = report.last_success_ms.unwrap_or(report.started_ms);
    let age = now_ms.saturating_sub(since);
    (age > bound).then_some((age, bound))
}

async fn metrics_text(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    metrics_response(&state.guard, &state.metrics, &headers)
}

/// `GET /metrics` (serve's and a worker's): the Prometheus text, or 401
/// when a token is configured and the request does not carry it.
pub(crate) fn metrics_response(
    guard: &guard::Guard,
    metrics: &crate::metrics::Metrics,
    headers: &axum::http::HeaderMap,
) -> axum::response::Response {
    if !guard.metrics_allowed(headers) {
        return error::ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!(
                "send Authorization: Bearer <the token in {}>",
                guard::METRICS_TOKEN_ENV
            ),
        )
        .into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics.render(),
    )
        .into_response()
}

async fn not_found() -> impl IntoResponse {
    (
        StatusCode::NOT_FOUND,
        Json(error::ErrorBody {
            error: "no such route",
            problems: &[],
        }),
    )
}

/// Runs the service until Ctrl-C or SIGTERM: opens the store, sets the
/// admin password from `TOPICBERG_ADMIN_PASSWORD` if given, starts the
/// scheduler and the HTTP server; on a signal stops accepting, stops the
/// scheduler and waits for running syncs to reach a safe point.
pub async fn serve(args: ServeArgs) -> Result<(), ServeError> {
    let store = Store::open(&args.data_dir)?;
    let interrupted = store.fail_interrupted_runs(auth::now_ms())?;
    if interrupted > 0 {
        tracing::warn!(
            runs = interrupted,
            "runs left running by the previous process marked failed"
        );
    }
    let admin_set = auth::init_admin(&store).map_err(ServeError::Admin)?;
    let mut allowed_hosts = args.allowed_hosts.clone();
    if !args.listen.ip().is_unspecified() {
        allowed_hosts.push(args.listen.ip().to_string());
    }
    let transport = Transport::new(args.trusted_proxies.clone(), args.allow_plain_http);
    tracing::info!("{}", transport.describe());
    let guard = Guard::new(&allowed_hosts, args.metrics_token.clone(), transport);
    if !admin_set {
        let token = auth::random_token();
        // Printed once, for the person starting the service: only who can
        // read this log can claim the first-run setup.
        tracing::warn!(
            "no admin password: set {} and restart, or open the web UI and enter the one-time setup token {token} (POST /api/setup {{\"password\": ..., \"setup_token\": ...}})",
            auth::ADMIN_PASSWORD_ENV
        );
        *guard.setup_token.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
    }
    let metrics = Metrics::default();
    // Seconds since the last success survive a restart: seed them from the history.
    for job in store.jobs()? {
        let (last_success, _) =
            store.latest_run_with_status(job.id, run_store::RunStatus::Succeeded.as_str())?;
        if let Some(done) = last_success.and_then(|r| r.finished_ms) {
            metrics.set_last_success(&job.name, done);
        }
    }
    let run_store: Arc<dyn RunStore> = Arc::new(store.clone());
    let runner = Runner::new(Arc::clone(&run_store), metrics.clone())
        .with_data_dir(store.data_dir())
        .with_log_capture(args.log_capture.clone());
    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let scheduler = scheduler::spawn_scheduler(run_store, runner.clone(), shutdown_rx);
    let state = AppState {
        store,
        runner: runner.clone(),
        metrics,
        retention_warning_fraction: args.retention_warning_fraction,
        guard: Arc::new(guard),
    };
    // Continuous jobs follow their topics from the service's start.
    for job in state.store.jobs()? {
        let started =
            api::job_state::keep_follower(&state, job.id, run_store::Trigger::Service, false);
        if let Err(e) = started {
            tracing::error!(job = %job.name, error = %e.message, "starting the follower failed");
        }
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: args.listen,
            source,
        })?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    tracing::info!(
        %addr,
        data_dir = %args.data_dir.display(),
        "topicberg serve listening on http://{addr}"
    );
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal())
        .await;
    tracing::info!("shutting down: stopping the scheduler, waiting for running syncs");
    let _ = shutdown_tx.send(true);
    let _ = scheduler.await;
    runner.wait_idle().await;
    tracing::info!("stopped");
    served.map_err(ServeError::Server)
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod readiness_tests {
    use super::*;
    use topicberg_sync::follow::FollowReport;

    fn report(interval_s: u64, started_s: u64, success_s: Option<u64>) -> FollowReport {
        FollowReport {
            commit_interval_ms: interval_s * 1000,
            started_ms: started_s * 1000,
            last_success_ms: success_s.map(|s| s * 1000),
            ..FollowReport::default()
        }
    }

    #[test]
    fn a_follower_is_stale_past_ten_intervals_and_at_least_a_minute() {
        // 1 s commits: the bound is the minute.
        assert_eq!(staleness(&report(1, 0, Some(100)), 160_000), None);
        assert_eq!(
            staleness(&report(1, 0, Some(100)), 161_000),
            Some((61_000, 60_000))
        );
        // 30 s commits: ten intervals.
        assert_eq!(staleness(&report(30, 0, Some(0)), 300_000), None);
        assert!(staleness(&report(30, 0, Some(0)), 301_000).is_some());
        // Never a successful round: counted from the start.
        assert!(staleness(&report(1, 0, None), 61_000).is_some());
        assert_eq!(staleness(&report(1, 10, None), 61_000), None);
    }
}
