//! Jobs, their streams page, runs, import and export.

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;
use topicberg_core::config::resolve_delete_format;

use super::answers::{Cancelled, JobView, RunTable, RunView, Streams, SyncStarted, TopicView};
use super::job_state::{job_view, keep_follower};
use super::ApiJson;
use crate::error::{ApiError, ApiResult};
use crate::job_file::{JobConfigError, JobFileError, LoadedJob};
use crate::pieces::{self, Piece, PieceKind, Secrets};
use crate::run_store::{JobMode, RunKind, RunStatus, Trigger};
use crate::runner::StartError;
use crate::scheduler;
use crate::state::AppState;
use crate::store::JobRow;

/// The job routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/jobs", get(list_jobs).post(create_job))
        .route("/api/jobs/import", post(import_job))
        .route(
            "/api/jobs/{id}",
            get(get_job).put(update_job).delete(delete_job),
        )
        .route("/api/jobs/{id}/streams", get(streams))
        .route("/api/jobs/{id}/sync", post(sync_now))
        .route("/api/jobs/{id}/maintain", post(maintain_now))
        .route("/api/jobs/{id}/cancel", post(cancel))
        .route("/api/jobs/{id}/pause", post(pause))
        .route("/api/jobs/{id}/resume", post(resume))
        .route("/api/jobs/{id}/export", get(export))
        .route("/api/jobs/{id}/runs", get(list_runs))
        .route("/api/jobs/{id}/overview", get(super::overview::overview))
        .route("/api/jobs/{id}/members", get(super::members::members))
        .route("/api/jobs/{id}/tables/{table}", get(super::tables::table))
        .route("/api/runs/{id}", get(get_run))
        .route("/api/runs/{id}/log", get(run_log))
        .route("/api/runs/{id}/progress", get(super::progress::progress))
}

/// A job as sent by the client (`id` and the read-only fields are ignored).
#[derive(Deserialize)]
struct JobBody {
    name: String,
    source_id: i64,
    destination_id: i64,
    #[serde(default)]
    target_engines: Vec<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    sync: Piece,
    #[serde(default)]
    streams: Vec<Piece>,
    #[serde(default)]
    schedule: String,
    #[serde(default)]
    paused: bool,
    #[serde(default)]
    maintain: Piece,
    #[serde(default)]
    maintain_schedule: String,
    /// `scheduled` (the default) or `continuous`.
    #[serde(default)]
    mode: Option<String>,
}

impl JobBody {
    fn into_row(self, id: i64) -> ApiResult<JobRow> {
        let mode = match self.mode.as_deref().map(str::trim) {
            None | Some("") => JobMode::Scheduled,
            Some(name) => JobMode::from_name(name)
                .ok_or_else(|| ApiError::bad_request("mode: must be scheduled or continuous"))?,
        };
        Ok(JobRow {
            id,
            name: super::check_name(&self.name)?,
            source_id: self.source_id,
            destination_id: self.destination_id,
            target_engines: self.target_engines,
            namespace: self.namespace.filter(|n| !n.trim().is_empty()),
            sync: self.sync,
            streams: self.streams,
            schedule: self.schedule.trim().to_string(),
            paused: self.paused,
            maintain: self.maintain,
            maintain_schedule: self.maintain_schedule.trim().to_string(),
            mode,
        })
    }
}

