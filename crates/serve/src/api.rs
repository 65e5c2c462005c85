//! The JSON API under `/api/` (docs/serve.md, "JSON API"): setup, login,
//! sources, destinations and their connection tests; jobs, runs, import
//! and export live in [`jobs`]. Errors are `{"error": "...", "problems":
//! [...]}` with a fitting status; no response, log line or error carries a
//! stored secret.

mod jobs;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use topicberg_core::JobConfig;

use super::auth::{self, Session};
use super::pieces::{self, Piece, PieceKind, Secrets};
use super::store::{PieceRow, StoreError};
use super::AppState;
use topicberg_sync::check::CheckStep;

/// An API error: a status and a message (never a secret).
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    problems: Vec<String>,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            problems: Vec::new(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let status = match &e {
            StoreError::NotFound(_) => StatusCode::NOT_FOUND,
            StoreError::Conflict(_) => StatusCode::CONFLICT,
            StoreError::Piece(_) => StatusCode::BAD_REQUEST,
            _ => {
                tracing::error!(error = %e, "store error");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        Self::new(status, e.to_string())
    }
}

impl From<pieces::PieceError> for ApiError {
    fn from(e: pieces::PieceError) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: e.message,
            problems: e.problems,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message });
        if !self.problems.is_empty() {
            body["problems"] = json!(self.problems);
        }
        (self.status, Json(body)).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// A JSON body whose errors name the place and kind of the problem but
/// never quote a value (it may be a password).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::bad_request(e.body_text()))?;
        serde_json::from_slice(&bytes).map(ApiJson).map_err(|e| {
            let text = e.to_string();
            let detail = if text.starts_with("missing field") || text.starts_with("unknown field") {
                text.split(" at line")
                    .next()
                    .unwrap_or_default()
                    .to_string()
            } else {
                format!("{:?} error", e.classify()).to_lowercase()
            };
            ApiError::bad_request(format!(
                "request body (line {}, column {}): {detail}",
                e.line(),
                e.column()
            ))
        })
    }
}

/// The routes behind the login (the caller adds [`auth::require_session`]).
pub fn protected_routes() -> Router<AppState> {
    Router::new()
        .route("/api/logout", post(logout))
        .route("/api/sources", get(list_sources).post(create_source))
        .route(
            "/api/sources/{id}",
            get(get_source).put(update_source).delete(delete_source),
        )
        .route("/api/sources/{id}/test", post(test_source))
        .route(
            "/api/destinations",
            get(list_destinations).post(create_destination),
        )
        .route(
            "/api/destinations/{id}",
            get(get_destination)
                .put(update_destination)
                .delete(delete_destination),
        )
        .route("/api/destinations/{id}/test", post(test_destination))
        .merge(jobs::routes())
}

/// The routes open before login.
pub fn public_routes() -> Router<AppState> {
    Router::new()
        .route("/api/setup", post(setup))
        .route("/api/login", post(login))
}

#[derive(Deserialize)]
struct SetupBody {
    password: String,
}

/// `POST /api/setup {password}`: sets the admin password, only while none is set.
async fn setup(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SetupBody>,
) -> ApiResult<Response> {
    if state.store.admin()?.is_some() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "the admin password is already set; log in (POST /api/login)",
        ));
    }
    if body.password.chars().count() < auth::MIN_PASSWORD_LEN {
        return Err(ApiError::bad_request(format!(
            "the password needs at least {} characters",
            auth::MIN_PASSWORD_LEN
        )));
    }
    let hash = tokio::task::spawn_blocking(move || auth::hash_password(&body.password))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    state.store.set_admin(auth::ADMIN_USER, &hash)?;
    tracing::info!("admin password set through /api/setup");
    Ok(Json(json!({ "ok": true, "username": auth::ADMIN_USER })).into_response())
}

#[derive(Deserialize)]
struct LoginBody {
    username: String,
    password: String,
}

