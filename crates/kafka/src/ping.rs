//! A real round trip to the cluster: a metadata request with a deadline.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;

use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// What the cluster said about itself.
#[derive(Debug, Clone)]
pub struct BrokerMetadata {
    /// `(id, host:port)` of each broker, as the cluster advertises them.
    pub brokers: Vec<(i32, String)>,
    /// Names of the topics the credentials may describe, sorted.
    pub topics: Vec<String>,
}

/// Remembers the most telling error librdkafka reported in the background
/// (authentication failures arrive there, not as the request's result).
#[derive(Default)]
pub(crate) struct ErrorRecordingContext {
    last: Mutex<Option<(RDKafkaErrorCode, String)>>,
}

impl ErrorRecordingContext {
    pub(crate) fn last_error(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.last.lock().map(|g| g.clone()).unwrap_or(None)
    }
}

impl ClientContext for ErrorRecordingContext {
    fn error(&self, error: RdKafkaError, reason: &str) {
        let code = error.rdkafka_error_code().unwrap_or(RDKafkaErrorCode::Fail);
        if let Ok(mut last) = self.last.lock() {
            // An authentication failure is the most useful thing to report;
            // don't let a later "all brokers down" hide it.
            let keep = matches!(last.as_ref(), Some((RDKafkaErrorCode::Authentication, _)))
                && code != RDKafkaErrorCode::Authentication;
            if !keep {
                *last = Some((code, reason.to_string()));
            }
        }
    }

    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, _fac: &str, _log_message: &str) {
        // Errors are reported through `error` and our results; librdkafka's
        // own log lines (one per failed connect attempt) stay out of the way.
    }
}

impl rdkafka::producer::ProducerContext for ErrorRecordingContext {
    type DeliveryOpaque = ();
    fn delivery(
        &self,
        _result: &rdkafka::message::DeliveryResult<'_>,
        _opaque: Self::DeliveryOpaque,
    ) {
    }
}

/// Sends a metadata request and waits at most `timeout` for the answer.
///
/// The error reads `failed to ping kafka brokers: <cause>` and is
/// [`KafkaErrorKind::Authentication`] when the broker refused the
/// credentials (reported as soon as it happens, without waiting for the
/// deadline), [`KafkaErrorKind::Unreachable`] when no broker answered.
pub fn ping(connection: &KafkaConnection, timeout: Duration) -> Result<BrokerMetadata, KafkaError> {
    const CONTEXT: &str = "failed to ping kafka brokers";
    // A producer handle serves librdkafka's background events (where
    // authentication failures arrive) whenever it is polled.
    let producer: BaseProducer<ErrorRecordingContext> = connection
        .client_config()
        .create_with_context(ErrorRecordingContext::default())
        .map_err(|e| KafkaError::new(KafkaErrorKind::Config, CONTEXT, e))?;
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = left.min(Duration::from_millis(500));
        match producer.client().fetch_metadata(None, attempt) {
            Ok(metadata) => {
                let brokers = metadata
                    .brokers()
                    .iter()
                    .map(|b| (b.id(), format!("{}:{}", b.host(), b.port())))
                    .collect();
                let mut topics: Vec<String> = metadata
                    .topics()
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect();
                topics.sort();
                return Ok(BrokerMetadata { brokers, topics });
            }
            Err(err) => {
                producer.poll(Duration::ZERO);
                let background = producer.context().last_error();
                let auth_failed = matches!(background, Some((RDKafkaErrorCode::Authentication, _)));
                if auth_failed || Instant::now() >= deadline {
                    return Err(classify(
                        &connection.bootstrap_servers,
                        timeout,
                        err,
                        background,
                    ));
                }
            }
        }
    }
}

fn classify(
    bootstrap: &str,
    timeout: Duration,
    err: RdKafkaError,
    background: Option<(RDKafkaErrorCode, String)>,
) -> KafkaError {
    const CONTEXT: &str = "failed to ping kafka brokers";
    match background {
        Some((RDKafkaErrorCode::Authentication, reason)) => KafkaError::new(
            KafkaErrorKind::Authentication,
            CONTEXT,
            format!("authentication failed at {bootstrap}: {reason} (check the SASL mechanism, username and password)"),
        ),
        Some((_, reason)) => KafkaError::new(
            KafkaErrorKind::Unreachable,
            CONTEXT,
            format!("no broker at {bootstrap} answered within {timeout:?}: {reason}"),
        ),
        None => KafkaError::new(
            KafkaErrorKind::Unreachable,
            CONTEXT,
            format!("no broker at {bootstrap} answered within {timeout:?}: {err}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authentication_failure_is_reported_over_a_later_transport_error() {
        let ctx = ErrorRecordingContext::default();
        ctx.error(
            RdKafkaError::Global(RDKafkaErrorCode::Authentication),
            "SASL authentication error: Authentication failed",
        );
        ctx.error(
            RdKafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down",
        );
        let err = classify(
            "h:9093",
            Duration::from_secs(1),
            RdKafkaError::MetadataFetch(RDKafkaErrorCode::OperationTimedOut),
            ctx.last_error(),
        );
        assert_eq!(err.kind, KafkaErrorKind::Authentication);
        assert!(!err.retryable());
        assert!(err
            .to_string()
            .starts_with("failed to ping kafka brokers: authentication failed"));
    }

    #[test]
    fn nothing_listening_is_unreachable_and_names_the_address() {
        // Port 9 (discard) on loopback: nothing listens there on a test box.
        let conn = KafkaConnection::plaintext("127.0.0.1:9");
        let err = ping(&conn, Duration::from_secs(2)).unwrap_err();
        assert_eq!(err.kind, KafkaErrorKind::Unreachable, "{err}");
        assert!(err.retryable());
        let text = err.to_string();
        assert!(text.starts_with("failed to ping kafka brokers: "), "{text}");
        assert!(text.contains("127.0.0.1:9"), "{text}");
    }
}
