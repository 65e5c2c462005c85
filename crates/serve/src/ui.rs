//! The web UI: one HTML page, its scripts (ES modules, one per concern:
//! `app.js` routing and login, the one the page loads; `dom.js` elements and
//! formats; `nav.js` redraws, timers and flash messages; `api.js` requests;
//! `forms.js` the labelled fields and their errors; `pieces.js` sources and
//! destinations; `jobs.js` the job pages; `runs.js` a run's page;
//! `progress.js` its live progress; `chart.js` the history chart;
//! `streams.js` the streams page; `tables.js` a table's page) and one
//! stylesheet, embedded in
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

/// The scripts: ES modules. `index.html` loads `app.js`, which imports the
/// others (the load order is the imports'; this list is what is served).
const SCRIPTS: [(&str, &str); 14] = [
    ("api.js", include_str!("ui/api.js")),
    ("app.js", include_str!("ui/app.js")),
    ("chart.js", include_str!("ui/chart.js")),
    ("dialog.js", include_str!("ui/dialog.js")),
    ("dom.js", include_str!("ui/dom.js")),
    ("forms.js", include_str!("ui/forms.js")),
    ("jobs.js", include_str!("ui/jobs.js")),
    ("nav.js", include_str!("ui/nav.js")),
    ("pieces.js", include_str!("ui/pieces.js")),
    ("progress.js", include_str!("ui/progress.js")),
    ("runs.js", include_str!("ui/runs.js")),
    ("schedule.js", include_str!("ui/schedule.js")),
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

#[cfg(test)]
mod tests {
    use super::{INDEX_HTML, SCRIPTS};

    /// The modules `text` imports (`import .. from "./x.js";`).
    fn imports(text: &str) -> Vec<&str> {
        text.lines()
            .filter(|l| l.starts_with("import "))
            .filter_map(|l| l.split("from \"./").nth(1))
            .filter_map(|rest| rest.split('"').next())
            .collect()
    }

    #[test]
    fn every_imported_module_is_served_and_every_served_one_is_imported() {
        let served: Vec<&str> = SCRIPTS.iter().map(|(file, _)| *file).collect();
        let mut imported = vec!["app.js"];
        for (file, text) in SCRIPTS {
            for module in imports(text) {
                assert!(
                    served.contains(&module),
                    "{file} imports {module}, which is not served"
                );
                imported.push(module);
            }
        }
        for file in served {
            assert!(
                imported.contains(&file),
                "{file} is served but no module imports it"
            );
        }
    }

    #[test]
    fn the_page_loads_app_js_alone_as_a_module() {
        let scripts: Vec<&str> = INDEX_HTML
            .lines()
            .filter(|l| l.contains("<script"))
            .collect();
        assert_eq!(
            scripts,
            [r#"<script type="module" src="/ui/app.js"></script>"#]
        );
    }
}