/// The problems of the job's schedules, each apart (`schedule: ...`,
/// `maintain_schedule: ...`), so a form puts each under its field.
fn schedule_problems(job: &JobRow) -> Vec<String> {
    let check = |field: &str, text: &str| match text {
        "" => None,
        text => scheduler::validate_schedule(text)
            .err()
            .map(|e| format!("{field}: {e}")),
    };
    let sync_schedule = match job.mode {
        JobMode::Continuous if !job.schedule.is_empty() => Some(
            "schedule: a continuous job follows its topics and has no sync schedule; \
             clear it, or make the job scheduled"
                .to_string(),
        ),
        _ => check("schedule", &job.schedule),
    };
    [
        sync_schedule,
        check("maintain_schedule", &job.maintain_schedule),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Refuses a job the job file's parser refuses, or with a bad schedule.
fn validate_job(state: &AppState, job: &JobRow) -> ApiResult<()> {
    for (kind, id) in [
        (PieceKind::Source, job.source_id),
        (PieceKind::Destination, job.destination_id),
    ] {
        if state.store.piece(kind, id).is_err() {
            return Err(ApiError::bad_request(format!(
                "{}_id: there is no {} {id}",
                kind.table(),
                kind.table()
            )));
        }
    }
    // Every problem at once: the schedules' and the job file's.
    let mut problems = schedule_problems(job);
    let text = state.store.assemble(job, Secrets::Placeholders)?;
    let file = pieces::check_job_toml(&text).err().map(ApiError::from);
    match (problems.is_empty(), file) {
        (true, None) => Ok(()),
        (true, Some(e)) => Err(e),
        (false, file) => {
            if let Some(e) = file {
                if e.problems.is_empty() {
                    problems.push(e.message);
                } else {
                    problems.extend(e.problems);
                }
            }
            Err(ApiError::with_problems(problems))
        }
    }
}

async fn list_jobs(State(state): State<AppState>) -> ApiResult<Json<Vec<JobView>>> {
    let jobs = state.store.jobs()?;
    let views: ApiResult<Vec<JobView>> = jobs.iter().map(|j| job_view(&state, j)).collect();
    Ok(Json(views?))
}

async fn create_job(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<JobBody>,
) -> ApiResult<Response> {
    let job = body.into_row(0)?;
    validate_job(&state, &job)?;
    let id = state.store.insert_job(&job)?;
    tracing::info!(id, name = %job.name, "job created");
    state.runner.schedules_changed();
    keep_follower(&state, id, Trigger::Manual, false)?;
    let job = state.store.job(id)?;
    Ok((StatusCode::CREATED, Json(job_view(&state, &job)?)).into_response())
}

async fn get_job(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<JobView>> {
    let job = state.store.job(id)?;
    let mut view = job_view(&state, &job)?;
    view.warnings = Some(job_warnings(&state, &job).await?);
    Ok(Json(view))
}

/// The warnings of a job's page: what its last successful sync warned
/// about (a named topic missing, a pattern matching nothing), and too long
/// without a successful sync for its topics' retention (see
/// `serve::warnings`).
async fn job_warnings(state: &AppState, job: &JobRow) -> ApiResult<Vec<String>> {
    let (last_success, first_started) = state
        .store
        .latest_run_with_status(job.id, RunStatus::Succeeded.as_str())?;
    let said = last_success
        .as_ref()
        .and_then(|r| r.report.as_ref()?.get("warnings")?.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|w| Some(format!("The last sync warned: {}", w.as_str()?)));
    let mut warnings: Vec<String> = said.collect();
    warnings.extend(retention_warnings(state, job, last_success, first_started).await?);
    Ok(warnings)
}

/// Too long without a successful sync for the topics' retention.
async fn retention_warnings(
    state: &AppState,
    job: &JobRow,
    last_success: Option<crate::store::RunRow>,
    first_started: Option<i64>,
) -> ApiResult<Vec<String>> {
    let Some(since) = last_success
        .as_ref()
        .map(|r| r.started_ms)
        .or(first_started)
    else {
        return Ok(Vec::new());
    };
    let job = match state.runner.load_job(job.id) {
        Ok(loaded) => loaded.job,
        Err(JobFileError::Config(JobConfigError::Store(e))) => return Err(ApiError::internal(e)),
        Err(JobFileError::Config(JobConfigError::Invalid(_))) => return Ok(Vec::new()),
        Err(JobFileError::Unresolved(e)) => return Ok(vec![retention_unknown(&e)]),
    };
    match crate::warnings::job_topic_retention(&job).await {
        Ok(retention) => Ok(crate::warnings::retention_warning(
            crate::auth::now_ms() - since,
            &retention,
            state.retention_warning_fraction,
            last_success.is_some(),
        )
        .into_iter()
        .collect()),
        Err(e) => Ok(vec![retention_unknown(&e)]),
    }
}

fn retention_unknown(why: &dyn std::fmt::Display) -> String {
    format!("Could not read the topics' retention to check the replay window: {why}")
}

async fn update_job(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    ApiJson(body): ApiJson<JobBody>,
) -> ApiResult<Json<JobView>> {
    state.store.job(id)?;
    let job = body.into_row(id)?;
    validate_job(&state, &job)?;
    state.store.update_job(&job)?;
    tracing::info!(id, name = %job.name, "job updated");
    state.runner.schedules_changed();
    keep_follower(&state, id, Trigger::Manual, true)?;
    Ok(Json(job_view(&state, &state.store.job(id)?)?))
}

async fn delete_job(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<StatusCode> {
    state.store.job(id)?;
    if state.runner.is_running(id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("job {id} is running; cancel it first"),
        ));
    }
    if state.runner.follower(id).is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("job {id} is following its topics; stop it first"),
        ));
    }
    state.store.delete_job(id)?;
    tracing::info!(id, "job deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/jobs/{id}/streams`: the topics the source's pattern selects,
/// their inferred columns, their stream settings, and the delete format an
/// upsert table gets from `target_engines` (with the reason, or why none fits).
async fn streams(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<Streams>> {
    let job = state.store.job(id)?;
    let offered = state
        .store
        .piece(PieceKind::Source, job.source_id)?
        .config
        .get("topic_pattern")
        .and_then(Value::as_str)
        .map(str::to_string);
    let LoadedJob { config, job } = match state.runner.load_job(id) {
        Ok(loaded) => loaded,
        Err(JobFileError::Config(JobConfigError::Invalid(e))) => {
            return Err(ApiError::job_file(&e, "job"))
        }
        Err(JobFileError::Unresolved(e)) => {
            return Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                format!("discovering topics: {e}"),
            ));
        }
        Err(e) => return Err(ApiError::internal(e)),
    };
    // Every topic the source offers, not only the ticked ones.
    let mut offering = job;
    let topic_pattern = offered.clone().or(config.source.topic_pattern.clone());
    if let Some(pattern) = offered {
        offering.topics = regex::Regex::new(&pattern).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                format!("discovering topics: source.topic_pattern: {e}"),
            )
        })?;
        offering.source.topic_pattern = Some(pattern);
    }
    let discovered =
        tokio::task::spawn_blocking(move || topicberg_sync::discover::discover(&offering, false))
            .await
            .map_err(ApiError::internal)?
            .map_err(|e| {
                ApiError::new(StatusCode::BAD_GATEWAY, format!("discovering topics: {e}"))
            })?;
    let engines = config.engines();
    let topics = discovered
        .iter()
        .map(|t| {
            let stream = config.stream_for(&t.topic);
            let upsert = resolve_delete_format(
                &engines,
                stream.delete_format,
                config.destination.format_version,
            )
            .map_err(|e| e.to_string());
            TopicView::new(t, stream, upsert)
        })
        .collect();
    Ok(Json(Streams {
        job_id: id,
        namespace: config.namespace(),
        target_engines: config.target_engines.clone(),
        topic_pattern,
        topics,
    }))
}

