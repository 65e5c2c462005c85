//! The JSON API under `/api/` (docs/src/reference/http-api.md): setup, login,
//! sources, destinations and their connection tests; jobs, runs, import
//! and export live in `api/jobs.rs`. Answers are the structs of
//! [`answers`]; errors are [`ApiError`]s (`{"error": "...", "problems":
//! [...]}` with a fitting status). No answer, log line or error carries a
//! stored secret.

pub mod answers;
mod follow;
pub(crate) mod job_state;
mod jobs;
mod members;
mod overview;
mod progress;
mod schedules;
mod tables;

use std::net::{IpAddr, SocketAddr};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use topicberg_core::Job;

use self::answers::{ConnectionTest, Done, PieceView, SessionInfo, SetupDone};
use crate::auth::{self, Session};
use crate::body::{self, BodyError};
use crate::error::{ApiError, ApiResult};
use crate::forwarded;
use crate::guard;
use crate::job_file::{load_job, JobConfigError, JobFileError};
use crate::pieces::{self, Piece, PieceKind, Secrets};
use crate::state::AppState;
use crate::store::PieceRow;

/// A JSON body whose errors name the place and kind of the problem but
/// never quote a value (it may be a password).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req).await?;
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

/// The request's body, at most [`BODY_LIMIT`] bytes: over it `413` in the
/// API's JSON error shape (after draining the rest so that the client
/// reads the answer, see [`crate::body`]).
pub(crate) async fn read_body(req: Request) -> Result<Bytes, ApiError> {
    let waits = body::waits_to_send(req.headers());
    body::read_limited(req.into_body(), BODY_LIMIT, waits)
        .await
        .map_err(|e| match e {
            BodyError::TooLarge { .. } => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is over the limit of {BODY_LIMIT_TEXT}; send less"),
            ),
            BodyError::Broken(_) => ApiError::bad_request(e.to_string()),
        })
}

/// The request body limit of the API (JSON and job files).
const BODY_LIMIT: usize = 2 << 20;

/// [`BODY_LIMIT`] as said in errors.
const BODY_LIMIT_TEXT: &str = "2 MiB";

/// A UTF-8 text body (a job file), read as [`ApiJson`] reads JSON.
pub struct ApiText(pub String);

impl<S: Send + Sync> FromRequest<S> for ApiText {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req).await?;
        String::from_utf8(bytes.to_vec()).map(ApiText).map_err(|e| {
            ApiError::bad_request(format!(
                "the request body is not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
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
        .route("/api/sources/test", post(test_unsaved_source))
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
        .route("/api/destinations/test", post(test_unsaved_destination))
        .merge(jobs::routes())
        .merge(follow::routes())
        .merge(schedules::routes())
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
    #[serde(default)]
    setup_token: String,
}

/// The client's address (absent only when the router runs without
/// connection info, as in unit tests).
type ClientAddr = Option<Extension<ConnectInfo<SocketAddr>>>;

fn client_ip(addr: &ClientAddr) -> IpAddr {
    addr.as_ref()
        .map_or(IpAddr::from([0, 0, 0, 0]), |Extension(ConnectInfo(a))| {
            a.ip()
        })
}

/// How the request reached the service ([`crate::forwarded`]) and
/// whether its session cookie is `Secure`, or why login cannot work
/// over it.
fn arrival(
    state: &AppState,
    addr: &ClientAddr,
    headers: &HeaderMap,
) -> (forwarded::Arrival, ApiResult<bool>) {
    let transport = &state.guard.transport;
    let arrival = transport.arrival(client_ip(addr), headers);
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let secure = transport.session_cookie_secure(&arrival, host);
    (arrival, secure)
}

/// `POST /api/setup {password, setup_token}`: sets the admin password,
/// only while none is set, with the one-time token the service printed in
/// its log at start; JSON from this service's own page only. Of two
/// setups at once, one wins and the other gets `409`.
async fn setup(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<SetupBody>,
) -> ApiResult<Response> {
    guard::require_same_origin_json(&headers)?;
    let already = || {
        ApiError::new(
            StatusCode::CONFLICT,
            "the admin password is already set; log in (POST /api/login)",
        )
    };
    if state.store.admin()?.is_some() {
        return Err(already());
    }
    let token_ok = {
        let token = state
            .guard
            .setup_token
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        token
            .as_deref()
            .is_some_and(|t| guard::constant_time_eq(t.as_bytes(), body.setup_token.as_bytes()))
    };
    if !token_ok {
        tracing::warn!("setup refused: wrong or missing setup token");
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "wrong or missing setup_token: the service printed it in its log at start (or set TOPICBERG_ADMIN_PASSWORD and restart)",
        ));
    }
    if body.password.chars().count() < auth::MIN_PASSWORD_LEN {
        return Err(ApiError::bad_request(format!(
            "the password needs at least {} characters",
            auth::MIN_PASSWORD_LEN
        )));
    }
    let hash = state
        .guard
        .login
        .hash(move || auth::hash_password(&body.password))
        .await
        .ok_or_else(|| ApiError::internal("the password could not be hashed"))?
        .map_err(ApiError::internal)?;
    if !state.store.create_admin(auth::ADMIN_USER, &hash)? {
        return Err(already());
    }
    state
        .guard
        .setup_token
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
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
/// returns `{csrf}`. JSON from this service's own page only; a client
/// that failed too often waits (`429`, `Retry-After`); at most
/// `guard::MAX_CONCURRENT_HASHES` passwords are checked at once.
async fn login(
    State(state): State<AppState>,
    addr: ClientAddr,
    headers: HeaderMap,
    ApiJson(body): ApiJson<LoginBody>,
) -> ApiResult<Response> {
    guard::require_same_origin_json(&headers)?;
    let (arrival, secure) = arrival(&state, &addr, &headers);
    let secure = secure?;
    let client = arrival.client;
    if let Err(wait) = state.guard.login.check(client) {
        let seconds = wait.as_secs() + 1;
        tracing::warn!(client = %client, retry_after_s = seconds, "login refused: too many failed logins");
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("too many failed logins; try again in {seconds} s"),
        )
        .into_response();
        e.headers_mut().insert(
            header::RETRY_AFTER,
            seconds.to_string().parse().expect("digits"),
        );
        return Ok(e);
    }
    let Some((username, hash)) = state.store.admin()? else {
        return Err(auth::setup_needed());
    };
    let password = body.password;
    let ok = state
        .guard
        .login
        .hash(move || auth::verify_password(&password, &hash))
        .await
        .unwrap_or(false);
    if !ok || body.username != username {
        state.guard.login.failed(client);
        tracing::warn!(client = %client, "failed login");
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "wrong username or password",
        ));
    }
    state.guard.login.succeeded(client);
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
        [(header::SET_COOKIE, auth::session_cookie(&token, secure))],
        Json(SessionInfo { csrf, username }),
    )
        .into_response())
}

