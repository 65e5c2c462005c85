//! Kafka the way cloud clusters run it, against the test bed's `kafka_tls`
//! broker: `SSL`, mutual TLS, `SASL_SSL` with PLAIN and SCRAM-SHA-256/512,
//! and OAUTHBEARER (client credentials from the test bed's token endpoint).
//! Each listener: `check`, then a sync of an append and an upsert topic into
//! the embedded catalog. Each failure (unknown CA, hostname mismatch,
//! expired certificate, client certificate refused or missing, wrong
//! password, wrong OAuth secret) is named by `check` and `sync` within 10 s,
//! and nothing is committed.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use topicberg_kafka::KafkaConnection;

use crate::support::{create_topic_on, produce_to_partitions, table_report, Job};
use crate::testbed::{get, unique_name};

/// The TLS broker's admin listener (PLAINTEXT, super user).
fn admin() -> KafkaConnection {
    KafkaConnection::plaintext(get("TESTBED_KAFKA_TLS_ADMIN_BOOTSTRAP"))
}

fn ca() -> String {
    get("TESTBED_KAFKA_TLS_CA")
}

/// A job on `bootstrap` with `source` lines in `[source]`, reading `topics`
/// (the first appended, the second upserted on `id`) into a fresh
/// embedded catalog.
fn job(bootstrap: &str, source: &str, topics: &[&str]) -> Job {
    let job = Job::embedded(topics);
    job.set_bootstrap(bootstrap);
    let text = std::fs::read_to_string(&job.path).unwrap();
    let text = text.replacen(
        "max_threads = 3\n",
        &format!("max_threads = 3\n{source}"),
        1,
    );
    std::fs::write(&job.path, text).unwrap();
    if let [_, upsert] = topics {
        job.append(&format!(
            "[[streams]]\ntopic = \"{upsert}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n"
        ));
    }
    job
}

fn text_of(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every `*.metadata.json` under the job's warehouse: none means nothing
/// was committed.
fn committed_tables(job: &Job) -> usize {
    fn walk(dir: &Path, n: &mut usize) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, n);
            } else if p.to_string_lossy().ends_with(".metadata.json") {
                *n += 1;
            }
        }
    }
    let mut n = 0;
    walk(&job.path.with_file_name("warehouse"), &mut n);
    n
}

/// `check`, then two syncs: the append table gets every message, the
/// upsert table one row per id with the newest version.
fn check_and_sync(bootstrap: &str, source: &str) {
    let append = unique_name("tls_append");
    let upsert = unique_name("tls_upsert");
    for t in [&append, &upsert] {
        create_topic_on(&admin(), t, 2);
    }
    let rows = |topic: &str, version: &str| -> Vec<(i32, String, String)> {
        (0..10)
            .map(|i| {
                let _ = topic;
                (
                    i % 2,
                    i.to_string(),
                    format!(r#"{{"id":{i},"v":"{version}{i}"}}"#),
                )
            })
            .collect()
    };
    produce_to_partitions(&admin(), &append, &rows(&append, "a"));
    produce_to_partitions(&admin(), &upsert, &rows(&upsert, "a"));
    let job = job(bootstrap, source, &[&append, &upsert]);

    let out = job.run("check", &[], &[]);
    let shown = text_of(&out);
    assert!(out.status.success(), "check on {bootstrap}: {shown}");
    assert!(
        shown.contains(&format!("1 broker(s) answered at {bootstrap}")),
        "{shown}"
    );
    assert!(shown.contains("2 topic(s) match"), "{shown}");

    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&append))["records"], 10);
    assert_eq!(table_report(&report, &job.table(&upsert))["records"], 10);
    produce_to_partitions(&admin(), &append, &rows(&append, "b"));
    produce_to_partitions(&admin(), &upsert, &rows(&upsert, "b"));
    let report = job.sync();
    assert_eq!(table_report(&report, &job.table(&append))["records"], 10);

    let appended = job.read_embedded("duckdb", &job.table(&append));
    assert_eq!(appended.lines().count(), 20, "{appended}");
    let upserted = job.read_embedded("duckdb", &job.table(&upsert));
    assert_eq!(upserted.lines().count(), 10, "{upserted}");
    assert!(upserted.contains("\"b7\""), "newest versions: {upserted}");
    assert!(
        !upserted.contains("\"a7\""),
        "old versions gone: {upserted}"
    );
}