async fn sync_now(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Response> {
    start_now(&state, id, RunKind::Sync)
}

/// `POST /api/jobs/{id}/maintain`: `topicberg maintain` on the job's
/// tables now (compaction, snapshot expiry, orphan removal, with the job's
/// `[maintain]` settings), as a run of kind `maintain`.
async fn maintain_now(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Response> {
    start_now(&state, id, RunKind::Maintain)
}

fn start_now(state: &AppState, id: i64, kind: RunKind) -> ApiResult<Response> {
    state.store.job(id)?;
    match state.runner.start_run(id, kind, Trigger::Manual) {
        Ok(run_id) => {
            tracing::info!(
                job_id = id,
                run_id,
                kind = kind.as_str(),
                "run started (manual)"
            );
            Ok((StatusCode::ACCEPTED, Json(SyncStarted { run_id })).into_response())
        }
        Err(StartError::AlreadyRunning) => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("job {id} is already running"),
        )),
        Err(e @ StartError::ShuttingDown) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            e.to_string(),
        )),
        Err(e) => Err(ApiError::internal(e)),
    }
}

async fn cancel(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<Cancelled>> {
    state.store.job(id)?;
    let cancelled = state.runner.cancel(id);
    tracing::info!(job_id = id, cancelled, "cancel asked");
    Ok(Json(Cancelled { cancelled }))
}

async fn set_paused(state: &AppState, id: i64, paused: bool) -> ApiResult<Json<JobView>> {
    state.store.set_paused(id, paused)?;
    tracing::info!(job_id = id, paused, "schedule paused/resumed");
    keep_follower(state, id, Trigger::Manual, false)?;
    Ok(Json(job_view(state, &state.store.job(id)?)?))
}

async fn pause(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<JobView>> {
    set_paused(&state, id, true).await
}

async fn resume(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<JobView>> {
    let resumed = set_paused(&state, id, false).await;
    state.runner.schedules_changed();
    resumed
}

/// `GET /api/jobs/{id}/export`: the job file, secrets as `${TOPICBERG_..}`.
async fn export(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Response> {
    let job = state.store.job(id)?;
    let body = state.store.assemble(&job, Secrets::Placeholders)?;
    let vars: Vec<&str> = body
        .split("${")
        .skip(1)
        .filter_map(|s| s.split('}').next())
        .filter(|v| v.starts_with("TOPICBERG_"))
        .collect();
    // Stored texts in comments are written as TOML strings (escaped), so
    // none can end the comment's line.
    let quoted = |text: &str| toml::Value::String(text.to_string()).to_string();
    let mut head = format!(
        "# Job {}, exported from topicberg serve. Run it: topicberg sync -c <this file>\n",
        quoted(&job.name)
    );
    let body = format!("{body}{}", serve_table(&state, &job)?);
    if !vars.is_empty() {
        head.push_str(&format!(
            "# Secrets are read from the environment: {}\n",
            vars.join(", ")
        ));
    }
    let filename = topicberg_core::config::sanitize_identifier(&job.name);
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "application/toml; charset=utf-8".to_string(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}.toml\""),
            ),
        ],
        format!("{head}\n{body}"),
    )
        .into_response())
}

