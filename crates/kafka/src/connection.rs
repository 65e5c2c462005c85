//! Broker addresses, security protocol and credentials, and the single place
//! where they become librdkafka settings. The protocol and mechanism types
//! are the job file's (`topicberg_core::config`): one type per concept.

use rdkafka::ClientConfig;
use topicberg_core::config::SourceConfig;
pub use topicberg_core::config::{SaslMechanism, SecurityProtocol};
use topicberg_core::Secret;

/// Everything needed to open a connection to a Kafka cluster.
#[derive(Debug, Clone)]
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
    /// The client certificate and its key, for mutual TLS.
    pub client_certificate: Option<ClientCertificate>,
    /// Whether the broker's certificate must name the host connected to.
    pub ssl_verify_hostname: bool,
    /// OAUTHBEARER's token endpoint and client, when the mechanism is
    /// [`SaslMechanism::OAuthBearer`].
    pub oauth: Option<OAuthClient>,
    /// How long a bootstrap server may take to accept a connection
    /// (`source.connect_timeout`).
    pub connect_timeout: std::time::Duration,
}

impl Default for KafkaConnection {
    fn default() -> Self {
        Self {
            bootstrap_servers: String::new(),
            security_protocol: SecurityProtocol::Plaintext,
            sasl: None,
            ssl_ca_pem: None,
            client_certificate: None,
            ssl_verify_hostname: true,
            oauth: None,
            connect_timeout: SourceConfig::default().connect_timeout.get(),
        }
    }
}

/// A client certificate (PEM) and its private key (PEM, never printed).
#[derive(Debug, Clone)]
pub struct ClientCertificate {
    /// The certificate, then any intermediates.
    pub certificate_pem: String,
    /// The private key; never printed.
    pub key_pem: Secret,
}

/// An OAuth 2.0 client-credentials client whose tokens log in with
/// OAUTHBEARER (librdkafka fetches them, and again before they expire).
#[derive(Debug, Clone)]
pub struct OAuthClient {
    /// The token endpoint URL.
    pub token_endpoint: String,
    /// The client id.
    pub client_id: String,
    /// The client secret; never printed.
    pub client_secret: Secret,
    /// The scope asked for, if any.
    pub scope: Option<String>,
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
            ..Self::default()
        }
    }

    /// The librdkafka settings for this connection; callers add their own
    /// role-specific settings (group id, fetch sizes) on top.
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("security.protocol", self.security_protocol.as_str())
            // A connection (TCP, TLS, SASL) not set up within the source's
            // connect_timeout is given up (librdkafka takes 1 s at least).
            .set(
                "socket.connection.setup.timeout.ms",
                self.connect_timeout.as_millis().max(1000).to_string(),
            )
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
            if let Some(oauth) = &self.oauth {
                // librdkafka's own OIDC client (built with curl): it asks
                // the endpoint for a token at start and again at 80 % of
                // the token's lifetime, in its background thread.
                config
                    .set("sasl.mechanism", "OAUTHBEARER")
                    .set("sasl.oauthbearer.method", "oidc")
                    .set("sasl.oauthbearer.token.endpoint.url", &oauth.token_endpoint)
                    .set("sasl.oauthbearer.client.id", &oauth.client_id)
                    .set(
                        "sasl.oauthbearer.client.secret",
                        oauth.client_secret.expose(),
                    );
                if let Some(scope) = &oauth.scope {
                    config.set("sasl.oauthbearer.scope", scope);
                }
            }
        }
        if self.security_protocol.uses_tls() {
            if let Some(pem) = &self.ssl_ca_pem {
                config.set("ssl.ca.pem", pem);
            }
            if let Some(client) = &self.client_certificate {
                config
                    .set("ssl.certificate.pem", &client.certificate_pem)
                    .set("ssl.key.pem", client.key_pem.expose());
            }
            let check = if self.ssl_verify_hostname {
                "https"
            } else {
                "none"
            };
            config.set("ssl.endpoint.identification.algorithm", check);
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
            (Some(mechanism), Some(username), Some(password))
                if security_protocol.uses_sasl() && mechanism != SaslMechanism::OAuthBearer =>
            {
                Some(SaslCredentials {
                    mechanism,
                    username: username.clone(),
                    password: password.clone(),
                })
            }
            _ => None,
        };
        let oauth = match (
            source.sasl_mechanism,
            &source.oauth_token_endpoint,
            &source.oauth_client_id,
            &source.oauth_client_secret,
        ) {
            (Some(SaslMechanism::OAuthBearer), Some(endpoint), Some(id), Some(secret))
                if security_protocol.uses_sasl() =>
            {
                Some(OAuthClient {
                    token_endpoint: endpoint.clone(),
                    client_id: id.clone(),
                    client_secret: secret.clone(),
                    scope: source.oauth_scope.clone(),
                })
            }
            _ => None,
        };
        let client_certificate = match (&source.ssl_certificate_pem, &source.ssl_key_pem) {
            (Some(certificate), Some(key)) => Some(ClientCertificate {
                certificate_pem: certificate.clone(),
                key_pem: key.clone(),
            }),
            _ => None,
        };
        Self {
            bootstrap_servers: source.brokers().join(","),
            security_protocol,
            sasl,
            ssl_ca_pem: source.ssl_ca_pem.clone(),
            client_certificate,
            ssl_verify_hostname: source.ssl_verify_hostname,
            oauth,
            connect_timeout: source.connect_timeout.get(),
        }
    }
}

/// Drops a librdkafka client on a thread of its own: its teardown waits for
/// its broker threads to end, and nothing after it needs it gone (a sync's
/// setup and its last offset commit do not wait for it). The binary asks
/// [`clients_closing`] before it exits.
pub(crate) fn close_in_background<T: Send + 'static>(client: T) {
    CLOSING.started();
    let spawned = std::thread::Builder::new()
        .name("kafka-close".into())
        .spawn(move || {
            drop(client);
            CLOSING.finished();
        });
    // Without a thread the closure (and the client) was dropped here.
    if spawned.is_err() {
        CLOSING.finished();
    }
}