#[test]
fn kafka_tls_ssl_server_authentication_checks_and_syncs() {
    check_and_sync(
        &get("TESTBED_KAFKA_TLS_BOOTSTRAP"),
        &format!("security_protocol = \"SSL\"\nssl_ca_pem = \"{}\"\n", ca()),
    );
}

#[test]
fn kafka_tls_mutual_tls_checks_and_syncs() {
    check_and_sync(
        &get("TESTBED_KAFKA_MTLS_BOOTSTRAP"),
        &format!(
            "security_protocol = \"SSL\"\nssl_ca_pem = \"{}\"\nssl_certificate_pem = \"{}\"\n\
             ssl_key_pem = \"{}\"\n",
            ca(),
            get("TESTBED_KAFKA_TLS_CLIENT_CERT"),
            get("TESTBED_KAFKA_TLS_CLIENT_KEY")
        ),
    );
}

fn sasl_ssl(mechanism: &str, user: &str, password: &str) -> String {
    format!(
        "security_protocol = \"SASL_SSL\"\nssl_ca_pem = \"{}\"\nsasl_mechanism = \"{mechanism}\"\n\
         sasl_username = \"{user}\"\nsasl_password = \"{password}\"\n",
        ca()
    )
}

#[test]
fn kafka_tls_sasl_ssl_plain_and_scram_check_and_sync() {
    let bootstrap = get("TESTBED_KAFKA_SASL_SSL_BOOTSTRAP");
    check_and_sync(
        &bootstrap,
        &sasl_ssl(
            "PLAIN",
            &get("TESTBED_KAFKA_PLAIN_USER"),
            &get("TESTBED_KAFKA_PLAIN_PASSWORD"),
        ),
    );
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        check_and_sync(
            &bootstrap,
            &sasl_ssl(
                mechanism,
                &get("TESTBED_KAFKA_SCRAM_USER"),
                &get("TESTBED_KAFKA_SCRAM_PASSWORD"),
            ),
        );
    }
}

fn oauth(secret: &str) -> String {
    format!(
        "security_protocol = \"SASL_SSL\"\nssl_ca_pem = \"{}\"\nsasl_mechanism = \"OAUTHBEARER\"\n\
         oauth_token_endpoint = \"{}\"\noauth_client_id = \"{}\"\noauth_client_secret = \"{secret}\"\n\
         oauth_scope = \"{}\"\n",
        ca(),
        get("TESTBED_KAFKA_OAUTH_TOKEN_URL"),
        get("TESTBED_KAFKA_OAUTH_CLIENT_ID"),
        get("TESTBED_KAFKA_OAUTH_SCOPE"),
    )
}

#[test]
fn kafka_tls_oauthbearer_client_credentials_checks_and_syncs() {
    check_and_sync(
        &get("TESTBED_KAFKA_OAUTH_BOOTSTRAP"),
        &oauth(&get("TESTBED_KAFKA_OAUTH_CLIENT_SECRET")),
    );
}

/// `check`, `sync` and `discover` all fail within 10 s with every one of `words`,
/// never "transport failure", never the secret `mark`, and commit nothing.
#[track_caller]
fn fails_fast_naming(bootstrap: &str, source: &str, words: &[&str], mark: &str) {
    let topic = unique_name("tls_fail");
    create_topic_on(&admin(), &topic, 1);
    let job = job(bootstrap, source, &[&topic]);
    for command in ["check", "sync", "discover"] {
        let started = Instant::now();
        let out = job.run(command, &[], &[]);
        let elapsed = started.elapsed();
        let shown = text_of(&out);
        assert!(!out.status.success(), "{command} on {bootstrap}: {shown}");
        for w in words {
            assert!(
                shown.contains(w),
                "{command} on {bootstrap} should say {w:?}: {shown}"
            );
        }
        assert!(
            !shown.to_lowercase().contains("transport failure"),
            "{command}: {shown}"
        );
        assert!(
            mark.is_empty() || !shown.contains(mark),
            "{command} leaked a secret: {shown}"
        );
        assert!(
            elapsed < Duration::from_secs(10),
            "{command} on {bootstrap} took {elapsed:?}: {shown}"
        );
    }
    assert_eq!(committed_tables(&job), 0, "nothing committed");
}

