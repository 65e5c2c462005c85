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

/// How messages are read from the brokers (`source.fetch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FetchMethod {
    /// topicberg's own reader of Kafka record batches on `PLAINTEXT`
    /// listeners (each Fetch response parsed in place; an append sync
    /// takes ~20% less CPU per message than with librdkafka); librdkafka
    /// with TLS or SASL.
    #[default]
    Auto,
    /// librdkafka on every listener.
    Librdkafka,
}

impl FetchMethod {
    /// The name the job file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Librdkafka => "librdkafka",
        }
    }

    /// Whether topicberg's own batch reader serves `protocol`.
    pub fn reads_batches(self, protocol: SecurityProtocol) -> bool {
        self == Self::Auto && protocol == SecurityProtocol::Plaintext
    }
}

impl Default for SecurityProtocol {
    /// `source.security_protocol`.
    fn default() -> Self {
        Self::Plaintext
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
    /// An OAuth 2.0 access token (a JWT) from `oauth_token_endpoint` by the
    /// client-credentials grant, fetched again before it expires.
    #[serde(rename = "OAUTHBEARER")]
    OAuthBearer,
}

impl SaslMechanism {
    /// The name the job file, librdkafka and the Kafka docs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
            Self::OAuthBearer => "OAUTHBEARER",
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
    /// SASL mechanism; required with `SASL_PLAINTEXT` and `SASL_SSL`:
    /// `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` or `OAUTHBEARER`.
    #[serde(default)]
    pub sasl_mechanism: Option<SaslMechanism>,
    /// SASL username; required with a SASL protocol (not with `OAUTHBEARER`).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub sasl_username: Option<String>,
    /// SASL password; required with a SASL protocol (not with
    /// `OAUTHBEARER`); never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    pub sasl_password: Option<Secret>,
    /// CA certificate(s) that signed the brokers' certificates, for `SSL`
    /// and `SASL_SSL`: PEM text, or a path to a PEM file (relative to the
    /// job file's folder). After loading, always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub ssl_ca_pem: Option<String>,
    /// The client certificate for mutual TLS (a listener that requires one,
    /// e.g. Amazon MSK's TLS authentication): PEM text (the certificate,
    /// then any intermediates), or a path to a PEM file (relative to the
    /// job file's folder); set together with `ssl_key_pem`. After loading,
    /// always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub ssl_certificate_pem: Option<String>,
    /// The client certificate's private key, unencrypted PEM (`BEGIN
    /// PRIVATE KEY` or `BEGIN RSA PRIVATE KEY`): the text, or a path to the
    /// file; never printed. After loading, always the PEM text.
    #[serde(default, deserialize_with = "secret_or_none")]
    pub ssl_key_pem: Option<Secret>,
    /// Whether the broker's certificate must be issued for the host name
    /// the client connects to (librdkafka's
    /// `ssl.endpoint.identification.algorithm = https`). On by default;
    /// `false` accepts a certificate for any name the CA signed, which lets
    /// anyone with such a certificate pose as the broker: only for brokers
    /// reached by an address their certificate does not name (an IP, a
    /// tunnel).
    #[serde(default = "defaults::ssl_verify_hostname")]
    pub ssl_verify_hostname: bool,
    /// `OAUTHBEARER`: the OAuth 2.0 token endpoint (`https://.../token`)
    /// that grants a token for `oauth_client_id` and `oauth_client_secret`
    /// (client-credentials grant). The token is fetched again before it
    /// expires.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub oauth_token_endpoint: Option<String>,
    /// `OAUTHBEARER`: the client id sent to `oauth_token_endpoint`.
    #[serde(default, deserialize_with = "empty_as_none")]
    pub oauth_client_id: Option<String>,
    /// `OAUTHBEARER`: the client secret sent to `oauth_token_endpoint`;
    /// never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    pub oauth_client_secret: Option<Secret>,
    /// `OAUTHBEARER`: the scope asked of `oauth_token_endpoint`
    /// (space-separated; unset: none is asked).
    #[serde(default, deserialize_with = "empty_as_none")]
    pub oauth_scope: Option<String>,
    /// How many partitions are read in parallel.
    #[serde(default = "defaults::max_threads")]
    pub max_threads: usize,
    /// How messages are read: `auto` (topicberg's own record-batch reader
    /// on `PLAINTEXT` listeners, librdkafka with TLS or SASL) or
    /// `librdkafka` (always).
    #[serde(default)]
    pub fetch: FetchMethod,
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
            security_protocol: SecurityProtocol::default(),
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password: None,
            ssl_ca_pem: None,
            ssl_certificate_pem: None,
            ssl_key_pem: None,
            ssl_verify_hostname: defaults::ssl_verify_hostname(),
            oauth_token_endpoint: None,
            oauth_client_id: None,
            oauth_client_secret: None,
            oauth_scope: None,
            max_threads: defaults::max_threads(),
            fetch: FetchMethod::default(),
            schema_registry_url: None,
            schema_registry_username: None,
            schema_registry_password: None,
            schema_registry_ca_pem: None,
        }
    }
}
