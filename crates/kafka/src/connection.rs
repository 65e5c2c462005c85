//! Broker addresses, security protocol and credentials, and the single place
//! where they become librdkafka settings. The protocol and mechanism types
//! are the job file's (`topicberg_core::config`): one type per concept.

use rdkafka::ClientConfig;
use topicberg_core::config::SourceConfig;
pub use topicberg_core::config::{SaslMechanism, SecurityProtocol};
use topicberg_core::Secret;

/// Everything needed to open a connection to a Kafka cluster.
#[derive(Debug, Clone, Default)]
pub struct KafkaConnection {
    /// Comma-separated `host:port` list.
    pub bootstrap_servers: String,
    /// Transport and authentication layer.
    pub security_protocol: SecurityProtocol,
    /// SASL credentials; required when the protocol uses SASL.
    pub sasl: Option<SaslCredentials>,
    /// PEM text of the CA that signed the brokers' certificates, when the
    /// system trust store does not hold it.
    pub ssl_ca_pem: Option<String>,
}

/// A SASL mechanism with its username and password.
#[derive(Debug, Clone)]
pub struct SaslCredentials {
    /// The mechanism to authenticate with.
    pub mechanism: SaslMechanism,
    /// The SASL username.
    pub username: String,
    /// The SASL password; never printed.
    pub password: Secret,
}

impl KafkaConnection {
    /// A PLAINTEXT connection to `bootstrap_servers`.
    pub fn plaintext(bootstrap_servers: impl Into<String>) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            ..Self::default()
        }
    }

    /// A SASL_PLAINTEXT connection with the given mechanism and credentials.
    pub fn sasl_plaintext(
        bootstrap_servers: impl Into<String>,
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> Self {
        Self {
            bootstrap_servers: bootstrap_servers.into(),
            security_protocol: SecurityProtocol::SaslPlaintext,
            sasl: Some(SaslCredentials {
                mechanism,
                username: username.into(),
                password: password.into(),
            }),
            ssl_ca_pem: None,
        }
    }

    /// The librdkafka settings for this connection; callers add their own
    /// role-specific settings (group id, fetch sizes) on top.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("security.protocol", self.security_protocol.as_str())
            // librdkafka logs every failed connection attempt at error level;
            // our errors carry the cause instead.
            .set("log_level", "3");
        if self.security_protocol.uses_sasl() {
            if let Some(sasl) = &self.sasl {
                config
                    .set("sasl.mechanism", sasl.mechanism.as_str())
                    .set("sasl.username", &sasl.username)
                    .set("sasl.password", sasl.password.expose());
            }
        }
        if self.security_protocol.uses_tls() {
            if let Some(pem) = &self.ssl_ca_pem {
                config.set("ssl.ca.pem", pem);
            }
        }
        config
    }
}

impl KafkaConnection {
    /// The connection a job file's `[source]` describes (already validated:
    /// a SASL protocol comes with mechanism, username and password).
    pub fn from_source(source: &SourceConfig) -> Self {
        let security_protocol = source.security_protocol;
        let sasl = match (
            source.sasl_mechanism,
            &source.sasl_username,
            &source.sasl_password,
        ) {
            (Some(mechanism), Some(username), Some(password)) if security_protocol.uses_sasl() => {
                Some(SaslCredentials {
                    mechanism,
                    username: username.clone(),
                    password: password.clone(),
                })
            }
            _ => None,
        };
        Self {
            bootstrap_servers: source.brokers().join(","),
            security_protocol,
            sasl,
            ssl_ca_pem: source.ssl_ca_pem.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_settings_reach_librdkafka_only_for_sasl_protocols() {
        let scram = KafkaConnection::sasl_plaintext("h:9093", SaslMechanism::ScramSha512, "u", "p");
        let c = scram.client_config();
        assert_eq!(c.get("security.protocol"), Some("SASL_PLAINTEXT"));
        assert_eq!(c.get("sasl.mechanism"), Some("SCRAM-SHA-512"));
        assert_eq!(c.get("sasl.username"), Some("u"));
        assert_eq!(c.get("sasl.password"), Some("p"));

        let plain = KafkaConnection::plaintext("h:9092").client_config();
        assert_eq!(plain.get("security.protocol"), Some("PLAINTEXT"));
        assert_eq!(plain.get("sasl.mechanism"), None);
    }

    #[test]
    fn connection_debug_does_not_show_the_password() {
        let scram =
            KafkaConnection::sasl_plaintext("h:9093", SaslMechanism::Plain, "u", "topsecret");
        assert!(!format!("{scram:?}").contains("topsecret"));
    }

    #[test]
    fn from_source_maps_a_job_files_source() {
        let text = r#"
name = "job"
[source]
bootstrap_servers = "h1:9093, h2:9093"
topic_pattern = "^orders$"
security_protocol = "SASL_SSL"
sasl_mechanism = "SCRAM-SHA-256"
sasl_username = "u"
sasl_password = "${PW}"
ssl_ca_pem = "-----BEGIN CERTIFICATE-----"
"#;
        let job = topicberg_core::JobConfig::from_toml_str(text, |v| {
            (v == "PW").then(|| "pw-from-env".to_string())
        })
        .unwrap();
        let c = KafkaConnection::from_source(&job.source).client_config();
        assert_eq!(c.get("bootstrap.servers"), Some("h1:9093,h2:9093"));
        assert_eq!(c.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(c.get("sasl.mechanism"), Some("SCRAM-SHA-256"));
        assert_eq!(c.get("sasl.username"), Some("u"));
        assert_eq!(c.get("sasl.password"), Some("pw-from-env"));
        assert_eq!(c.get("ssl.ca.pem"), Some("-----BEGIN CERTIFICATE-----"));

        let plain = SourceConfig {
            bootstrap_servers: "h:9092".into(),
            ..SourceConfig::default()
        };
        let c = KafkaConnection::from_source(&plain).client_config();
        assert_eq!(c.get("security.protocol"), Some("PLAINTEXT"));
        assert_eq!(c.get("sasl.mechanism"), None);
    }
}