#[test]
fn kafka_tls_unknown_ca_is_named_with_its_fix() {
    fails_fast_naming(
        &get("TESTBED_KAFKA_TLS_BOOTSTRAP"),
        &format!(
            "security_protocol = \"SSL\"\nssl_ca_pem = \"{}\"\n",
            get("TESTBED_KAFKA_TLS_OTHER_CA")
        ),
        &["TLS handshake failed", "unknown CA", "set ssl_ca_pem"],
        "",
    );
}

#[test]
fn kafka_tls_hostname_mismatch_is_named_and_the_switch_turns_it_off() {
    let bootstrap = get("TESTBED_KAFKA_TLS_WRONG_HOST_BOOTSTRAP");
    let source = format!("security_protocol = \"SSL\"\nssl_ca_pem = \"{}\"\n", ca());
    fails_fast_naming(
        &bootstrap,
        &source,
        &[
            "TLS handshake failed",
            "hostname mismatch",
            "ssl_verify_hostname = false",
        ],
        "",
    );
    // The documented switch: the same listener is accepted without the check.
    let topic = unique_name("tls_nohost");
    create_topic_on(&admin(), &topic, 1);
    let job = job(
        &bootstrap,
        &format!("{source}ssl_verify_hostname = false\n"),
        &[&topic],
    );
    let out = job.run("check", &[], &[]);
    assert!(out.status.success(), "{}", text_of(&out));
}

#[test]
fn kafka_tls_expired_certificate_is_named() {
    fails_fast_naming(
        &get("TESTBED_KAFKA_TLS_EXPIRED_BOOTSTRAP"),
        &format!("security_protocol = \"SSL\"\nssl_ca_pem = \"{}\"\n", ca()),
        &["TLS handshake failed", "certificate has expired", "renew"],
        "",
    );
}

#[test]
fn kafka_tls_client_certificate_missing_or_refused_is_named() {
    let bootstrap = get("TESTBED_KAFKA_MTLS_BOOTSTRAP");
    let base = format!("security_protocol = \"SSL\"\nssl_ca_pem = \"{}\"\n", ca());
    fails_fast_naming(
        &bootstrap,
        &base,
        &[
            "TLS handshake failed",
            "requires a client certificate",
            "set ssl_certificate_pem",
        ],
        "",
    );
    fails_fast_naming(
        &bootstrap,
        &format!(
            "{base}ssl_certificate_pem = \"{}\"\nssl_key_pem = \"{}\"\n",
            get("TESTBED_KAFKA_TLS_ROGUE_CLIENT_CERT"),
            get("TESTBED_KAFKA_TLS_ROGUE_CLIENT_KEY")
        ),
        &["TLS handshake failed", "refused the client certificate"],
        "",
    );
}

#[test]
fn kafka_tls_wrong_sasl_password_over_tls_is_authentication() {
    let mark = "wrong-tls-pw-2291";
    fails_fast_naming(
        &get("TESTBED_KAFKA_SASL_SSL_BOOTSTRAP"),
        &sasl_ssl("SCRAM-SHA-256", &get("TESTBED_KAFKA_SCRAM_USER"), mark),
        &[
            "authentication failed for user",
            "SCRAM-SHA-256",
            "check sasl_username and sasl_password",
        ],
        mark,
    );
}

#[test]
fn kafka_tls_wrong_oauth_client_secret_is_authentication() {
    let mark = "wrong-oauth-secret-7719";
    fails_fast_naming(
        &get("TESTBED_KAFKA_OAUTH_BOOTSTRAP"),
        &oauth(mark),
        &[
            "authentication failed with mechanism OAUTHBEARER",
            "check oauth_client_id, oauth_client_secret",
        ],
        mark,
    );
}

fn scram_over_tls() -> String {
    sasl_ssl(
        "SCRAM-SHA-512",
        &get("TESTBED_KAFKA_SCRAM_USER"),
        &get("TESTBED_KAFKA_SCRAM_PASSWORD"),
    )
}

