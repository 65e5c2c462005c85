//! One registry `GET`, sent again while the registry is transiently
//! unavailable, and its answer classified into a [`RegistryError`] kind.
//!
//! Every registry request reads and changes nothing, so any transport
//! failure (refused, reset, timed out), a 5xx or 429 answer, and Karapace's
//! `50003` ("master not available", while it elects its master) are tried
//! again: at most [`RetryPolicy::attempts`] attempts, waiting
//! `first_backoff`, then twice as long each time, none started later than
//! `window` after the first. Then the error is `Unavailable`. A 404 (or an
//! `error_code` 404xx) is `NotFound`, a 401 / 403 `Unauthorized`: never
//! retried.

use std::time::{Duration, Instant};

use reqwest::{StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use topicberg_core::{redact_urls, RegistryCredentials, RegistryError, RegistryErrorKind};

/// How often and how long a registry request is tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per request, the first included.
    pub attempts: u32,
    /// The first wait; each next one doubles.
    pub first_backoff: Duration,
    /// No attempt starts later than this after the first.
    pub window: Duration,
}

impl Default for RetryPolicy {
    /// 5 attempts, waiting 0.5 s, 1 s, 2 s, 4 s: a registry that stays
    /// down fails a request in about 7.5 s (plus the request timeouts of a
    /// hanging one, within 60 s).
    fn default() -> Self {
        Self {
            attempts: 5,
            first_backoff: Duration::from_millis(500),
            window: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait after `attempts` failed attempts that began at `started`,
    /// or `None` when the attempts or the window are spent.
    fn wait_after(&self, attempts: u32, started: Instant) -> Option<Duration> {
        if attempts >= self.attempts || started.elapsed() >= self.window {
            return None;
        }
        Some(self.first_backoff * 2u32.saturating_pow(attempts.saturating_sub(1)))
    }
}

/// Where requests go and how they authenticate.
#[derive(Debug)]
pub(super) struct Endpoint {
    pub(super) http: reqwest::Client,
    /// The base URL (a path prefix is kept).
    pub(super) base: Url,
    /// The base URL as errors show it.
    pub(super) shown: String,
    pub(super) credentials: Option<RegistryCredentials>,
    pub(super) retry: RetryPolicy,
}

/// The registry's error body: `{"error_code": 40403, "message": "..."}`.
#[derive(Debug, Default, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    error_code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
}

/// Karapace's (and Confluent's) "master / leader not available".
const NO_LEADER: i64 = 50003;

/// One failed attempt: whether trying again may help, and what to say.
struct Failure {
    kind: RegistryErrorKind,
    retryable: bool,
    message: String,
}

impl Endpoint {
    /// An error about `what`, safe to print.
    pub(super) fn error(
        &self,
        kind: RegistryErrorKind,
        what: &str,
        message: impl AsRef<str>,
    ) -> RegistryError {
        RegistryError {
            kind,
            registry: self.shown.clone(),
            what: what.to_string(),
            message: redact_urls(message.as_ref()),
        }
    }

    /// The URL of `segments` under the base (each segment percent-encoded).
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("an http(s) base URL has path segments")
            .pop_if_empty()
            .extend(segments);
        url
    }

