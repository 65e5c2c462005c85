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

    /// A 400 for `problems` (`field: message` each): all of them in the
    /// message, and listed apart when there are several.
    pub(crate) fn with_problems(problems: Vec<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: problems.join("; "),
            problems: if problems.len() > 1 {
                problems
            } else {
                Vec::new()
            },
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

/// A word of an error longer than this is cut (a value echoed back).
const LONGEST_WORD: usize = 80;
/// An error text longer than this is cut.
const LONGEST_TEXT: usize = 2000;

/// `text` with what a request could have made long cut short: each word
/// (a run without spaces) to [`LONGEST_WORD`] characters, the whole to
/// [`LONGEST_TEXT`], each cut marked with how long it was. An error then
/// names the field and the fix without sending a large input back.
pub fn cut_echo(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(LONGEST_TEXT + 64));
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let chars = word.chars().count();
        if chars > LONGEST_WORD {
            out.extend(word.chars().take(LONGEST_WORD - 20));
            out.push_str(&format!("…({chars} characters)"));
        } else {
            out.push_str(word);
        }
    }
    let total = out.chars().count();
    if total > LONGEST_TEXT {
        out = out.chars().take(LONGEST_TEXT).collect();
        out.push_str(&format!("… (cut: {total} characters in all)"));
    }
    out
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        // What a request sent back to it (4xx); a server error keeps its
        // words (an object store's long paths name the failure).
        let cut = |text: &String| {
            if self.status.is_client_error() {
                cut_echo(text)
            } else {
                text.clone()
            }
        };
        let message = cut(&self.message);
        let problems: Vec<String> = self.problems.iter().map(cut).collect();
        let body = ErrorBody {
            error: &message,
            problems: &problems,
        };
        (self.status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_echoed_values_are_cut_and_the_field_and_fix_kept() {
        let long = "x".repeat(100_000);
        let text = cut_echo(&format!(
            "source.bootstrap_servers: \"{long}\" is not host:port; write it as e.g. \"host:9092\""
        ));
        assert!(
            text.starts_with("source.bootstrap_servers: \"xxx"),
            "{text}"
        );
        assert!(text.contains("…(100002 characters)"), "{text}");
        assert!(text.ends_with("write it as e.g. \"host:9092\""), "{text}");
        assert!(text.len() < 300, "{}", text.len());
        let words = "ab ".repeat(5_000);
        let text = cut_echo(&words);
        assert!(text.ends_with("… (cut: 15000 characters in all)"), "{text}");
        assert!(text.chars().count() < LONGEST_TEXT + 40);
        assert_eq!(
            cut_echo("schedule: \"every blue moon\" is not a schedule"),
            "schedule: \"every blue moon\" is not a schedule"
        );
    }
}
