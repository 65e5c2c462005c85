//! The failures librdkafka reports in the background, not as a request's
//! result, that waiting will not mend (a refused login, a TLS handshake
//! that failed): [`Failure`], told from the error's code and text, and
//! [`ErrorRecordingContext`], the client context that keeps the most
//! telling one for [`crate::ping`] and the offset reads to report.

use std::sync::Mutex;

use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// Remembers the most telling error librdkafka reported in the background
/// (authentication and TLS failures arrive there, not as the request's
/// result): a decisive one (see [`Failure::of`]) is never replaced.
#[derive(Default)]
pub(crate) struct ErrorRecordingContext {
    last: Mutex<Option<(RDKafkaErrorCode, String)>>,
}

impl ErrorRecordingContext {
    pub(crate) fn last_error(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.last.lock().map(|g| g.clone()).unwrap_or(None)
    }

    /// The decisive failure seen so far, if any.
    pub(crate) fn failure(&self) -> Option<Failure> {
        self.last_error()
            .and_then(|(code, reason)| Failure::of(code, &reason))
    }

    fn record(&self, code: RDKafkaErrorCode, reason: &str) {
        if let Ok(mut last) = self.last.lock() {
            let keep = last
                .as_ref()
                .is_some_and(|(c, r)| Failure::of(*c, r).is_some());
            if !keep {
                *last = Some((code, reason.to_string()));
            }
        }
    }
}

impl ClientContext for ErrorRecordingContext {
    fn error(&self, error: RdKafkaError, reason: &str) {
        let code = error.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail);
        self.record(code, reason);
    }

    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        // librdkafka's own log lines (one per failed connect attempt) stay
        // out of the way; a TLS or SASL failure in them is kept, as it may
        // come before (or instead of) the error event.
        if matches!(fac, "FAIL" | "SASL" | "OIDC" | "SSL" | "OAUTHBEARER") {
            if let Some(failure) = Failure::of(RDKafkaErrorCode::Fail, log_message) {
                self.record(failure.code(), log_message);
            }
        }
    }
}

/// A failure that waiting will not mend: report it at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// SASL login refused, or no OAUTHBEARER token.
    Authentication,
    /// The broker's certificate was not accepted.
    ServerCertificate,
    /// The broker refused our client certificate (or wanted one).
    ClientCertificate,
    /// Another TLS handshake failure (e.g. not a TLS listener).
    Tls,
}

impl Failure {
    /// Classifies librdkafka's error code and text.
    pub(crate) fn of(code: RDKafkaErrorCode, reason: &str) -> Option<Failure> {
        let r = reason.to_ascii_lowercase();
        if code == RDKafkaErrorCode::Authentication
            || r.contains("sasl authentication error")
            || r.contains("oauthbearer token")
            || r.contains("oidc")
        {
            return Some(Failure::Authentication);
        }
        if r.contains("certificate verify failed") {
            return Some(Failure::ServerCertificate);
        }
        // TLS alerts a broker sends about our certificate: bad certificate
        // (42), certificate expired (45), certificate unknown (46), unknown
        // CA (48), certificate required (116).
        if [
            "alert number 42",
            "alert number 45",
            "alert number 46",
            "alert number 48",
            "alert number 116",
        ]
        .iter()
        .any(|a| r.contains(a))
            || r.contains("certificate required")
        {
            return Some(Failure::ClientCertificate);
        }
        if code == RDKafkaErrorCode::SSL || r.contains("ssl handshake failed") {
            return Some(Failure::Tls);
        }
        None
    }

    fn code(self) -> RDKafkaErrorCode {
        match self {
            Failure::Authentication => RDKafkaErrorCode::Authentication,
            _ => RDKafkaErrorCode::SSL,
        }
    }
}

impl rdkafka::consumer::ConsumerContext for ErrorRecordingContext {}

impl rdkafka::producer::ProducerContext for ErrorRecordingContext {
    type DeliveryOpaque = ();
    fn delivery(
        &self,
        _result: &rdkafka::message::DeliveryResult<'_>,
        _opaque: Self::DeliveryOpaque,
    ) {
    }
}
