//! The error every handler and the session middleware answer with: a
//! status and `{"error": "...", "problems": [...]}` (`problems` only when
//! there are some). No message carries a stored secret.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use crate::pieces::PieceError;
use crate::store::StoreError;

/// An API error: a status and a message (never a secret).
#[derive(Debug)]
pub struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    pub(crate) problems: Vec<String>,
}

/// A handler's result.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            problems: Vec::new(),
        }
    }

    /// A 400 with `message`.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// A 400 for a job file the parser refused: its message (with
    /// `<inline>` named `what`) and its problems.
    pub(crate) fn job_file(e: &topicberg_core::config::ConfigError, what: &str) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: e.to_string().replace("<inline>", what),
            problems: e.problems().iter().map(ToString::to_string).collect(),
        }
    }

    /// A 500 with `message`.
    pub(crate) fn internal(message: impl ToString) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message.to_string())
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

impl From<PieceError> for ApiError {
    fn from(e: PieceError) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: e.message,
            problems: e.problems,
        }
    }
}

/// The body of every error answer.
#[derive(Serialize)]
pub struct ErrorBody<'a> {
    /// What went wrong.
    pub error: &'a str,
    /// The job file's problems, when there are some.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub problems: &'a [String],
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: &self.message,
            problems: &self.problems,
        };
        (self.status, Json(body)).into_response()
    }
}