/// Whether a client handed to a background close is still closing. A
/// process must not run its exit handlers while one is: libc's `exit` runs
/// OpenSSL's cleanup, which frees what a TLS connection being torn down on
/// that thread still uses (a SASL_SSL sync once died with SIGSEGV after its
/// last line). The binary then ends without exit handlers (`libc::_exit`),
/// after flushing its own output; waiting would cost the teardown's time
/// (about 100 ms for a group client) for nothing: the client's work is done.
pub fn clients_closing() -> bool {
    *CLOSING.open.lock().unwrap_or_else(|e| e.into_inner()) > 0
}

static CLOSING: Closing = Closing {
    open: std::sync::Mutex::new(0),
    changed: std::sync::Condvar::new(),
};

/// How many clients are being closed on their own threads.
struct Closing {
    open: std::sync::Mutex<usize>,
    changed: std::sync::Condvar,
}

impl Closing {
    fn started(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    fn finished(&self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        *open = open.saturating_sub(1);
        self.changed.notify_all();
    }

    /// Waits up to `within` for no client to be closing; whether none is.
    #[cfg(test)]
    fn wait(&self, within: std::time::Duration) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (open, _) = self
            .changed
            .wait_timeout_while(open, within, |open| *open > 0)
            .unwrap_or_else(|e| e.into_inner());
        *open == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stands for a client whose teardown takes until it is told to end.
    struct SlowClose(std::sync::mpsc::Receiver<()>);

    impl Drop for SlowClose {
        fn drop(&mut self) {
            let _ = self.0.recv();
        }
    }

    #[test]
    fn a_client_closing_in_the_background_is_known_until_it_is_gone() {
        let (release, closing) = std::sync::mpsc::channel();
        close_in_background(SlowClose(closing));
        assert!(clients_closing(), "a client still closing must be known");
        release.send(()).unwrap();
        assert!(CLOSING.wait(std::time::Duration::from_secs(30)));
    }

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

        assert_eq!(
            c.get("ssl.endpoint.identification.algorithm"),
            Some("https")
        );

        let plain = SourceConfig {
            bootstrap_servers: "h:9092".into(),
            ..SourceConfig::default()
        };
        let c = KafkaConnection::from_source(&plain).client_config();
        assert_eq!(c.get("security.protocol"), Some("PLAINTEXT"));
        assert_eq!(c.get("sasl.mechanism"), None);
    }

    #[test]
    fn mutual_tls_and_the_host_name_switch_reach_librdkafka_and_the_key_never_prints() {
        let text = r#"
name = "job"
[source]
bootstrap_servers = "b-1.msk.example.com:9094"
topic_pattern = "^orders$"
security_protocol = "SSL"
ssl_certificate_pem = "-----BEGIN CERTIFICATE-----\ncert\n-----END CERTIFICATE-----"
ssl_key_pem = "${KEY}"
ssl_verify_hostname = false
"#;
        let key = "-----BEGIN PRIVATE KEY-----\nkey-7731\n-----END PRIVATE KEY-----";
        let job = topicberg_core::JobConfig::from_toml_str(text, |v| {
            (v == "KEY").then(|| key.to_string())
        })
        .unwrap();
        let connection = KafkaConnection::from_source(&job.source);
        let c = connection.client_config();
        assert_eq!(c.get("security.protocol"), Some("SSL"));
        assert!(c.get("ssl.certificate.pem").unwrap().contains("cert"));
        assert_eq!(c.get("ssl.key.pem"), Some(key));
        assert_eq!(c.get("ssl.endpoint.identification.algorithm"), Some("none"));
        assert_eq!(c.get("sasl.mechanism"), None);
        assert!(!format!("{connection:?}").contains("key-7731"));
    }

    #[test]
    fn oauthbearer_maps_to_librdkafkas_oidc_client() {
        let text = r#"
name = "job"
[source]
bootstrap_servers = "pkc-1.confluent.cloud:9092"
topic_pattern = "^orders$"
security_protocol = "SASL_SSL"
sasl_mechanism = "OAUTHBEARER"
oauth_token_endpoint = "https://idp.example.com/token"
oauth_client_id = "topicberg"
oauth_client_secret = "${SECRET}"
oauth_scope = "kafka"
"#;
        let job = topicberg_core::JobConfig::from_toml_str(text, |v| {
            (v == "SECRET").then(|| "oauth-secret-3301".to_string())
        })
        .unwrap();
        let connection = KafkaConnection::from_source(&job.source);
        let c = connection.client_config();
        assert_eq!(c.get("sasl.mechanism"), Some("OAUTHBEARER"));
        assert_eq!(c.get("sasl.oauthbearer.method"), Some("oidc"));
        assert_eq!(
            c.get("sasl.oauthbearer.token.endpoint.url"),
            Some("https://idp.example.com/token")
        );
        assert_eq!(c.get("sasl.oauthbearer.client.id"), Some("topicberg"));
        assert_eq!(
            c.get("sasl.oauthbearer.client.secret"),
            Some("oauth-secret-3301")
        );
        assert_eq!(c.get("sasl.oauthbearer.scope"), Some("kafka"));
        assert_eq!(c.get("sasl.username"), None);
        assert!(!format!("{connection:?}").contains("oauth-secret-3301"));
        // librdkafka accepts the settings (it was built with OIDC support).
        let created: Result<rdkafka::producer::BaseProducer, _> = c.create();
        assert!(created.is_ok(), "{:?}", created.err());
    }
}
