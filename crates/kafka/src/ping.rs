//! A real round trip to the cluster: a metadata request with a deadline.

use std::time::{Duration, Instant};

use rdkafka::error::KafkaError as RdKafkaError;
use rdkafka::metadata::Metadata;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::types::RDKafkaErrorCode;

use crate::failure::{ErrorRecordingContext, Failure};
use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// What the cluster said about itself.
#[derive(Debug, Clone)]
pub struct BrokerMetadata {
    /// `(id, host:port)` of each broker, as the cluster advertises them.
    pub brokers: Vec<(i32, String)>,
    /// Names of the topics the credentials may describe, sorted.
    pub topics: Vec<String>,
}

/// Sends a metadata request and waits at most `timeout` for the answer.
///
/// The error reads `failed to ping kafka brokers: <cause>` and is
/// [`KafkaErrorKind::Authentication`] when the broker refused the
/// credentials (reported as soon as it happens, without waiting for the
/// deadline), [`KafkaErrorKind::Unreachable`] when no broker answered.
pub fn ping(connection: &KafkaConnection, timeout: Duration) -> Result<BrokerMetadata, KafkaError> {
    let metadata = fetch_metadata(connection, timeout, "failed to ping kafka brokers")?;
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
    Ok(BrokerMetadata { brokers, topics })
}

/// The cluster's metadata (every topic), asked in short attempts until
/// `timeout`; the first thing every command asks of the cluster. A refused
/// login is reported as soon as librdkafka reports it in the background
/// ([`KafkaErrorKind::Authentication`], naming the user, mechanism and
/// bootstrap servers), not after the deadline as a transport failure.
/// `context` starts the error message.
pub(crate) fn fetch_metadata(
    connection: &KafkaConnection,
    timeout: Duration,
    context: &str,
) -> Result<Metadata, KafkaError> {
    fetch_metadata_of(connection, None, timeout, context)
}

/// [`fetch_metadata`] of one topic (`Some`), or of every topic (`None`).
pub(crate) fn fetch_metadata_of(
    connection: &KafkaConnection,
    topic: Option<&str>,
    timeout: Duration,
    context: &str,
) -> Result<Metadata, KafkaError> {
    // A producer handle serves librdkafka's background events (where
    // authentication failures arrive) whenever it is polled.
    let producer: BaseProducer<ErrorRecordingContext> = connection
        .client_config()
        // Asking for one topic must never create it.
        .set("allow.auto.create.topics", "false")
        .create_with_context(ErrorRecordingContext::default())
        .map_err(|e| KafkaError::new(KafkaErrorKind::Config, context, e))?;
    let deadline = Instant::now() + timeout;
    let mut reached = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = left.min(Duration::from_millis(500));
        match producer.client().fetch_metadata(topic, attempt) {
            Ok(metadata) => {
                crate::connection::close_in_background(producer);
                return Ok(metadata);
            }
            Err(err) => {
                // No answer yet: whether any bootstrap server takes a
                // connection at all, asked once (a healthy cluster answers
                // the first attempt and is never probed).
                if !reached {
                    if let Err(e) = crate::reach::reach_bootstrap(connection, context) {
                        crate::connection::close_in_background(producer);
                        return Err(e);
                    }
                    reached = true;
                }
                producer.poll(Duration::ZERO);
                let decisive = producer.context().failure().is_some();
                if decisive || Instant::now() >= deadline {
                    let background = producer.context().last_error();
                    return Err(classify(connection, context, timeout, err, background));
                }
            }
        }
    }
}

pub(crate) fn classify(
    connection: &KafkaConnection,
    context: &str,
    timeout: Duration,
    err: RdKafkaError,
    background: Option<(RDKafkaErrorCode, String)>,
) -> KafkaError {
    let bootstrap = &connection.bootstrap_servers;
    let Some((code, reason)) = background else {
        return KafkaError::new(
            KafkaErrorKind::Unreachable,
            context,
            format!("no broker at {bootstrap} answered within {timeout:?}: {err}"),
        );
    };
    match Failure::of(code, &reason) {
        Some(Failure::Authentication) => KafkaError::new(
            KafkaErrorKind::Authentication,
            context,
            authentication_failed(connection, &reason),
        ),
        Some(failure) => KafkaError::new(
            KafkaErrorKind::Tls,
            context,
            crate::tls_errors::tls_failed(connection, failure, &reason),
        ),
        None => KafkaError::new(
            KafkaErrorKind::Unreachable,
            context,
            format!("no broker at {bootstrap} answered within {timeout:?}: {reason}"),
        ),
    }
}

/// `authentication failed for user "u" with mechanism PLAIN on bootstrap
/// h:9093 (<librdkafka's reason>); check sasl_username and sasl_password`.
fn authentication_failed(connection: &KafkaConnection, reason: &str) -> String {
    let bootstrap = &connection.bootstrap_servers;
    let protocol = connection.security_protocol.as_str();
    if let Some(oauth) = &connection.oauth {
        return format!(
            "authentication failed with mechanism OAUTHBEARER for client \"{}\" on bootstrap \
             {bootstrap} ({protocol}): {reason}; check oauth_client_id, oauth_client_secret and \
             oauth_scope (the token endpoint {} must grant them a token), and that the brokers \
             accept its tokens (issuer, audience)",
            oauth.client_id, oauth.token_endpoint
        );
    }
    match &connection.sasl {
        Some(sasl) => format!(
            "authentication failed for user \"{}\" with mechanism {} on bootstrap {bootstrap} \
             ({protocol}): {reason}; check sasl_username and sasl_password (and that the \
             brokers enable sasl_mechanism {})",
            sasl.username,
            sasl.mechanism.as_str(),
            sasl.mechanism.as_str()
        ),
        None => format!(
            "authentication failed on bootstrap {bootstrap} ({protocol}): {reason}; check \
             security_protocol and the SASL or TLS settings"
        ),
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::client::ClientContext;

    use super::*;
    use crate::SaslMechanism;

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
        let conn =
            KafkaConnection::sasl_plaintext("h:9093", SaslMechanism::ScramSha512, "alice", "pw");
        let err = classify(
            &conn,
            "failed to ping kafka brokers",
            Duration::from_secs(1),
            RdKafkaError::MetadataFetch(RDKafkaErrorCode::OperationTimedOut),
            ctx.last_error(),
        );
        assert_eq!(err.kind, KafkaErrorKind::Authentication);
        assert!(!err.retryable());
        let text = err.to_string();
        assert!(
            text.starts_with(
                "failed to ping kafka brokers: authentication failed for user \"alice\" \
                 with mechanism SCRAM-SHA-512 on bootstrap h:9093 (SASL_PLAINTEXT): \
                 SASL authentication error"
            ),
            "{text}"
        );
        assert!(
            text.contains("check sasl_username and sasl_password"),
            "{text}"
        );
        assert!(!text.contains("pw\""), "{text}");
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