/// A topic the ACLs refuse (the test bed denies `tls_denied*` to every test
/// user): named as an authorization failure, not as a missing topic.
#[test]
fn kafka_tls_topic_acl_refusal_is_named_as_authorization() {
    let prefix = get("TESTBED_KAFKA_TLS_DENIED_PREFIX");
    let topic = unique_name(&format!("{prefix}_topic"));
    create_topic_on(&admin(), &topic, 1);
    let job = job(
        &get("TESTBED_KAFKA_SASL_SSL_BOOTSTRAP"),
        &scram_over_tls(),
        &[&topic],
    );
    for command in ["check", "sync"] {
        let started = Instant::now();
        let out = job.run(command, &[], &[]);
        let shown = text_of(&out);
        assert!(!out.status.success(), "{command}: {shown}");
        for w in [
            "not authorized",
            &format!("describe topic {topic}"),
            "TOPIC_AUTHORIZATION_FAILED",
        ] {
            assert!(shown.contains(w), "{command} should say {w:?}: {shown}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{command}: {shown}"
        );
    }
    assert_eq!(committed_tables(&job), 0, "nothing committed");
}

/// A consumer group the ACLs refuse: `check`'s group step and the sync name
/// it before anything is read or committed.
#[test]
fn kafka_tls_group_acl_refusal_is_named_as_authorization() {
    let prefix = get("TESTBED_KAFKA_TLS_DENIED_PREFIX");
    let group = unique_name(&format!("{prefix}_group"));
    fails_fast_naming(
        &get("TESTBED_KAFKA_SASL_SSL_BOOTSTRAP"),
        &format!("{}consumer_group = \"{group}\"\n", scram_over_tls()),
        &[
            "not authorized",
            &format!("consumer group {group}"),
            "GROUP_AUTHORIZATION_FAILED",
        ],
        "",
    );
}

/// OAUTHBEARER tokens are fetched again before they expire: against a token
/// endpoint of this test's own that grants 3-second tokens (the test bed's
/// key and issuer, so the broker takes them), one client asks for a token
/// again and again (librdkafka refreshes at 80 % of the lifetime, in its
/// background thread) and still gets metadata after its first token expired.
#[test]
fn kafka_tls_oauthbearer_tokens_are_refreshed_before_they_expire() {
    use rdkafka::producer::{BaseProducer, Producer};
    use topicberg_kafka::{OAuthClient, SecurityProtocol};

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::env::temp_dir().join(format!("{}.log", unique_name("token")));
    let script = crate::testbed::repo_root().join("scripts/testbed.d/kafka_tls_token.py");
    let server = crate::testbed::command(&get("TESTBED_PYTHON"))
        .arg(script)
        .args([
            port.to_string(),
            get("TESTBED_KAFKA_OAUTH_SIGNING_KEY"),
            get("TESTBED_KAFKA_OAUTH_CLIENT_ID"),
            get("TESTBED_KAFKA_OAUTH_CLIENT_SECRET"),
            get("TESTBED_KAFKA_OAUTH_AUDIENCE"),
            get("TESTBED_KAFKA_OAUTH_ISSUER"),
            "3".to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("token endpoint");
    let _server = crate::support::Running(server);
    let token_requests = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("\"POST /token")
            .count()
    };
    let health = format!("127.0.0.1:{port}");
    crate::support::wait_until("the token endpoint", Duration::from_secs(10), || {
        std::net::TcpStream::connect(&health).is_ok()
    });

    let connection = KafkaConnection {
        bootstrap_servers: get("TESTBED_KAFKA_OAUTH_BOOTSTRAP"),
        security_protocol: SecurityProtocol::SaslSsl,
        ssl_ca_pem: Some(std::fs::read_to_string(ca()).unwrap()),
        oauth: Some(OAuthClient {
            token_endpoint: format!("http://127.0.0.1:{port}/token"),
            client_id: get("TESTBED_KAFKA_OAUTH_CLIENT_ID"),
            client_secret: get("TESTBED_KAFKA_OAUTH_CLIENT_SECRET").into(),
            scope: None,
        }),
        ..KafkaConnection::default()
    };
    let client: BaseProducer = connection.client_config().create().unwrap();
    let first = client
        .client()
        .fetch_metadata(None, Duration::from_secs(10));
    assert!(first.is_ok(), "{:?}", first.err());
    let started = Instant::now();
    crate::support::wait_until(
        "a third token (two refreshes)",
        Duration::from_secs(20),
        || token_requests() >= 3,
    );
    assert!(
        started.elapsed() > Duration::from_secs(2),
        "refreshed before 80 % of 3 s"
    );
    let later = client
        .client()
        .fetch_metadata(None, Duration::from_secs(10));
    assert!(later.is_ok(), "{:?}", later.err());
}