/// `POST /api/logout`: ends the session.
async fn logout(
    State(state): State<AppState>,
    addr: ClientAddr,
    headers: HeaderMap,
    Extension(session): Extension<Session>,
) -> ApiResult<Response> {
    state.store.delete_session(&session.token_hash)?;
    // Where no session could start, its cookie could not be kept either.
    let secure = arrival(&state, &addr, &headers).1.unwrap_or(true);
    Ok((
        [(header::SET_COOKIE, auth::clear_cookie(secure))],
        Json(Done { ok: true }),
    )
        .into_response())
}

// --- sources and destinations ---

/// A piece as the API shows it: id, name and the redacted table.
fn piece_view(kind: PieceKind, row: &PieceRow) -> PieceView<'_> {
    PieceView { kind, row }
}

/// The longest name of a job, source or destination (characters).
pub const MAX_NAME_CHARS: usize = 100;

/// A name as stored: trimmed, 1 to [`MAX_NAME_CHARS`] characters, no
/// control characters (a newline would start a line of its own in an
/// exported job file's comments, or in a log).
pub(crate) fn check_name(name: &str) -> ApiResult<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::bad_request("name: required (a non-empty string)"));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "name: at most {MAX_NAME_CHARS} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "name: no control characters (newlines, tabs, ...)",
        ));
    }
    Ok(name.to_string())
}

/// Splits a request body into the name and the table (ids ignored).
fn piece_body(mut body: Piece) -> ApiResult<(String, Piece)> {
    body.remove("id");
    let name = match body.remove("name") {
        Some(Value::String(n)) => check_name(&n)?,
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
    let config = pieces::merge_secrets(kind, None, config)?;
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
    let config = pieces::merge_secrets(kind, Some(&old.config), config)?;
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

/// The job a connection test runs with: the piece, a stand-in for the
/// other table, the real secrets.
fn test_job(state: &AppState, kind: PieceKind, piece: &Piece) -> ApiResult<Job> {
    let mut source = Piece::from_iter([("bootstrap_servers".into(), "127.0.0.1:9".into())]);
    let empty = Piece::new();
    let destination = match kind {
        PieceKind::Source => {
            source = piece.clone();
            if !source.contains_key("topic_pattern") {
                // The job's [[streams]] select its topics; alone, none.
                source.insert("topic_pattern".into(), "^$".into());
            }
            &empty
        }
        PieceKind::Destination => {
            source.insert("topic_pattern".into(), "^$".into());
            piece
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
            maintain: &empty,
        },
        Secrets::Real {
            data_dir: state.store.data_dir(),
        },
    )?;
    match load_job(&text, Some(state.store.data_dir())) {
        Ok(loaded) => Ok(loaded.job),
        Err(JobFileError::Config(JobConfigError::Invalid(e))) => {
            Err(ApiError::job_file(&e, kind.table()))
        }
        Err(e) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            e.to_string(),
        )),
    }
}

/// Tests a piece: the stored one, or (`body`) what a form shows before it
/// is saved, with the stored secrets of `body.id` where the form keeps them
/// (never sent to an address that changed: `merge_secrets`).
async fn test_piece(
    state: &AppState,
    kind: PieceKind,
    id: Option<i64>,
    body: Option<Piece>,
) -> ApiResult<Json<ConnectionTest>> {
    let piece = match body {
        None => state.store.piece(kind, id.unwrap_or_default())?.config,
        Some(mut body) => {
            let stored = match body.remove("id").and_then(|v| v.as_i64()) {
                Some(id) => Some(state.store.piece(kind, id)?.config),
                None => None,
            };
            body.remove("name");
            let piece = pieces::merge_secrets(kind, stored.as_ref(), body)?;
            pieces::validate_piece(kind, &piece)?;
            piece
        }
    };
    let id = id.unwrap_or_default();
    let job = test_job(state, kind, &piece)?;
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
    test_piece(&s, PieceKind::Source, Some(id), None).await
}
async fn test_unsaved_source(
    State(s): State<AppState>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Json<ConnectionTest>> {
    test_piece(&s, PieceKind::Source, None, Some(b)).await
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
    test_piece(&s, PieceKind::Destination, Some(id), None).await
}
async fn test_unsaved_destination(
    State(s): State<AppState>,
    ApiJson(b): ApiJson<Piece>,
) -> ApiResult<Json<ConnectionTest>> {
    test_piece(&s, PieceKind::Destination, None, Some(b)).await
}
