//! Issue 12 part 3 through the binary: secrets of the wrong type never
//! printed (CLI and the service's API), URL passwords redacted in catalog
//! errors, a wrong SASL password named as such quickly, and every unknown
//! key of a job file reported at once.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::serve_support::{temp_data_dir, Server, ADMIN_PASSWORD};
use crate::support::{Catalog, Job};
use crate::testbed::{get, unique_name};

/// The distinctive part of every secret value below; a boolean cannot
/// hold it, so `true` is checked not to be echoed in backquotes.
const MARK: &str = "73915286";

/// A secret field's TOML values that are not a string, or not a valid one.
fn bad_values() -> Vec<(&'static str, String)> {
    vec![
        ("number", format!("{MARK}4")),
        ("boolean", "true".to_string()),
        ("array", format!("[\"s-{MARK}\"]")),
        ("unterminated string", format!("\"s-{MARK}")),
        ("invalid escape", format!("\"s-\\q{MARK}\"")),
        ("malformed ${...}", format!("\"s-${{{MARK} x}}\"")),
    ]
}

/// A job file (SASL source, REST destination with every secret) that
/// parses; `field = value` then replaces the field's line (`token`
/// replaces `credential`: they exclude each other).
fn job_text(field: &str, value: &str) -> String {
    let text = r#"name = "secrets_job"
[source]
bootstrap_servers = "127.0.0.1:9"
topic_pattern = "^t$"
security_protocol = "SASL_PLAINTEXT"
sasl_mechanism = "PLAIN"
sasl_username = "u"
sasl_password = "pw"
[destination]
catalog = "rest"
uri = "http://127.0.0.1:9"
warehouse = "w"
credential = "id:secret"
s3_access_key = "k"
s3_secret_key = "sk"
"#;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let destination = if field == "token" {
                "credential"
            } else {
                field
            };
            if l.starts_with(&format!("{destination} = ")) {
                format!("{field} = {value}")
            } else {
                l.to_string()
            }
        })
        .collect();
    let out = lines.join("\n") + "\n";
    assert!(out.contains(&format!("{field} = {value}")));
    out
}

