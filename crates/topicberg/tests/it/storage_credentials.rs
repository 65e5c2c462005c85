//! Which storage credentials a sync writes with, in the order README
//! gives: the job file's keys, credentials the catalog vends, the
//! environment's default chain; and `check` saying which is in use.

use serde_json::Value;

use crate::support::{create_topic, produce, read_lines, table_report, Catalog, Job};
use crate::testbed::{get, unique_name};

/// The job file without its S3 keys.
fn without_keys(job: &Job) {
    let text = std::fs::read_to_string(&job.path).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("s3_access_key") && !l.starts_with("s3_secret_key"))
        .collect();
    std::fs::write(&job.path, kept.join("\n") + "\n").unwrap();
}

fn aws_env() -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID", get("TESTBED_S3_ACCESS_KEY")),
        ("AWS_SECRET_ACCESS_KEY", get("TESTBED_S3_SECRET_KEY")),
    ]
}

#[test]
fn without_keys_in_the_job_the_environment_chain_signs_and_check_says_so() {
    let topic = unique_name("env_credentials");
    create_topic(&topic, 1);
    let messages: Vec<(String, String)> = (0..10)
        .map(|i| (i.to_string(), format!(r#"{{"id":{i},"name":"n{i}"}}"#)))
        .collect();
    produce(&topic, &messages);
    let job = Job::new(Catalog::Fixture, &[&topic], "", "");
    without_keys(&job);
    let env = aws_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    let check = job.run("check", &[], &env);
    let out = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let line = out
        .lines()
        .find(|l| l.contains("storage credentials"))
        .unwrap_or_else(|| panic!("no storage credentials line: {out}"));
    assert!(line.contains("environment's default chain"), "{line}");

    let report = job.scratch_file("report.json");
    let sync = job.run("sync", &["--report-json", report.to_str().unwrap()], &env);
    assert!(
        sync.status.success(),
        "{}",
        String::from_utf8_lossy(&sync.stderr)
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let table = job.table(&topic);
    assert_eq!(table_report(&report, &table)["records"], 10);
    assert_eq!(
        read_lines("duckdb", Catalog::Fixture, &table)
            .lines()
            .count(),
        10
    );
    let secret = get("TESTBED_S3_SECRET_KEY");
    let logged = String::from_utf8_lossy(&sync.stderr);
    assert!(!logged.contains(&secret) && !out.contains(&secret));
}
