//! `[source]`: the Kafka cluster, its security settings and the topics.

use serde::Deserialize;

use super::{defaults, empty_as_none, secret_or_none};
use crate::Secret;

/// How the client talks to the brokers (Kafka's `security.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SecurityProtocol {
    /// No TLS, no authentication.
    #[serde(rename = "PLAINTEXT", alias = "plaintext")]
    Plaintext,
    /// TLS, no SASL.
    #[serde(rename = "SSL", alias = "ssl")]
    Ssl,
    /// SASL authentication without TLS.
    #[serde(rename = "SASL_PLAINTEXT", alias = "sasl_plaintext")]
    SaslPlaintext,
    /// SASL authentication over TLS.
    #[serde(rename = "SASL_SSL", alias = "sasl_ssl")]
    SaslSsl,
}

impl SecurityProtocol {
    /// The name the job file, librdkafka and the Kafka docs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether the protocol authenticates with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// Whether the protocol runs over TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }
}

impl Default for SecurityProtocol {
    fn default() -> Self {
        defaults::security_protocol()
    }
}

/// The SASL mechanism (Kafka's `sasl.mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SaslMechanism {
    /// Username and password sent as is (use with TLS outside a test bed).
    #[serde(rename = "PLAIN")]
    Plain,
    /// Salted challenge-response with SHA-256.
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    /// Salted challenge-response with SHA-512.
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    /// The name the job file, librdkafka and the Kafka docs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// `[source]`: where the Kafka cluster is, how to log in, which topics.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// Comma-separated `host:port` list of brokers to bootstrap from.
    pub bootstrap_servers: String,
    /// The consumer group whose committed offsets track progress; one group
    /// per job. Unset: `topicberg_<name>` (filled in when the file is read).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub consumer_group: Option<String>,
    /// Regex selecting the topics to sync, matched anywhere in the name
    /// (anchor it yourself: `^(customers|orders)$`). Unset: exactly the
    /// topics of the `[[streams]]` entries.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub topic_pattern: Option<String>,
    /// Transport and authentication layer.
    #[serde(default)]
    pub security_protocol: SecurityProtocol,
    /// SASL mechanism; required with `SASL_PLAINTEXT` and `SASL_SSL`.
    #[serde(default)]
    pub sasl_mechanism: Option<SaslMechanism>,
    /// SASL username; required with a SASL protocol.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub sasl_username: Option<String>,
    /// SASL password; required with a SASL protocol; never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    pub sasl_password: Option<Secret>,
    /// CA certificate(s) that signed the brokers' certificates, for `SSL`
    /// and `SASL_SSL`: PEM text, or a path to a PEM file (relative to the
    /// job file's folder). After loading, always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub ssl_ca_pem: Option<String>,
    /// How many partitions are read in parallel.
    #[serde(default = "defaults::max_threads")]
    pub max_threads: usize,
    /// A Confluent-compatible schema registry (Confluent, Karapace,
    /// Apicurio's ccompat API), `http://` or `https://`, without
    /// credentials in it. Needed by Avro and Protobuf streams; unset: every
    /// stream reads plain JSON.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub schema_registry_url: Option<String>,
    /// The registry's basic-auth user (Confluent Cloud: the API key); set
    /// together with `schema_registry_password`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub schema_registry_username: Option<String>,
    /// The registry's basic-auth password (Confluent Cloud: the API
    /// secret); never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    pub schema_registry_password: Option<Secret>,
    /// CA certificate(s) that signed the registry's certificate, for an
    /// `https://` registry the system trust store does not vouch for: PEM
    /// text, or a path to a PEM file (relative to the job file's folder).
    /// After loading, always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub schema_registry_ca_pem: Option<String>,
}

impl SourceConfig {
    /// The broker addresses, trimmed, empty entries dropped.
    pub fn brokers(&self) -> Vec<&str> {
        self.bootstrap_servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }
}

impl Default for SourceConfig {
    fn default() -> Self {
        Self {
            bootstrap_servers: String::new(),
            consumer_group: None,
            topic_pattern: None,
            security_protocol: defaults::security_protocol(),
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password: None,
            ssl_ca_pem: None,
            max_threads: defaults::max_threads(),
            schema_registry_url: None,
            schema_registry_username: None,
            schema_registry_password: None,
            schema_registry_ca_pem: None,
        }
    }
}