/// The job's `[serve]` table for its export (empty when nothing is set):
/// its schedules, mode, and the source's pattern when the job's streams
/// name its topics (the job file's `[source]` leaves the pattern out then).
fn serve_table(state: &AppState, job: &JobRow) -> ApiResult<String> {
    let source = state.store.piece(PieceKind::Source, job.source_id)?;
    let serve = pieces::export_serve(
        &job.schedule,
        &job.maintain_schedule,
        job.mode,
        &source.config,
        !job.streams.is_empty(),
    );
    Ok(pieces::serve_toml(&serve)?)
}

/// `POST /api/jobs/import` with a job file as the body: a new source, a
/// new destination and the job, with its `[serve]` settings (schedules,
/// mode, the topics offered). Secrets given as `${VAR}` stay unset; the
/// answer's `warnings` name them.
async fn import_job(
    State(state): State<AppState>,
    super::ApiText(body): super::ApiText,
) -> ApiResult<Response> {
    let mut split = pieces::split_job_toml(&body)?;
    split.name = super::check_name(&split.name)?;
    if state.store.jobs()?.iter().any(|j| j.name == split.name) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("a job named \"{}\" already exists", split.name),
        ));
    }
    let (source_id, destination_id) = insert_pieces(&state, &split)?;
    let serve = &split.serve;
    // A job that would run by itself comes paused, as a clone does: its
    // secrets may be unset, and a copy may share its original's group.
    let runs_by_itself = serve.schedule.is_some() || serve.mode == JobMode::Continuous;
    let job = JobRow {
        id: 0,
        name: split.name.clone(),
        source_id,
        destination_id,
        target_engines: split.target_engines.clone(),
        namespace: split.namespace.clone(),
        sync: split.sync.clone(),
        streams: split.streams.clone(),
        schedule: serve
            .schedule
            .as_deref()
            .unwrap_or_default()
            .trim()
            .to_string(),
        paused: runs_by_itself,
        maintain: split.maintain.clone(),
        maintain_schedule: serve
            .maintain_schedule
            .as_deref()
            .unwrap_or_default()
            .trim()
            .to_string(),
        mode: serve.mode,
    };
    let forget = |e: ApiError| {
        let _ = state.store.delete_piece(PieceKind::Source, source_id);
        let _ = state
            .store
            .delete_piece(PieceKind::Destination, destination_id);
        e
    };
    // The file passed the job file's parser (its secrets may be unset
    // now); the service's schedules are checked here, as `serve.*`.
    let problems: Vec<String> = schedule_problems(&job)
        .into_iter()
        .map(|p| format!("serve.{p}"))
        .collect();
    if !problems.is_empty() {
        return Err(forget(ApiError::with_problems(problems)));
    }
    let id = state.store.insert_job(&job).map_err(|e| forget(e.into()))?;
    tracing::info!(id, name = %job.name, "job imported");
    state.runner.schedules_changed();
    keep_follower(&state, id, Trigger::Manual, false)?;
    let mut view = job_view(&state, &state.store.job(id)?)?;
    let mut warnings: Vec<String> = split
        .unset_secrets
        .iter()
        .map(|field| {
            format!(
                "{field} was written as ${{VAR}} in the file and is unset: enter it on the job's {} page",
                field.split('.').next().unwrap_or_default()
            )
        })
        .collect();
    if runs_by_itself {
        warnings.push(format!(
            "imported paused: {} it once its settings are checked",
            if job.mode == JobMode::Continuous {
                "start"
            } else {
                "resume"
            }
        ));
    }
    view.warnings = Some(warnings);
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// Stores an imported job's source and destination (as `<job>-source`,
/// `<job>-destination`); neither when one fails.
fn insert_pieces(state: &AppState, split: &pieces::SplitJob) -> ApiResult<(i64, i64)> {
    let source_id = insert_unique(state, PieceKind::Source, &split.name, &split.source)?;
    match insert_unique(
        state,
        PieceKind::Destination,
        &split.name,
        &split.destination,
    ) {
        Ok(id) => Ok((source_id, id)),
        Err(e) => {
            let _ = state.store.delete_piece(PieceKind::Source, source_id);
            Err(e)
        }
    }
}

