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

/// A job whose `[destination]` is `destination` (the rest of the file as
/// `Job::new` writes it).
fn job_with_destination(topics: &[&str], destination: &str, extra: &str) -> Job {
    let job = Job::new(Catalog::Seaweed, topics, "", "");
    let text = std::fs::read_to_string(&job.path).unwrap();
    let source = text.split("[destination]").next().unwrap();
    std::fs::write(
        &job.path,
        format!("{source}[destination]\n{destination}\n{extra}"),
    )
    .unwrap();
    job
}

/// Reads a table through a test-bed catalog by name (`nessie`, `vending`,
/// `unity`).
fn read_named(engine: &str, catalog: &str, table: &str) -> String {
    let read = format!("{}/read", get("TESTBED_READERS"));
    let out = crate::testbed::command(&read)
        .args([engine, "--catalog", catalog, table])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{engine} --catalog {catalog} {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn messages(ids: std::ops::Range<i64>, version: &str) -> Vec<(String, String)> {
    ids.map(|i| (i.to_string(), format!(r#"{{"id":{i},"v":"{version}{i}"}}"#)))
        .collect()
}

#[test]
fn nessie_signs_every_s3_request_append_and_upsert_read_back_by_pyiceberg_and_spark() {
    let appended = unique_name("nessie_append");
    let upserted = unique_name("nessie_upsert");
    for t in [&appended, &upserted] {
        create_topic(t, 2);
        produce(t, &messages(0..20, "a"));
    }
    let destination = format!(
        "catalog = \"rest\"\nuri = \"{}\"\nwarehouse = \"{}\"\n",
        get("TESTBED_NESSIE_URI"),
        get("TESTBED_NESSIE_WAREHOUSE")
    );
    let streams =
        format!("[[streams]]\ntopic = \"{upserted}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n");
    let job = job_with_destination(&[&appended, &upserted], &destination, &streams);
    let check = job.run("check", &[], &[]);
    let out = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(check.status.success(), "{out}");
    assert!(
        out.contains("requests signed by the catalog (remote signing"),
        "{out}"
    );
    assert!(
        !out.contains("s3sign/H4s"),
        "the signer's token is not printed: {out}"
    );
    job.sync();
    for t in [&appended, &upserted] {
        produce(t, &messages(10..30, "b"));
    }
    let report = job.sync();
    let upsert_table = job.table(&upserted);
    let t = table_report(&report, &upsert_table);
    assert_eq!(t["commit"]["addedPositionalDeletes"], 10, "{t}");
    for (topic, rows) in [(&appended, 40), (&upserted, 30)] {
        let table = job.table(topic);
        let pyiceberg = read_named("pyiceberg", "nessie", &table);
        let spark = read_named("spark", "nessie", &table);
        assert_eq!(pyiceberg, spark, "{table}");
        assert_eq!(pyiceberg.lines().count(), rows, "{table}");
    }
    let upsert_rows = read_named("pyiceberg", "nessie", &upsert_table);
    let latest: Vec<Value> = upsert_rows
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &Value| (10..20).contains(&r["id"].as_i64().unwrap()))
        .collect();
    assert!(latest
        .iter()
        .all(|r| r["v"].as_str().unwrap().starts_with('b')));
}
