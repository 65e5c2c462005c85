//! The web UI: one HTML page, its scripts (one per concern: `app.js` the
//! helpers, routing and login; `forms.js` the labelled fields and their
//! errors; `pieces.js` sources and destinations; `jobs.js` the job pages;
//! `runs.js` a run's page; `chart.js` the history chart; `streams.js` the
//! streams page) and one stylesheet, embedded in
//! the binary (no CDN, works offline). The scripts drive the same JSON API
//! as any client (`/api/...`), so the UI and the API share every rule
//! (validation, write-only secrets, CSRF). `GET /api/session` gives a page
//! loaded with a valid session cookie its CSRF token back; `GET
//! /api/schema` the job file's JSON Schema and `GET /api/forms` the forms
//! made from it ([`form_model`]).

pub mod form_model;

use crate::api::answers::SessionInfo;
use crate::auth::{self, Session};
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Extension, Path as AxumPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

const INDEX_HTML: &str = include_str!("ui/index.html");
const APP_CSS: &str = include_str!("ui/app.css");

/// The scripts, in the order `index.html` loads them.
const SCRIPTS: [(&str, &str); 9] = [
    ("app.js", include_str!("ui/app.js")),
    ("forms.js", include_str!("ui/forms.js")),
    ("pieces.js", include_str!("ui/pieces.js")),
    ("chart.js", include_str!("ui/chart.js")),
    ("jobs.js", include_str!("ui/jobs.js")),
    ("runs.js", include_str!("ui/runs.js")),
    ("progress.js", include_str!("ui/progress.js")),
    ("streams.js", include_str!("ui/streams.js")),
    ("tables.js", include_str!("ui/tables.js")),
];

/// The page and its assets (open: the page asks the API for a session).
pub fn public_routes() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/ui/{script}", get(script))
        .route("/ui/app.css", get(app_css))
}

/// `GET /api/session`: the current session's CSRF token; `GET
/// /api/schema` and `GET /api/forms`.
pub fn protected_routes() -> Router<AppState> {
    Router::new()
        .route("/api/session", get(session))
        .route("/api/schema", get(schema))
        .route("/api/forms", get(forms))
}

/// The job file's JSON Schema (as `docs/src/reference/job-file.schema.json`).
async fn schema() -> Json<serde_json::Value> {
    Json(topicberg_core::config::job_file_schema())
}

/// The forms the scripts render, made from the schema.
async fn forms() -> Json<form_model::Forms> {
    Json(form_model::forms())
}

async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            ),
        ],
        INDEX_HTML,
    )
}

async fn script(AxumPath(name): AxumPath<String>) -> Response {
    match SCRIPTS.iter().find(|(file, _)| *file == name) {
        Some((_, text)) => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            *text,
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn app_css() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], APP_CSS)
}

async fn session(
    State(state): State<AppState>,
    Extension(session): Extension<Session>,
) -> Result<Json<SessionInfo>, ApiError> {
    let (csrf, _) = state
        .store
        .session(&session.token_hash)?
        .ok_or_else(|| ApiError::new(axum::http::StatusCode::UNAUTHORIZED, "log in first"))?;
    Ok(Json(SessionInfo {
        csrf,
        username: auth::ADMIN_USER.to_string(),
    }))
}
