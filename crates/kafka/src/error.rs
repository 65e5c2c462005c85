use std::fmt;

/// What kind of failure a [`KafkaError`] is; decides whether a retry can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaErrorKind {
    /// No broker answered within the deadline (wrong address, broker down,
    /// listener not advertised to us).
    Unreachable,
    /// The broker answered but refused our credentials (SASL), or the
    /// OAUTHBEARER token endpoint refused the client.
    Authentication,
    /// The TLS handshake failed: the broker's certificate was not trusted
    /// (unknown CA, expired, issued for another host), the broker refused
    /// our client certificate, or the listener does not speak TLS.
    Tls,
    /// Logged in, but the ACLs deny the principal a topic or the group.
    Authorization,
    /// Our settings are invalid (rejected by the client before any I/O).
    Config,
    /// The consumer group has members (another consumer subscribed with the
    /// job's group id), so the broker refuses offsets committed from
    /// outside the group. topicberg never joins its group; a later commit,
    /// after the member left, succeeds.
    GroupInUse,
    /// Any other error reported by the broker or client.
    Broker,
    /// A follower's local spill (its read-ahead during a catalog or object
    /// store outage, on this machine's disk) could not be written or read;
    /// the next round reads Kafka instead.
    Spill,
}

/// An error from the Kafka side, with the context a user needs to fix it.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {detail}")]
pub struct KafkaError {
    /// What kind of failure this is.
    pub kind: KafkaErrorKind,
    /// What we were doing, e.g. `failed to ping kafka brokers`.
    pub context: String,
    /// The cause, as precise as the client could tell.
    pub detail: String,
}

impl KafkaError {
    pub(crate) fn new(
        kind: KafkaErrorKind,
        context: impl Into<String>,
        detail: impl fmt::Display,
    ) -> Self {
        Self {
            kind,
            context: context.into(),
            detail: detail.to_string(),
        }
    }

    /// Whether running the same operation again can succeed without a
    /// change of configuration (a broker that was down may come back; wrong
    /// credentials will not fix themselves).
    pub fn retryable(&self) -> bool {
        matches!(
            self.kind,
            KafkaErrorKind::Unreachable
                | KafkaErrorKind::Broker
                | KafkaErrorKind::GroupInUse
                | KafkaErrorKind::Spill
        )
    }
}