/// `POST /api/login {username, password}`: sets the session cookie and
/// returns `{csrf}`.
async fn login(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<LoginBody>,
) -> ApiResult<Response> {
    let Some((username, hash)) = state.store.admin()? else {
        return Err(auth::setup_needed());
    };
    let password = body.password;
    let ok = tokio::task::spawn_blocking(move || auth::verify_password(&password, &hash))
        .await
        .unwrap_or(false);
    if !ok || body.username != username {
        tracing::warn!("failed login");
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "wrong username or password",
        ));
    }
    let token = auth::random_token();
    let csrf = auth::random_token();
    let now = auth::now_ms();
    state.store.insert_session(
        &auth::token_hash(&token),
        &csrf,
        now + auth::SESSION_TTL_MS,
        now,
    )?;
    Ok((
        [(header::SET_COOKIE, auth::session_cookie(&token))],
        Json(json!({ "csrf": csrf, "username": username })),
    )
        .into_response())
}

/// `POST /api/logout`: ends the session.
async fn logout(
    State(state): State<AppState>,
    Extension(session): Extension<Session>,
) -> ApiResult<Response> {
    state.store.delete_session(&session.token_hash)?;
    Ok((
        [(header::SET_COOKIE, auth::clear_cookie())],
        Json(json!({ "ok": true })),
    )
        .into_response())
}

// --- sources and destinations ---

/// A piece as the API shows it: id, name and the redacted table.
fn piece_json(kind: PieceKind, row: &PieceRow) -> Value {
    let mut out = pieces::redact(kind, &row.config);
    out.insert("id".into(), json!(row.id));
    out.insert("name".into(), json!(row.name));
    Value::Object(out)
}

/// Splits a request body into the name and the table (ids ignored).
fn piece_body(mut body: Piece) -> ApiResult<(String, Piece)> {
    body.remove("id");
    let name = match body.remove("name") {
        Some(Value::String(n)) if !n.trim().is_empty() => n.trim().to_string(),
        _ => return Err(ApiError::bad_request("name: required (a non-empty string)")),
    };
    Ok((name, body))
}

async fn list_pieces(state: &AppState, kind: PieceKind) -> ApiResult<Json<Value>> {
    let rows = state.store.pieces(kind)?;
    Ok(Json(Value::Array(
        rows.iter().map(|r| piece_json(kind, r)).collect(),
    )))
}

async fn create_piece(state: &AppState, kind: PieceKind, body: Piece) -> ApiResult<Response> {
    let (name, config) = piece_body(body)?;
    let config = pieces::merge_secrets(kind, None, config);
    pieces::validate_piece(kind, &config)?;
    let id = state.store.insert_piece(kind, &name, &config)?;
    tracing::info!(id, name = %name, "{} created", kind.table());
    let row = state.store.piece(kind, id)?;
    Ok((StatusCode::CREATED, Json(piece_json(kind, &row))).into_response())
}

async fn update_piece(
    state: &AppState,
    kind: PieceKind,
    id: i64,
    body: Piece,
) -> ApiResult<Json<Value>> {
    let old = state.store.piece(kind, id)?;
    let (name, config) = piece_body(body)?;
    let config = pieces::merge_secrets(kind, Some(&old.config), config);
    pieces::validate_piece(kind, &config)?;
    state.store.update_piece(kind, id, &name, &config)?;
    tracing::info!(id, name = %name, "{} updated", kind.table());
    Ok(Json(piece_json(kind, &state.store.piece(kind, id)?)))
}

async fn delete_piece(state: &AppState, kind: PieceKind, id: i64) -> ApiResult<StatusCode> {
    state.store.delete_piece(kind, id)?;
    tracing::info!(id, "{} deleted", kind.table());
    Ok(StatusCode::NO_CONTENT)
}

