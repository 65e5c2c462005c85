//! `[source]`'s security settings: SASL (user and password, or OAUTHBEARER's
//! token endpoint and client), TLS (CA, client certificate and key, host
//! name check), each refused with how to fix it.

use super::{ConfigProblem, SaslMechanism, SourceConfig};

fn push(out: &mut Vec<ConfigProblem>, field: &str, message: impl Into<String>) {
    out.push(ConfigProblem::new(format!("source.{field}"), message));
}

/// The names of the settings that are set.
fn set_ones<'a>(fields: &[(&'a str, bool)]) -> Vec<&'a str> {
    fields
        .iter()
        .filter_map(|(name, is_set)| is_set.then_some(*name))
        .collect()
}

/// Every security problem of `s`.
pub(super) fn security(s: &SourceConfig, out: &mut Vec<ConfigProblem>) {
    sasl(s, out);
    oauth(s, out);
    tls(s, out);
}

fn sasl(s: &SourceConfig, out: &mut Vec<ConfigProblem>) {
    let protocol = s.security_protocol.as_str();
    if !s.security_protocol.uses_sasl() {
        let set = set_ones(&[
            ("sasl_mechanism", s.sasl_mechanism.is_some()),
            ("sasl_username", s.sasl_username.is_some()),
            ("sasl_password", s.sasl_password.is_some()),
        ]);
        if !set.is_empty() {
            push(
                out,
                "security_protocol",
                format!("is \"{protocol}\", which does not use {}; set security_protocol = \"SASL_PLAINTEXT\" or \"SASL_SSL\", or remove them", set.join(", ")),
            );
        }
        return;
    }
    if s.sasl_mechanism.is_none() {
        push(
            out,
            "sasl_mechanism",
            format!("is required with security_protocol = \"{protocol}\"; set it to \"PLAIN\", \"SCRAM-SHA-256\", \"SCRAM-SHA-512\" or \"OAUTHBEARER\""),
        );
    }
    match s.sasl_mechanism {
        Some(SaslMechanism::OAuthBearer) => {
            let set = set_ones(&[
                ("sasl_username", s.sasl_username.is_some()),
                ("sasl_password", s.sasl_password.is_some()),
            ]);
            if !set.is_empty() {
                push(
                    out,
                    "sasl_mechanism",
                    format!("is \"OAUTHBEARER\", which logs in with a token from oauth_token_endpoint, not with {}; remove them, or pick \"PLAIN\" or a SCRAM mechanism", set.join(" and ")),
                );
            }
        }
        // Unset: the user and password mechanisms are the usual ones.
        Some(_) | None => {
            if s.sasl_username.is_none() {
                push(
                    out,
                    "sasl_username",
                    format!("is required with security_protocol = \"{protocol}\"; set the SASL user name"),
                );
            }
            if s.sasl_password.is_none() {
                push(
                    out,
                    "sasl_password",
                    format!("is required with security_protocol = \"{protocol}\"; set sasl_password = \"${{KAFKA_PASSWORD}}\" and export KAFKA_PASSWORD"),
                );
            }
        }
    }
}

fn oauth(s: &SourceConfig, out: &mut Vec<ConfigProblem>) {
    let oauthbearer =
        s.security_protocol.uses_sasl() && s.sasl_mechanism == Some(SaslMechanism::OAuthBearer);
    if !oauthbearer {
        let set = set_ones(&[
            ("oauth_token_endpoint", s.oauth_token_endpoint.is_some()),
            ("oauth_client_id", s.oauth_client_id.is_some()),
            ("oauth_client_secret", s.oauth_client_secret.is_some()),
            ("oauth_scope", s.oauth_scope.is_some()),
        ]);
        if !set.is_empty() {
            push(
                out,
                "sasl_mechanism",
                format!("is not \"OAUTHBEARER\" (with security_protocol = \"SASL_SSL\"), so {} would not be used; set sasl_mechanism = \"OAUTHBEARER\", or remove them", set.join(", ")),
            );
        }
        return;
    }
    match s.oauth_token_endpoint.as_deref() {
        None => push(
            out,
            "oauth_token_endpoint",
            "is required with sasl_mechanism = \"OAUTHBEARER\"; set the identity provider's token URL, e.g. \"https://login.example.com/oauth2/token\"",
        ),
        Some(url) if !(url.starts_with("https://") || url.starts_with("http://")) => push(
            out,
            "oauth_token_endpoint",
            format!("\"{url}\" is not an http:// or https:// URL; set the identity provider's token URL"),
        ),
        Some(url) if url.contains('@') => push(
            out,
            "oauth_token_endpoint",
            "holds credentials (user@host, not shown); remove them and set oauth_client_id and oauth_client_secret",
        ),
        Some(_) => {}
    }
    if s.oauth_client_id.is_none() {
        push(
            out,
            "oauth_client_id",
            "is required with sasl_mechanism = \"OAUTHBEARER\"; set the client id the identity provider issued",
        );
    }
    if s.oauth_client_secret.is_none() {
        push(
            out,
            "oauth_client_secret",
            "is required with sasl_mechanism = \"OAUTHBEARER\"; set oauth_client_secret = \"${KAFKA_OAUTH_SECRET}\" and export KAFKA_OAUTH_SECRET",
        );
    }
}

fn tls(s: &SourceConfig, out: &mut Vec<ConfigProblem>) {
    let protocol = s.security_protocol.as_str();
    if !s.security_protocol.uses_tls() {
        let set = set_ones(&[
            ("ssl_ca_pem", s.ssl_ca_pem.is_some()),
            ("ssl_certificate_pem", s.ssl_certificate_pem.is_some()),
            ("ssl_key_pem", s.ssl_key_pem.is_some()),
            ("ssl_verify_hostname = false", !s.ssl_verify_hostname),
        ]);
        for field in set {
            let name = field.split(' ').next().unwrap_or(field);
            push(
                out,
                name,
                format!("is set but security_protocol = \"{protocol}\" does not use TLS; set security_protocol = \"SSL\" or \"SASL_SSL\", or remove {name}"),
            );
        }
        return;
    }
    match (&s.ssl_certificate_pem, &s.ssl_key_pem) {
        (Some(_), None) => push(
            out,
            "ssl_key_pem",
            "is required with ssl_certificate_pem (mutual TLS); set the client certificate's private key: its PEM text (\"${KAFKA_CLIENT_KEY}\") or the path of its .pem file",
        ),
        (None, Some(_)) => push(
            out,
            "ssl_certificate_pem",
            "is required with ssl_key_pem (mutual TLS); set the client certificate: its PEM text or the path of its .pem file",
        ),
        (Some(cert), Some(_)) if !cert.contains("CERTIFICATE-----") => push(
            out,
            "ssl_certificate_pem",
            "holds no PEM certificate (no -----BEGIN CERTIFICATE----- line); give the client certificate, not its key",
        ),
        (Some(_), Some(key)) if !key.expose().contains("PRIVATE KEY-----") => push(
            out,
            "ssl_key_pem",
            "holds no PEM private key (no -----BEGIN PRIVATE KEY----- line; its value is not shown); give the client certificate's private key",
        ),
        (Some(_), Some(key)) if key.expose().contains("ENCRYPTED PRIVATE KEY") => push(
            out,
            "ssl_key_pem",
            "is an encrypted key; give it unencrypted (openssl pkey -in key.pem -out plain.pem) and keep it a secret",
        ),
        _ => {}
    }
}
