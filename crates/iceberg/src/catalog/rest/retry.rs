//! Bounded retries of catalog requests that failed transiently.
//!
//! A request is sent again when the catalog could not be reached before
//! the request left (connection refused, DNS, TLS: any method), or, for
//! requests that change nothing (`GET`, `HEAD`, the token exchange), when
//! the connection broke or timed out or the catalog answered 5xx or 429.
//! Other requests (a commit, a create) are never resent here: whether
//! they took effect is for the caller to find out (the commit loop
//! reloads the table). The one exception is the create of a namespace a
//! sync needs (`ensure_namespace`): resent like a `GET`, since a second
//! create of an existing namespace is a conflict, which it takes as
//! "exists".
//!
//! At most [`ATTEMPTS`] attempts, waiting 0.5 s, 1 s, 2 s between them,
//! and none started later than [`WINDOW`] after the first, so an
//! unreachable catalog fails in about 3.5 s (a refused connection) and a
//! hanging one within [`WINDOW`] plus one request timeout.

use std::time::{Duration, Instant};

use reqwest::StatusCode;

/// Attempts per request, the first included.
pub const ATTEMPTS: u32 = 4;
/// The first wait; each next one doubles.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// No attempt starts later than this after the first.
pub const WINDOW: Duration = Duration::from_secs(60);

/// The retry state of one request.
#[derive(Debug)]
pub(crate) struct Retry {
    started: Instant,
    attempts: u32,
}

impl Retry {
    pub(crate) fn new() -> Self {
        Self {
            started: Instant::now(),
            attempts: 0,
        }
    }

    /// Counts an attempt about to be sent.
    pub(crate) fn attempt(&mut self) {
        self.attempts += 1;
    }

    /// Forgets the last attempt (resent at once with a fresh token: not a
    /// failure of the catalog).
    pub(crate) fn uncount(&mut self) {
        self.attempts = self.attempts.saturating_sub(1);
    }

    /// The wait before the next attempt, or `None` when the attempts or
    /// the time window are spent.
    fn next_wait(&self) -> Option<Duration> {
        if self.attempts >= ATTEMPTS || self.started.elapsed() >= WINDOW {
            return None;
        }
        Some(FIRST_BACKOFF * 2u32.pow(self.attempts.saturating_sub(1)))
    }

    /// Waits before the next attempt and returns `true`, or returns
    /// `false` when the attempts or the time window are spent.
    pub(crate) async fn again(&self) -> bool {
        let Some(wait) = self.next_wait() else {
            return false;
        };
        tracing::info!(
            attempt = self.attempts,
            of = ATTEMPTS,
            wait_ms = wait.as_millis() as u64,
            "catalog request failed transiently; retrying"
        );
        tokio::time::sleep(wait).await;
        true
    }

    /// ` (N attempts in X s)` when the request was sent more than once.
    pub(crate) fn note(&self) -> String {
        if self.attempts <= 1 {
            return String::new();
        }
        format!(
            " (gave up after {} attempts in {:.1} s)",
            self.attempts,
            self.started.elapsed().as_secs_f64()
        )
    }
}

/// Whether a transport error may be retried: always when nothing was
/// sent (the connection was never made), otherwise only for requests that
/// change nothing.
pub(crate) fn transport_retryable(err: &reqwest::Error, idempotent: bool) -> bool {
    // A certificate the client does not trust stays untrusted.
    !is_tls_failure(&describe_transport(err)) && (err.is_connect() || idempotent)
}

/// Whether a transport failure's text is a TLS certificate problem.
pub(crate) fn is_tls_failure(text: &str) -> bool {
    text.contains("certificate") || text.contains("SSL routines") || text.contains("handshake")
}

/// The likely fix of a transport failure that is a TLS certificate problem.
pub(crate) fn tls_hint(text: &str) -> &'static str {
    if is_tls_failure(text) {
        " (a TLS certificate this client does not trust, or that does not name the host: \
         set destination.ca_pem to the CA that signed it, and use the host name the \
         certificate names)"
    } else {
        ""
    }
}

/// Whether an answer's status may be retried (for requests that change
/// nothing).
pub(crate) fn status_retryable(status: StatusCode, idempotent: bool) -> bool {
    idempotent && (status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS)
}

/// A transport error in words: reqwest's Display hides the cause chain.
pub(crate) fn describe_transport(err: &reqwest::Error) -> String {
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
        let mut retry = Retry::new();
        let mut waits = Vec::new();
        loop {
            retry.attempt();
            match retry.next_wait() {
                Some(wait) => waits.push(wait.as_millis()),
                None => break,
            }
        }
        assert_eq!(waits, [500, 1000, 2000]);
        assert!(
            retry.note().contains("after 4 attempts"),
            "{}",
            retry.note()
        );
        let mut late = Retry::new();
        late.started -= WINDOW;
        late.attempt();
        assert_eq!(late.next_wait(), None, "no attempt after the window");
        let mut once = Retry::new();
        once.attempt();
        assert_eq!(once.note(), "");
    }

    #[test]
    fn only_requests_that_change_nothing_retry_answers() {
        assert!(status_retryable(StatusCode::SERVICE_UNAVAILABLE, true));
        assert!(status_retryable(StatusCode::TOO_MANY_REQUESTS, true));
        assert!(!status_retryable(StatusCode::SERVICE_UNAVAILABLE, false));
        assert!(!status_retryable(StatusCode::CONFLICT, true));
        assert!(!status_retryable(StatusCode::UNAUTHORIZED, true));
    }
}