    /// `GET` `segments` and parse the JSON answer, with retries; `what`
    /// names the request in errors (`schema id 7`).
    pub(super) async fn get<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        what: &str,
    ) -> Result<T, RegistryError> {
        let url = self.url(segments);
        let started = Instant::now();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let failure = match self.attempt(&url).await {
                Ok(body) => {
                    return serde_json::from_slice(&body).map_err(|e| {
                        let kind = RegistryErrorKind::Invalid;
                        self.error(kind, what, format!("unexpected answer: {e}"))
                    })
                }
                Err(failure) => failure,
            };
            let wait = failure
                .retryable
                .then(|| self.retry.wait_after(attempts, started))
                .flatten();
            let Some(wait) = wait else {
                return Err(self.give_up(failure, attempts, started, what));
            };
            tracing::info!(
                registry = %self.shown, what, attempt = attempts, of = self.retry.attempts,
                wait_ms = wait.as_millis() as u64, reason = %redact_urls(&failure.message),
                "schema registry request failed transiently; retrying"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// The error after the last attempt; a retryable failure becomes
    /// `Unavailable`, saying how long it was tried.
    fn give_up(
        &self,
        failure: Failure,
        attempts: u32,
        started: Instant,
        what: &str,
    ) -> RegistryError {
        if !failure.retryable {
            return self.error(failure.kind, what, failure.message);
        }
        let message = format!(
            "{} (gave up after {attempts} attempt(s) in {:.1} s)",
            failure.message,
            started.elapsed().as_secs_f64()
        );
        self.error(RegistryErrorKind::Unavailable, what, message)
    }

    /// One request: the body of a 2xx answer, or why not.
    async fn attempt(&self, url: &Url) -> Result<Vec<u8>, Failure> {
        let mut request = self.http.get(url.clone()).header(
            reqwest::header::ACCEPT,
            "application/vnd.schemaregistry.v1+json, application/json",
        );
        if let Some(c) = &self.credentials {
            request = request.basic_auth(&c.username, Some(c.password.expose()));
        }
        let transport = |e: reqwest::Error| Failure {
            kind: RegistryErrorKind::Unavailable,
            retryable: true,
            message: describe_transport(&e),
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let body = response.bytes().await.map_err(transport)?;
        if status.is_success() {
            return Ok(body.to_vec());
        }
        Err(classify(status, &body))
    }
}

/// A non-2xx answer as a failure kind.
fn classify(status: StatusCode, body: &[u8]) -> Failure {
    let parsed: ErrorBody = serde_json::from_slice(body).unwrap_or_default();
    let code = parsed.error_code;
    let text = parsed
        .message
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(200).collect());
    let message = match code {
        Some(code) => format!("HTTP {status}, error_code {code}: {text}"),
        None => format!("HTTP {status}: {text}"),
    };
    let not_found = status == StatusCode::NOT_FOUND || code.is_some_and(|c| c / 100 == 404);
    let (kind, retryable) = if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN
    {
        (RegistryErrorKind::Unauthorized, false)
    } else if not_found {
        (RegistryErrorKind::NotFound, false)
    } else if status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || code == Some(NO_LEADER)
    {
        (RegistryErrorKind::Unavailable, true)
    } else {
        (RegistryErrorKind::Invalid, false)
    };
    Failure {
        kind,
        retryable,
        message,
    }
}

/// A transport error with its causes: reqwest's Display hides them
/// (`connection refused`, the TLS verification failure).
fn describe_transport(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_bounded_and_back_off() {
        let policy = RetryPolicy::default();
        let started = Instant::now();
        let waits: Vec<u128> = (1..=5)
            .map_while(|n| policy.wait_after(n, started))
            .map(|w| w.as_millis())
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000]);
        let late = started - policy.window;
        assert_eq!(
            policy.wait_after(1, late),
            None,
            "no attempt after the window"
        );
    }

    #[test]
    fn answers_are_classified() {
        let kind = |status: u16, body: &str| {
            let f = classify(StatusCode::from_u16(status).unwrap(), body.as_bytes());
            (f.kind, f.retryable)
        };
        use RegistryErrorKind::*;
        assert_eq!(
            kind(
                404,
                r#"{"error_code":40403,"message":"Schema 7 not found"}"#
            ),
            (NotFound, false)
        );
        assert_eq!(kind(404, "not json"), (NotFound, false));
        assert_eq!(kind(422, r#"{"error_code":40403}"#), (NotFound, false));
        assert_eq!(
            kind(401, r#"{"error_code":401,"message":"Unauthorized"}"#),
            (Unauthorized, false)
        );
        assert_eq!(kind(403, ""), (Unauthorized, false));
        assert_eq!(kind(503, ""), (Unavailable, true));
        assert_eq!(kind(429, ""), (Unavailable, true));
        assert_eq!(
            kind(
                500,
                r#"{"error_code":50003,"message":"master not available"}"#
            ),
            (Unavailable, true)
        );
        assert_eq!(kind(422, r#"{"error_code":50003}"#), (Unavailable, true));
        assert_eq!(kind(400, r#"{"error_code":42201}"#), (Invalid, false));
        let f = classify(
            StatusCode::NOT_FOUND,
            br#"{"error_code":40401,"message":"Subject 'x' not found."}"#,
        );
        assert_eq!(
            f.message,
            "HTTP 404 Not Found, error_code 40401: Subject 'x' not found."
        );
    }
}
