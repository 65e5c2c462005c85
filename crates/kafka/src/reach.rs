//! Whether any bootstrap server accepts a TCP connection, within the
//! source's `connect_timeout`: asked once when a metadata request got no
//! answer at its first attempt (a healthy cluster is never probed), so a
//! wrong address fails in seconds, naming each address tried and why,
//! rather than at the request's deadline.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::{KafkaConnection, KafkaError, KafkaErrorKind};

/// Why one bootstrap server could not be reached (`None`: it accepted a
/// connection).
fn why_unreachable(server: &str, timeout: Duration) -> Option<String> {
    let addresses: Vec<SocketAddr> = match server.to_socket_addrs() {
        Ok(addresses) => addresses.collect(),
        Err(e) => return Some(format!("{server}: the name does not resolve ({e})")),
    };
    let mut last = format!("{server}: no address");
    for address in addresses {
        match TcpStream::connect_timeout(&address, timeout) {
            Ok(_) => return None,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                last = format!("{server}: no answer within {}", seconds(timeout));
            }
            Err(e) => last = format!("{server}: {e}"),
        }
    }
    Some(last)
}

fn seconds(timeout: Duration) -> String {
    format!("{} s", timeout.as_secs_f64())
}

/// `Ok` when a bootstrap server of `connection` accepts a connection
/// within its `connect_timeout` (all are tried at once; a name that takes
/// longer to resolve counts as no answer); else a
/// [`KafkaErrorKind::Unreachable`] error naming every address and why.
pub fn reach_bootstrap(connection: &KafkaConnection, context: &str) -> Result<(), KafkaError> {
    let timeout = connection.connect_timeout;
    let servers: Vec<String> = connection
        .bootstrap_servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        // `SASL_SSL://host:9093`, as librdkafka also takes it.
        .map(|s| s.rsplit_once("://").map_or(s, |(_, address)| address))
        .map(str::to_string)
        .collect();
    tracing::debug!(servers = %servers.join(","), timeout_s = timeout.as_secs_f64(), "connecting to the bootstrap servers");
    let (answers, answered) = mpsc::channel();
    for server in &servers {
        let (server, answers) = (server.clone(), answers.clone());
        let (name, failed) = (server.clone(), answers.clone());
        let spawned = thread::Builder::new()
            .name("kafka-reach".into())
            .spawn(move || {
                let answer = why_unreachable(&server, timeout);
                let _ = answers.send((server, answer));
            });
        if spawned.is_err() {
            let _ = failed.send((name.clone(), Some(format!("{name}: no thread to try it"))));
        }
    }
    let deadline = Instant::now() + timeout + Duration::from_millis(500);
    let mut why: Vec<(String, String)> = Vec::new();
    while why.len() < servers.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match answered.recv_timeout(left) {
            Ok((_, None)) => return Ok(()),
            Ok((server, Some(reason))) => why.push((server, reason)),
            Err(_) => break,
        }
    }
    let mut reasons: Vec<String> = servers
        .iter()
        .map(|server| match why.iter().find(|(s, _)| s == server) {
            Some((_, reason)) => reason.clone(),
            None => format!("{server}: no answer within {}", seconds(timeout)),
        })
        .collect();
    reasons.dedup();
    Err(KafkaError::new(
        KafkaErrorKind::Unreachable,
        context,
        format!(
            "no bootstrap server accepted a connection within {} (source.connect_timeout): {}",
            seconds(timeout),
            reasons.join("; ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unreachable_bootstrap_server_is_named_with_its_reason() {
        // Ports nothing listens on: bound, then closed.
        let closed = || {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let (a, b) = (closed(), closed());
        let connection = KafkaConnection {
            bootstrap_servers: format!("127.0.0.1:{a}, SASL_SSL://127.0.0.1:{b}"),
            connect_timeout: Duration::from_secs(2),
            ..KafkaConnection::default()
        };
        let started = std::time::Instant::now();
        let e = reach_bootstrap(&connection, "listing topics").unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(e.kind, KafkaErrorKind::Unreachable);
        let text = e.to_string();
        for part in [
            format!("127.0.0.1:{a}: "),
            format!("127.0.0.1:{b}: "),
            "within 2 s (source.connect_timeout)".to_string(),
        ] {
            assert!(text.contains(&part), "{text}");
        }
    }

    #[test]
    fn one_reachable_bootstrap_server_is_enough() {
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = closed.local_addr().unwrap();
        drop(closed);
        let connection = KafkaConnection {
            bootstrap_servers: format!("{dead},PLAINTEXT://{}", open.local_addr().unwrap()),
            ..KafkaConnection::default()
        };
        reach_bootstrap(&connection, "listing topics").unwrap();
    }
}