fn write_job(text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique_name("it_secrets"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("job.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn topicberg(args: &[&str], job: &PathBuf) -> Output {
    Command::new(env!("CARGO_BIN_EXE_topicberg"))
        .args(args)
        .arg("-c")
        .arg(job)
        .output()
        .expect("running topicberg")
}

fn text_of(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn secrets_a_secret_of_the_wrong_type_is_never_printed_by_check_sync_discover() {
    for field in ["sasl_password", "credential", "token", "s3_secret_key"] {
        for (what, value) in bad_values() {
            let job = write_job(&job_text(field, &value));
            for command in ["check", "sync", "discover"] {
                let out = topicberg(&[command], &job);
                let shown = text_of(&out);
                assert!(!out.status.success(), "{command} {field} {what}: {shown}");
                assert!(
                    !shown.contains(MARK) && !shown.contains("`true`"),
                    "{command}: {field} as {what} leaked: {shown}"
                );
                assert!(
                    shown.contains("job.toml"),
                    "{command} {field} {what}: {shown}"
                );
            }
        }
    }
}

#[test]
fn secrets_a_secret_of_the_wrong_type_is_never_in_an_api_answer() {
    let dir = temp_data_dir();
    let mut server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let json_values = [
        json!(format!("{MARK}4").parse::<u64>().unwrap()),
        json!(true),
        json!([format!("s-{MARK}")]),
        json!({"nested": format!("s-{MARK}")}),
    ];
    for value in &json_values {
        let source = json!({"name": "s", "bootstrap_servers": "127.0.0.1:9",
            "topic_pattern": "^t$", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": value});
        client
            .json("POST", "/api/sources", Some(&source))
            .expect(400);
        for field in ["credential", "token", "s3_secret_key"] {
            let mut destination = json!({"name": "d", "catalog": "rest",
                "uri": "http://127.0.0.1:9", "warehouse": "w"});
            destination[field] = value.clone();
            client
                .json("POST", "/api/destinations", Some(&destination))
                .expect(400);
        }
    }
    for field in ["sasl_password", "credential", "s3_secret_key"] {
        for (what, value) in bad_values() {
            let text = job_text(field, &value).replace("secrets_job", &unique_name("imp"));
            let reply = client.post_text("/api/jobs/import", &text);
            assert_eq!(reply.status, 400, "{field} {what}: {}", reply.body);
        }
    }
    let seen = client.seen.borrow();
    // The login, 4 values x 4 pieces, 3 fields x 6 values imported.
    assert_eq!(seen.len(), 1 + 16 + 18, "answers");
    for body in seen.iter() {
        assert!(
            !body.contains(MARK) && !body.contains("`true`"),
            "leaked: {body}"
        );
    }
    assert!(
        seen.iter().any(|b| b.contains("must be a quoted string")),
        "{seen:#?}"
    );
    drop(seen);
    server.stop();
    assert!(!server.log().contains(MARK), "{}", server.log());
}

/// The catalog URI carries `user:secretpass@` and nothing listens there:
/// `check` and `sync` name the URL with the password redacted.
#[test]
fn secrets_a_password_in_the_catalog_uri_is_redacted_in_check_and_sync() {
    let job = Job::new(Catalog::Seaweed, &[&unique_name("it_none")], "", "");
    let uri = get("TESTBED_SEAWEED_URI");
    let text = std::fs::read_to_string(&job.path)
        .unwrap()
        .replace(&uri, "http://user:secretpass@127.0.0.1:9/api/catalog");
    std::fs::write(&job.path, text).unwrap();
    for command in ["check", "sync"] {
        // Debug logging: the libraries' own lines go through the same filter.
        let out = job.run(command, &[], &[("TOPICBERG_LOG", "debug")]);
        let shown = text_of(&out);
        assert!(!out.status.success(), "{command}: {shown}");
        assert!(!shown.contains("secretpass"), "{command} leaked: {shown}");
        assert!(
            shown.contains(
                "token exchange at http://user:***@127.0.0.1:9/api/catalog/v1/oauth/tokens"
            ),
            "{command}: {shown}"
        );
    }
}

/// A wrong SASL password: `check` and `sync` both fail within seconds
/// saying authentication failed, for which user, with which mechanism.
#[test]
fn secrets_a_wrong_sasl_password_fails_check_and_sync_fast_naming_authentication() {
    let sasl = get("TESTBED_KAFKA_SASL_BOOTSTRAP");
    for (mechanism, user) in [
        ("SCRAM-SHA-512", get("TESTBED_KAFKA_SCRAM_USER")),
        ("PLAIN", get("TESTBED_KAFKA_PLAIN_USER")),
    ] {
        let source = format!(
            "security_protocol = \"SASL_PLAINTEXT\"\nsasl_mechanism = \"{mechanism}\"\n\
             sasl_username = \"{user}\"\nsasl_password = \"wrong-pw-{MARK}\"\n"
        );
        let job = Job::new(Catalog::Seaweed, &["it_any"], &source, "");
        job.set_bootstrap(&sasl);
        for command in ["check", "sync"] {
            let started = Instant::now();
            let out = job.run(command, &[], &[]);
            let elapsed = started.elapsed();
            let shown = text_of(&out);
            assert!(!out.status.success(), "{command} {mechanism}: {shown}");
            let expected = format!(
                "authentication failed for user \"{user}\" with mechanism {mechanism} on bootstrap {sasl}"
            );
            assert!(shown.contains(&expected), "{command} {mechanism}: {shown}");
            assert!(
                shown.contains("check sasl_username and sasl_password"),
                "{command}: {shown}"
            );
            assert!(
                !shown.contains(MARK),
                "{command} leaked the password: {shown}"
            );
            assert!(
                elapsed < Duration::from_secs(15),
                "{command} {mechanism} took {elapsed:?}"
            );
        }
    }
}

/// Three unknown keys in three tables and a validation problem: `check`
/// lists all four.
#[test]
fn secrets_every_unknown_key_is_reported_by_check_and_import() {
    let text = r#"name = "unknown_keys"
colour = "blue"
[source]
bootstrap_servers = "127.0.0.1:9"
topic_pattern = "^t$"
max_threads = 0
[[streams]]
topic = "t"
mode = "upsert"
dedup_key = ["id"]
[sync]
batch_row = 5
"#;
    let job = write_job(text);
    let out = topicberg(&["check"], &job);
    let shown = text_of(&out);
    assert!(!out.status.success(), "{shown}");
    for line in [
        "(top level): unknown field \"colour\" (line 2)",
        "[[streams]] #1: unknown field \"dedup_key\", did you mean \"dedup_keys\"? (line 10",
        "[sync]: unknown field \"batch_row\", did you mean \"batch_rows\"? (line 12",
        "source.max_threads:",
    ] {
        assert!(shown.contains(line), "missing {line:?} in: {shown}");
    }

    let dir = temp_data_dir();
    let mut server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let reply = client
        .post_text("/api/jobs/import", text)
        .expect(400)
        .json();
    let problems = reply["problems"].as_array().expect("problems").clone();
    let problems: Vec<&str> = problems.iter().filter_map(|p| p.as_str()).collect();
    assert!(problems.iter().any(|p| p.contains("\"colour\"")), "{reply}");
    assert!(
        problems.iter().any(|p| p.contains("\"dedup_key\"")),
        "{reply}"
    );
    assert!(
        problems.iter().any(|p| p.contains("\"batch_row\"")),
        "{reply}"
    );
    server.stop();
}

/// In the service: a destination whose URI carries `user:secretpass@`
/// (nothing listens there): its connection test, the run's error, the
/// run's log and the service's log show the URL redacted.
#[test]
fn secrets_a_password_in_the_catalog_uri_is_redacted_in_the_service() {
    let dir = temp_data_dir();
    let mut server = Server::start(&dir, Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    let source = json!({"name": "s", "bootstrap_servers": get("TESTBED_KAFKA_BOOTSTRAP"),
        "topic_pattern": format!("^{}$", unique_name("it_none"))});
    let sid = client
        .json("POST", "/api/sources", Some(&source))
        .expect(201)
        .json()["id"]
        .clone();
    let destination = json!({"name": "d", "catalog": "rest",
        "uri": "http://user:secretpass@127.0.0.1:9/api/catalog", "warehouse": "w",
        "credential": "id:secret"});
    let did = client
        .json("POST", "/api/destinations", Some(&destination))
        .expect(201)
        .json()["id"]
        .clone();
    let test = client
        .json("POST", &format!("/api/destinations/{did}/test"), None)
        .expect(200)
        .json();
    assert_eq!(test["ok"], false, "{test}");
    let job = json!({"name": unique_name("it_redact"), "source_id": sid, "destination_id": did});
    let jid = client
        .json("POST", "/api/jobs", Some(&job))
        .expect(201)
        .json()["id"]
        .clone();
    let run_id = client
        .json("POST", &format!("/api/jobs/{jid}/sync"), None)
        .expect(202)
        .json()["run_id"]
        .clone();
    let run = client.poll(
        &format!("/api/runs/{run_id}"),
        Duration::from_secs(120),
        |v| v["status"] != "running",
    );
    assert_eq!(run["status"], "failed", "{run}");
    let log = client
        .get(&format!("/api/runs/{run_id}/log"))
        .expect(200)
        .body;
    let expected = "http://user:***@127.0.0.1:9/api/catalog/v1/oauth/tokens";
    assert!(test.to_string().contains(expected), "{test}");
    assert!(run.to_string().contains(expected), "{run}");
    for body in client.seen.borrow().iter() {
        assert!(!body.contains("secretpass"), "leaked: {body}");
    }
    assert!(!log.contains("secretpass"), "{log}");
    server.stop();
    assert!(!server.log().contains("secretpass"), "{}", server.log());
}
