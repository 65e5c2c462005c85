//! The JSON API under `/api/` (docs/serve.md, "JSON API"): setup, login,
//! sources, destinations and their connection tests; jobs, runs, import
//! and export live in `api/jobs.rs`. Answers are the structs of
//! [`answers`]; errors are [`ApiError`]s (`{"error": "...", "problems":
//! [...]}` with a fitting status). No answer, log line or error carries a
//! stored secret.

pub mod answers;
mod jobs;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use topicberg_core::JobConfig;

use self::answers::{ConnectionTest, Done, PieceView, SessionInfo, SetupDone};
use crate::auth::{self, Session};
use crate::error::{ApiError, ApiResult};
use crate::pieces::{self, Piece, PieceKind, Secrets};
use crate::state::AppState;
use crate::store::PieceRow;

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
        .map_err(ApiError::internal)?
        .map_err(ApiError::internal)?;
    state.store.set_admin(auth::ADMIN_USER, &hash)?;
    tracing::info!("admin password set through /api/setup");
    Ok(Json(SetupDone {
        ok: true,
        username: auth::ADMIN_USER,
    })
    .into_response())
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
        Json(SessionInfo { csrf, username }),
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
        Json(Done { ok: true }),
    )
        .into_response())
}

// --- sources and destinations ---

/// A piece as the API shows it: id, name and the redacted table.
fn piece_view(kind: PieceKind, row: &PieceRow) -> PieceView<'_> {
    PieceView { kind, row }
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

async fn list_pieces(state: &AppState, kind: PieceKind) -> ApiResult<Response> {
    let rows = state.store.pieces(kind)?;
    let views: Vec<PieceView> = rows.iter().map(|r| piece_view(kind, r)).collect();
    Ok(Json(views).into_response())
}

async fn create_piece(state: &AppState, kind: PieceKind, body: Piece) -> ApiResult<Response> {
    let (name, config) = piece_body(body)?;
    let config = pieces::merge_secrets(kind, None, config);
    pieces::validate_piece(kind, &config)?;
    let id = state.store.insert_piece(kind, &name, &config)?;
    tracing::info!(id, name = %name, "{} created", kind.table());
    let row = state.store.piece(kind, id)?;
    Ok((StatusCode::CREATED, Json(piece_view(kind, &row))).into_response())
}

async fn update_piece(
    state: &AppState,
    kind: PieceKind,
    id: i64,
    body: Piece,
) -> ApiResult<Response> {
    let old = state.store.piece(kind, id)?;
    let (name, config) = piece_body(body)?;
    let config = pieces::merge_secrets(kind, Some(&old.config), config);
    pieces::validate_piece(kind, &config)?;
    state.store.update_piece(kind, id, &name, &config)?;
    tracing::info!(id, name = %name, "{} updated", kind.table());
    let row = state.store.piece(kind, id)?;
    Ok(Json(piece_view(kind, &row)).into_response())
}

fn get_piece(state: &AppState, kind: PieceKind, id: i64) -> ApiResult<Response> {
    let row = state.store.piece(kind, id)?;
    Ok(Json(piece_view(kind, &row)).into_response())
}

async fn delete_piece(state: &AppState, kind: PieceKind, id: i64) -> ApiResult<StatusCode> {
    state.store.delete_piece(kind, id)?;
    tracing::info!(id, "{} deleted", kind.table());
    Ok(StatusCode::NO_CONTENT)
}

/// The job file a connection test runs with: the piece, a stand-in for the
/// other table, the real secrets.
fn test_config(state: &AppState, kind: PieceKind, row: &PieceRow) -> ApiResult<JobConfig> {
    let mut source = Piece::from_iter([("bootstrap_servers".into(), "127.0.0.1:9".into())]);
    let empty = Piece::new();
    let destination = match kind {
        PieceKind::Source => {
            source = row.config.clone();
            if !source.contains_key("topic_pattern") {
                // The job's [[streams]] select its topics; alone, none.
                source.insert("topic_pattern".into(), "^$".into());
            }
            &empty
        }
        PieceKind::Destination => {
            source.insert("topic_pattern".into(), "^$".into());
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
    JobConfig::from_toml_str(&text, |name| std::env::var(name).ok())
        .map_err(|e| ApiError::job_file(&e, kind.table()))
}

async fn test_piece(state: &AppState, kind: PieceKind, id: i64) -> ApiResult<Json<ConnectionTest>> {
    let row = state.store.piece(kind, id)?;
    let config = test_config(state, kind, &row)?;
    let job = crate::runner::resolve_job(&config)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e))?;
    let steps = match kind {
        PieceKind::Source => topicberg_sync::check::check_source(&job).await,
        PieceKind::Destination => topicberg_sync::check::check_destination(&job).await,
    };
    tracing::info!(
        id,
        ok = steps.iter().all(|s| s.outcome.is_ok()),
        "{} connection tested",
        kind.table()
    );
    Ok(Json(ConnectionTest::new(&steps)))
}

async fn list_sources(State(s): State<AppState>) -> ApiResult<Response> {
    list_pieces(&s, PieceKind::Source).await
}
async fn create_source(
    State(s): State<AppState>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Response> {
    create_piece(&s, PieceKind::Source, b).await
}
async fn get_source(State(s): State<AppState>, Path(id): Path<i64>) -> ApiResult<Response> {
    get_piece(&s, PieceKind::Source, id)
}
async fn update_source(
    State(s): State<AppState>,
    Path(id): Path<i64>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Response> {
    update_piece(&s, PieceKind::Source, id, b).await
}
async fn delete_source(State(s): State<AppState>, Path(id): Path<i64>) -> ApiResult<StatusCode> {
    delete_piece(&s, PieceKind::Source, id).await
}
async fn test_source(
    State(s): State<AppState>,
    Path(id): Path<i64>,
) -> ApiResult<Json<ConnectionTest>> {
    test_piece(&s, PieceKind::Source, id).await
}
async fn list_destinations(State(s): State<AppState>) -> ApiResult<Response> {
    list_pieces(&s, PieceKind::Destination).await
}
async fn create_destination(
    State(s): State<AppState>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Response> {
    create_piece(&s, PieceKind::Destination, b).await
}
async fn get_destination(State(s): State<AppState>, Path(id): Path<i64>) -> ApiResult<Response> {
    get_piece(&s, PieceKind::Destination, id)
}
async fn update_destination(
    State(s): State<AppState>,
    Path(id): Path<i64>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Response> {
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
) -> ApiResult<Json<ConnectionTest>> {
    test_piece(&s, PieceKind::Destination, id).await
}