/// Stores an imported piece as `<job>-source` (or `-2`, `-3`, ... when taken).
fn insert_unique(state: &AppState, kind: PieceKind, job: &str, piece: &Piece) -> ApiResult<i64> {
    let taken: Vec<String> = state
        .store
        .pieces(kind)?
        .into_iter()
        .map(|p| p.name)
        .collect();
    let base = format!("{job}-{}", kind.table());
    let name = (1..)
        .map(|i| {
            if i == 1 {
                base.clone()
            } else {
                format!("{base}-{i}")
            }
        })
        .find(|n| !taken.contains(n))
        .expect("a free name");
    Ok(state.store.insert_piece(kind, &name, piece)?)
}

#[derive(Deserialize)]
struct RunsQuery {
    limit: Option<i64>,
    offset: Option<i64>,
}

async fn list_runs(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Query(q): Query<RunsQuery>,
) -> ApiResult<Json<Vec<RunView<RunTable>>>> {
    state.store.job(id)?;
    let runs = state.store.runs_page(
        id,
        q.limit.unwrap_or(100).clamp(1, 1000),
        q.offset.unwrap_or(0).max(0),
    )?;
    Ok(Json(runs.iter().map(RunView::summary).collect()))
}

/// `GET /api/runs/{id}`: the run, its per-table report (failed tables
/// first) and the whole report.
async fn get_run(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<RunView<Value>>> {
    let run = state.store.run(id)?;
    Ok(Json(RunView::detail(&run)))
}

/// `GET /api/runs/{id}/log`: the run's log as a text download.
async fn run_log(State(state): State<AppState>, Path(id): Path<i64>) -> ApiResult<Response> {
    let run = state.store.run(id)?;
    let log = match state.runner.logs().current(id) {
        // A run in progress: its log so far.
        Some(current) if run.status == "running" => current,
        _ => state.store.run_log(id)?,
    };
    Ok((
        [
            (
                header::CONTENT_TYPE,
                "text/plain; charset=utf-8".to_string(),
            ),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"run-{id}.log\""),
            ),
        ],
        log,
    )
        .into_response())
}