/// The job file a connection test runs with: the piece, a stand-in for the
/// other table, the real secrets.
fn test_config(state: &AppState, kind: PieceKind, row: &PieceRow) -> ApiResult<JobConfig> {
    let mut source: Piece = serde_json::from_value(json!({
        "bootstrap_servers": "127.0.0.1:9",
    }))
    .expect("stand-in");
    let empty = Piece::new();
    let destination = match kind {
        PieceKind::Source => {
            source = row.config.clone();
            if !source.contains_key("topic_pattern") {
                // The job's [[streams]] select its topics; alone, none.
                source.insert("topic_pattern".into(), json!("^$"));
            }
            &empty
        }
        PieceKind::Destination => {
            source.insert("topic_pattern".into(), json!("^$"));
            &row.config
        }
    };
    let text = pieces::assemble_job_toml(
        &pieces::JobPieces {
            name: "topicberg_check",
            target_engines: &[],
            namespace: None,
            source: &source,
            destination,
            sync: &empty,
            streams: &[],
        },
        Secrets::Real {
            data_dir: state.store.data_dir(),
        },
    )?;
    JobConfig::from_toml_str(&text, |name| std::env::var(name).ok()).map_err(|e| ApiError {
        status: StatusCode::BAD_REQUEST,
        message: e.to_string().replace("<inline>", kind.table()),
        problems: e.problems().iter().map(ToString::to_string).collect(),
    })
}

fn steps_json(steps: &[CheckStep]) -> Json<Value> {
    let ok = !steps.is_empty() && steps.iter().all(|s| s.outcome.is_ok());
    Json(json!({
        "ok": ok,
        "steps": steps.iter().map(|s| match &s.outcome {
            Ok(text) => json!({"step": s.step, "ok": true, "message": text}),
            Err(text) => json!({"step": s.step, "ok": false, "message": text}),
        }).collect::<Vec<_>>(),
    }))
}

async fn test_piece(state: &AppState, kind: PieceKind, id: i64) -> ApiResult<Json<Value>> {
    let row = state.store.piece(kind, id)?;
    let config = test_config(state, kind, &row)?;
    let job = crate::runner::resolve_job(&config)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e))?;
    let steps = match kind {
        PieceKind::Source => topicberg_sync::check::check_kafka(&job).await,
        PieceKind::Destination => topicberg_sync::check::check_destination(&job).await,
    };
    tracing::info!(
        id,
        ok = steps.iter().all(|s| s.outcome.is_ok()),
        "{} connection tested",
        kind.table()
    );
    Ok(steps_json(&steps))
}

async fn list_sources(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    list_pieces(&s, PieceKind::Source).await
}
async fn create_source(
    State(s): State<AppState>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Response> {
    create_piece(&s, PieceKind::Source, b).await
}
async fn get_source(State(s): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<Value>> {
    Ok(Json(piece_json(
        PieceKind::Source,
        &s.store.piece(PieceKind::Source, id)?,
    )))
}
async fn update_source(
    State(s): State<AppState>,
    Path(id): Path<i64>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Json<Value>> {
    update_piece(&s, PieceKind::Source, id, b).await
}
async fn delete_source(State(s): State<AppState>, Path(id): Path<i64>) -> ApiResult<StatusCode> {
    delete_piece(&s, PieceKind::Source, id).await
}
async fn test_source(State(s): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<Value>> {
    test_piece(&s, PieceKind::Source, id).await
}
async fn list_destinations(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    list_pieces(&s, PieceKind::Destination).await
}
async fn create_destination(
    State(s): State<AppState>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Response> {
    create_piece(&s, PieceKind::Destination, b).await
}
async fn get_destination(State(s): State<AppState>, Path(id): Path<i64>) -> ApiResult<Json<Value>> {
    let row = s.store.piece(PieceKind::Destination, id)?;
    Ok(Json(piece_json(PieceKind::Destination, &row)))
}
async fn update_destination(
    State(s): State<AppState>,
    Path(id): Path<i64>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Json<Value>> {
    update_piece(&s, PieceKind::Destination, id, b).await
}
async fn delete_destination(
    State(s): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<StatusCode> {
    delete_piece(&s, PieceKind::Destination, id).await
}
async fn test_destination(
    State(s): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<Value>> {
    test_piece(&s, PieceKind::Destination, id).await
}

/// An ISO-8601 UTC time for ms since the epoch.
pub(crate) fn iso(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}
