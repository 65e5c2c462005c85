//! Why a broker's certificate was not accepted: librdkafka only says
//! "certificate verify failed", so the first bootstrap broker is asked again
//! by a plain TLS handshake (OpenSSL, as librdkafka uses it) whose
//! verification result names the cause (expired, another host's name, an
//! unknown CA).

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openssl::ssl::{HandshakeError, SslConnector, SslMethod, SslVerifyMode};
use openssl::x509::{X509VerifyResult, X509};

use crate::KafkaConnection;

/// Why the broker's certificate was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CertificateProblem {
    /// Past its end date (or before its start date).
    Expired(String),
    /// Issued for other host names than the one connected to.
    HostnameMismatch,
    /// Signed by a CA this client does not trust (OpenSSL's verification
    /// result: self-signed, issuer unknown, ...).
    UnknownCa(X509VerifyResult),
    /// Another verification failure; OpenSSL's result prints its words.
    Unverified(X509VerifyResult),
}

/// Connects to the first bootstrap broker and verifies its certificate as
/// librdkafka would (CA from the connection or the system, host name check
/// as set); `None` when the handshake verifies or cannot be tried.
pub(crate) fn diagnose(
    connection: &KafkaConnection,
    timeout: Duration,
) -> Option<CertificateProblem> {
    let address = connection
        .bootstrap_servers
        .split(',')
        .next()?
        .trim()
        .to_string();
    let (host, _) = address.rsplit_once(':')?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let socket = address.to_socket_addrs().ok()?.next()?;
    let tcp = TcpStream::connect_timeout(&socket, timeout).ok()?;
    tcp.set_read_timeout(Some(timeout)).ok()?;
    tcp.set_write_timeout(Some(timeout)).ok()?;
    let mut builder = SslConnector::builder(SslMethod::tls_client()).ok()?;
    // The end date of the certificate verification stopped at.
    let not_after = Arc::new(Mutex::new(String::new()));
    let seen = Arc::clone(&not_after);
    builder.set_verify_callback(SslVerifyMode::PEER, move |ok, store| {
        if !ok {
            if let (Some(cert), Ok(mut seen)) = (store.current_cert(), seen.lock()) {
                *seen = cert.not_after().to_string();
            }
        }
        ok
    });
    if let Some(pem) = &connection.ssl_ca_pem {
        for cert in X509::stack_from_pem(pem.as_bytes()).ok()? {
            builder.cert_store_mut().add_cert(cert).ok()?;
        }
    }
    let connector = builder.build();
    let mut config = connector.configure().ok()?;
    config.set_verify_hostname(connection.ssl_verify_hostname);
    match config.connect(&host, tcp) {
        Ok(_) => None,
        Err(HandshakeError::Failure(mid)) => {
            let result = mid.ssl().verify_result();
            let not_after = not_after.lock().map(|s| s.clone()).unwrap_or_default();
            Some(match result.as_raw() {
                // X509_V_ERR_CERT_NOT_YET_VALID, X509_V_ERR_CERT_HAS_EXPIRED
                9 | 10 => CertificateProblem::Expired(not_after),
                // X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
                62 | 64 => CertificateProblem::HostnameMismatch,
                // self-signed (18, 19), issuer unknown (2, 20, 21)
                2 | 18 | 19 | 20 | 21 => CertificateProblem::UnknownCa(result),
                0 => return None,
                _ => CertificateProblem::Unverified(result),
            })
        }
        Err(_) => None,
    }
}
