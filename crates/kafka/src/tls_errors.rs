//! A failed TLS handshake, said with its cause and its fix: the broker's
//! certificate (unknown CA, expired, another host's name; the cause asked
//! of the broker again by [`crate::tls_probe`]), our client certificate
//! refused, or a listener that does not speak TLS.

use std::time::Duration;

use crate::failure::Failure;
use crate::tls_probe::{diagnose, CertificateProblem};
use crate::KafkaConnection;

/// The detail of a [`crate::KafkaErrorKind::Tls`] error.
pub(crate) fn tls_failed(connection: &KafkaConnection, failure: Failure, reason: &str) -> String {
    let bootstrap = &connection.bootstrap_servers;
    let host = bootstrap
        .split(',')
        .next()
        .and_then(|a| a.trim().rsplit_once(':'))
        .map(|(h, _)| h.to_string())
        .unwrap_or_default();
    let reason = reason.trim();
    let head = format!("TLS handshake failed with {bootstrap}");
    match failure {
        Failure::ServerCertificate => match diagnose(connection, Duration::from_secs(3)) {
            Some(CertificateProblem::Expired(until)) => format!(
                "{head}: the broker's certificate has expired (valid until {until}); the \
                     broker's operator must renew it (no job-file setting fixes an expired \
                     certificate)"
            ),
            Some(CertificateProblem::HostnameMismatch) => format!(
                "{head}: hostname mismatch: the broker's certificate is not issued for \
                     {host}; connect by a name the certificate lists (bootstrap_servers and \
                     the brokers' advertised listeners), or set ssl_verify_hostname = false \
                     only if you trust every certificate its CA signs"
            ),
            Some(CertificateProblem::UnknownCa(why)) => format!(
                "{head}: the broker's certificate is signed by an unknown CA ({why}); set \
                     ssl_ca_pem to the CA certificate that signed the brokers' certificates \
                     (PEM text or the path of its file){}",
                if connection.ssl_ca_pem.is_none() {
                    " - unset, only the system's CAs are trusted"
                } else {
                    " - the one set did not sign them"
                }
            ),
            Some(CertificateProblem::Unverified(why)) => format!(
                "{head}: the broker's certificate was not accepted ({why}); check \
                     ssl_ca_pem and the broker's certificate ({reason})"
            ),
            None => format!(
                "{head}: the broker's certificate was not accepted ({reason}); check \
                     ssl_ca_pem (the CA that signed the brokers' certificates) and \
                     ssl_verify_hostname"
            ),
        },
        Failure::ClientCertificate => match &connection.client_certificate {
            None => format!(
                "{head}: the broker requires a client certificate (mutual TLS) and none is \
                 set ({reason}); set ssl_certificate_pem and ssl_key_pem to a certificate \
                 signed by a CA the brokers trust"
            ),
            Some(_) => format!(
                "{head}: the broker refused the client certificate ({reason}); set \
                 ssl_certificate_pem and ssl_key_pem to a certificate, still valid, signed by \
                 a CA the brokers trust (their ssl.truststore)"
            ),
        },
        _ => format!(
            "{head}: {reason}; check that security_protocol = \"{}\" matches the listener at \
             this port (TLS listeners take \"SSL\" or \"SASL_SSL\") and ssl_ca_pem",
            connection.security_protocol.as_str()
        ),
    }
}
