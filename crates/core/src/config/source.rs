//! `[source]`: the Kafka cluster, its security settings and the topics.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{defaults, empty_as_none, secret_or_none, Interval};
use crate::Secret;

/// How the client talks to the brokers (Kafka's `security.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[schemars(transform = super::schema::lower_case_aliases)]
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

/// What a sync does when a topic the job names (in `topic_pattern`
/// spelled out, or as a `[[streams]]` topic) is not in the cluster
/// (`source.missing_topics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MissingTopics {
    /// The sync fails, naming the topic and the cluster's closest names
    /// (a typo would otherwise sync nothing, green, forever).
    #[default]
    Fail,
    /// The sync reads the other topics and warns, on every run, until the
    /// topic exists.
    Wait,
}

/// How messages are read from the brokers (`source.fetch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FetchMethod {
    /// topicberg's own reader of Kafka record batches on `PLAINTEXT`
    /// listeners (each Fetch response parsed in place; an append sync
    /// takes about 20% less CPU per message than with librdkafka);
    /// librdkafka with TLS or SASL.
    #[default]
    Auto,
    /// librdkafka on every listener (and for message formats older than
    /// v2, which the batch reader refuses by name).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
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

/// `[source]`: the Kafka cluster, how to log in to it and its schema
/// registry. The topics a job reads are those `topic_pattern` selects, or
/// exactly those of its `[[streams]]` entries.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = super::schema::field_order::<Self>)]
pub struct SourceConfig {
    /// The brokers to bootstrap from: a comma-separated `host:port` list.
    #[schemars(extend(
        "x-label" = "Brokers",
        "x-group" = "Kafka",
        "x-help" = "host:port of one or more brokers, comma separated"
    ))]
    pub bootstrap_servers: String,
    /// The consumer group whose committed offsets track the job's
    /// progress (and show it in Kafka's tools); one group per job.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Consumer group",
        "x-group" = "Kafka",
        "x-default" = "`topicberg_<name>`",
        "x-help" = "the group whose committed offsets show progress in Kafka's tools; empty: topicberg_<job name>"
    ))]
    pub consumer_group: Option<String>,
    /// A regular expression selecting the topics to sync, matched anywhere
    /// in the name: anchor it yourself (`^(customers|orders)$`). Unset:
    /// exactly the topics of the `[[streams]]` entries.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Topic pattern",
        "x-group" = "Kafka",
        "x-type" = "regex",
        "x-default" = "the `[[streams]]` topics",
        "x-help" = "a regular expression; the topics it matches are offered on a job's streams page (e.g. ^(customers|orders)$)"
    ))]
    pub topic_pattern: Option<String>,
    /// A topic the job names (spelled out in `topic_pattern`, or a
    /// `[[streams]]` topic) that the cluster does not have: `fail` (the
    /// sync fails naming it and the closest topic names) or `wait` (the
    /// other topics are synced, with a warning on every run until it
    /// exists).
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Missing topics",
        "x-group" = "Kafka",
        "x-help" = "fail: a named topic the cluster lacks fails the run (a typo shows at once); wait: sync the others and warn until it exists"
    ))]
    pub missing_topics: MissingTopics,
    /// Transport and authentication layer: `SSL` and `SASL_SSL` encrypt,
    /// the `SASL_*` ones log in.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Security protocol",
        "x-group" = "Security",
        "x-help" = "SSL and SASL_SSL encrypt; the SASL ones log in"
    ))]
    pub security_protocol: SecurityProtocol,
    /// The SASL mechanism: required with a `SASL_*` protocol, refused with
    /// the others.
    #[serde(default)]
    #[schemars(extend(
        "x-when" = {"security_protocol": ["SASL_PLAINTEXT", "SASL_SSL"]},
        "x-label" = "SASL mechanism",
        "x-group" = "Security",
        "x-help" = "needed with SASL_PLAINTEXT and SASL_SSL; OAUTHBEARER logs in with a token from the token endpoint below"
    ))]
    pub sasl_mechanism: Option<SaslMechanism>,
    /// The SASL user (Confluent Cloud: the API key); required with a
    /// `SASL_*` protocol, refused with `OAUTHBEARER`.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"security_protocol": ["SASL_PLAINTEXT", "SASL_SSL"]},
        "x-label" = "SASL user",
        "x-group" = "Security",
        "x-help" = "PLAIN and SCRAM (Confluent Cloud: the API key)"
    ))]
    pub sasl_username: Option<String>,
    /// The SASL password (Confluent Cloud: the API secret); required with a
    /// `SASL_*` protocol, refused with `OAUTHBEARER`. Write
    /// `"${KAFKA_PASSWORD}"`; never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    #[schemars(extend(
        "x-when" = {"security_protocol": ["SASL_PLAINTEXT", "SASL_SSL"]},
        "x-label" = "SASL password",
        "x-group" = "Security",
        "x-help" = "PLAIN and SCRAM (Confluent Cloud: the API secret)"
    ))]
    pub sasl_password: Option<Secret>,
    /// For `SSL` and `SASL_SSL` with brokers signed by a private CA: the CA
    /// certificate(s) as PEM text, or the path of a PEM file (relative to
    /// the job file's folder).
    // After loading, always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"security_protocol": ["SSL", "SASL_SSL"]},
        "x-label" = "CA certificate",
        "x-group" = "Security",
        "x-widget" = "pem",
        "x-default" = "the system trust store",
        "x-help" = "brokers signed by a private CA (SSL, SASL_SSL): its PEM text, or a file path relative to the data folder"
    ))]
    pub ssl_ca_pem: Option<String>,
    /// Mutual TLS (a listener that requires a client certificate, such as
    /// Amazon MSK's TLS authentication): the client certificate, then any
    /// intermediates, as PEM text or the path of a PEM file. Set together
    /// with `ssl_key_pem`; only with `SSL` and `SASL_SSL`.
    // After loading, always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"security_protocol": ["SSL", "SASL_SSL"]},
        "x-label" = "Client certificate",
        "x-group" = "Security",
        "x-widget" = "pem",
        "x-help" = "mutual TLS (e.g. Amazon MSK's TLS authentication): the certificate's PEM text, or a file path; with the client key"
    ))]
    pub ssl_certificate_pem: Option<String>,
    /// Mutual TLS: the client certificate's private key, unencrypted PEM
    /// (`BEGIN PRIVATE KEY` or `BEGIN RSA PRIVATE KEY`), as text
    /// (`"${KAFKA_CLIENT_KEY}"`) or the path of its file. Never printed.
    // After loading, always the PEM text.
    #[serde(default, deserialize_with = "secret_or_none")]
    #[schemars(extend(
        "x-when" = {"security_protocol": ["SSL", "SASL_SSL"]},
        "x-label" = "Client certificate key",
        "x-group" = "Security",
        "x-widget" = "pem",
        "x-help" = "the client certificate's private key, unencrypted PEM text or a file path"
    ))]
    pub ssl_key_pem: Option<Secret>,
    /// Whether the broker's certificate must be issued for the host name
    /// connected to (librdkafka's `ssl.endpoint.identification.algorithm =
    /// https`). `false` accepts a certificate the CA signed for any name,
    /// which lets anyone holding one pose as the broker: only for brokers
    /// reached by an address their certificate does not list (an IP, a
    /// tunnel).
    #[serde(default = "defaults::ssl_verify_hostname")]
    #[schemars(extend(
        "x-when" = {"security_protocol": ["SSL", "SASL_SSL"]},
        "x-label" = "Check the brokers' host names",
        "x-group" = "Security",
        "x-help" = "no: accept a broker certificate issued for any host name (only for brokers reached by an address their certificate does not list)"
    ))]
    pub ssl_verify_hostname: bool,
    /// `OAUTHBEARER`: the identity provider's token URL
    /// (`https://.../token`). Tokens come from the client-credentials grant
    /// for `oauth_client_id` and `oauth_client_secret`, and are fetched
    /// again before they expire.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"sasl_mechanism": ["OAUTHBEARER"]},
        "x-label" = "OAuth token endpoint",
        "x-group" = "Security",
        "x-type" = "URL",
        "x-help" = "OAUTHBEARER: the identity provider's token URL (client credentials grant)"
    ))]
    pub oauth_token_endpoint: Option<String>,
    /// `OAUTHBEARER`: the client id sent to `oauth_token_endpoint`.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"sasl_mechanism": ["OAUTHBEARER"]},
        "x-label" = "OAuth client id",
        "x-group" = "Security",
        "x-help" = "OAUTHBEARER"
    ))]
    pub oauth_client_id: Option<String>,
    /// `OAUTHBEARER`: the client secret sent to `oauth_token_endpoint`;
    /// write `"${KAFKA_OAUTH_SECRET}"`. Never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    #[schemars(extend(
        "x-when" = {"sasl_mechanism": ["OAUTHBEARER"]},
        "x-label" = "OAuth client secret",
        "x-group" = "Security",
        "x-help" = "OAUTHBEARER"
    ))]
    pub oauth_client_secret: Option<Secret>,
    /// `OAUTHBEARER`: the scope asked of `oauth_token_endpoint`
    /// (space-separated). Unset: none is asked.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-when" = {"sasl_mechanism": ["OAUTHBEARER"]},
        "x-label" = "OAuth scope",
        "x-group" = "Security",
        "x-help" = "OAUTHBEARER: the scope to ask for; empty: none"
    ))]
    pub oauth_scope: Option<String>,
    /// How long a bootstrap server may take to accept a connection before
    /// it counts as unreachable: a command whose brokers all fail so fails
    /// within it, naming each address tried and why. A whole number and a
    /// unit (`10s`).
    #[serde(default = "defaults::connect_timeout")]
    #[schemars(extend(
        "x-label" = "Connect timeout",
        "x-group" = "Kafka",
        "x-help" = "a bootstrap server that does not accept a connection this long is unreachable, e.g. 10s"
    ))]
    pub connect_timeout: Interval,
    /// Partitions read in parallel: one Kafka consumer and decoder each. In
    /// upsert mode also the data file writers of a large sync's winning
    /// rows. More than the CPU cores only costs CPU and memory.
    #[serde(default = "defaults::max_threads")]
    #[schemars(range(min = 1), transform = super::schema::no_fixed_default)]
    #[schemars(extend(
        "x-label" = "Max threads",
        "x-group" = "Kafka",
        "x-default" = "the CPU cores, 1 to 8",
        "x-help" = "partitions read in parallel; empty: the default"
    ))]
    pub max_threads: usize,
    /// How messages are read.
    #[serde(default)]
    #[schemars(extend(
        "x-label" = "Fetch",
        "x-group" = "Kafka",
        "x-help" = "auto: topicberg's own record-batch reader on PLAINTEXT brokers, librdkafka with TLS or SASL; librdkafka: always librdkafka"
    ))]
    pub fetch: FetchMethod,
    /// A Confluent-compatible schema registry (Confluent Platform or Cloud,
    /// Karapace, Apicurio's ccompat API), `http://` or `https://`, for Avro
    /// and Protobuf topics. No credentials in it: use the two fields below.
    /// Unset: every stream reads plain JSON.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Schema registry URL",
        "x-group" = "Schema registry",
        "x-type" = "URL",
        "x-help" = "a Confluent-compatible registry (http:// or https://), for Avro and Protobuf topics; empty: every topic is JSON"
    ))]
    pub schema_registry_url: Option<String>,
    /// The registry's basic-auth user (Confluent Cloud: the Schema Registry
    /// API key); set together with `schema_registry_password`.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Registry user",
        "x-group" = "Schema registry",
        "x-help" = "basic auth (Confluent Cloud: the API key)"
    ))]
    pub schema_registry_username: Option<String>,
    /// The registry's basic-auth password (Confluent Cloud: the API
    /// secret); write `"${REGISTRY_PASSWORD}"`. Never printed.
    #[serde(default, deserialize_with = "secret_or_none")]
    #[schemars(extend(
        "x-label" = "Registry password",
        "x-group" = "Schema registry",
        "x-help" = "Confluent Cloud: the API secret"
    ))]
    pub schema_registry_password: Option<Secret>,
    /// For an `https://` registry signed by a private CA: the CA
    /// certificate(s) as PEM text, or the path of a PEM file (relative to
    /// the job file's folder). Refused with an `http://` URL.
    // After loading, always the PEM text.
    #[serde(default, deserialize_with = "empty_as_none")]
    #[schemars(extend(
        "x-label" = "Registry CA certificate",
        "x-group" = "Schema registry",
        "x-widget" = "pem",
        "x-default" = "the system trust store",
        "x-help" = "an https registry behind a private CA: its PEM text, or a file path"
    ))]
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
            missing_topics: MissingTopics::default(),
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
            connect_timeout: defaults::connect_timeout(),
            max_threads: defaults::max_threads(),
            fetch: FetchMethod::default(),
            schema_registry_url: None,
            schema_registry_username: None,
            schema_registry_password: None,
            schema_registry_ca_pem: None,
        }
    }
}
