//! Which storage credentials a sync writes with, in the order
//! docs/src/how-to/storage-credentials.md gives: the job file's keys, credentials the catalog vends, the
//! environment's default chain; and `check` saying which is in use.

use serde_json::Value;

use crate::support::{
    create_topic, produce, read_lines, table_report, versioned_messages, Catalog, Job,
};
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
pub(crate) fn job_with_destination(topics: &[&str], destination: &str, extra: &str) -> Job {
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

#[test]
fn nessie_signs_every_s3_request_append_and_upsert_read_back_by_pyiceberg_and_spark() {
    let appended = unique_name("nessie_append");
    let upserted = unique_name("nessie_upsert");
    for t in [&appended, &upserted] {
        create_topic(t, 2);
        produce(t, &versioned_messages(0..20, "a"));
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
        produce(t, &versioned_messages(10..30, "b"));
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

pub(crate) fn vending_destination(uri: &str) -> String {
    format!(
        "catalog = \"rest\"\nuri = \"{uri}\"\nwarehouse = \"{}\"\ncredential = \"{}\"\noauth2_server_uri = \"{uri}/v1/oauth/tokens\"\nscope = \"{}\"\n",
        get("TESTBED_VENDING_WAREHOUSE"),
        get("TESTBED_VENDING_CREDENTIAL"),
        get("TESTBED_VENDING_SCOPE"),
    )
}

/// Pauses a sync before its commit; returns it with its report, log and
/// the file that releases it.
fn paused_sync(
    job: &Job,
) -> (
    crate::support::Running,
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let release = job.scratch_file("release");
    let pause = format!("before_iceberg_commit:{}", release.display());
    let report = job.scratch_file("report.json");
    let log = job.scratch_file("sync.log");
    let child = job.spawn_sync_with(&report, &log, &[("TOPICBERG_PAUSE", pause.as_str())]);
    let ready = release.with_extension("ready");
    crate::support::wait_until(
        "the sync to reach its commit",
        std::time::Duration::from_secs(120),
        || ready.exists(),
    );
    (child, report, log, release)
}

#[test]
fn vended_credentials_are_renewed_during_a_sync_longer_than_their_life_and_fail_clearly_when_they_cannot_be(
) {
    let renewed_topic = unique_name("vended_renew");
    let refused_topic = unique_name("vended_refused");
    for t in [&renewed_topic, &refused_topic] {
        create_topic(t, 1);
        produce(t, &versioned_messages(0..20, "a"));
    }
    let upsert = |t: &str| {
        format!("[[streams]]\ntopic = \"{t}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n")
    };
    let uri = get("TESTBED_VENDING_URI");
    let renewed = job_with_destination(
        &[&renewed_topic],
        &vending_destination(&uri),
        &upsert(&renewed_topic),
    );
    let proxy = crate::fault_proxy::FaultProxy::start(&uri.replace("/api/catalog", ""));
    let proxied = format!("{}/api/catalog", proxy.uri);
    let refused = job_with_destination(
        &[&refused_topic],
        &vending_destination(&proxied),
        &upsert(&refused_topic),
    );
    let check = renewed.run("check", &[], &[]);
    let out = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        out.contains("credentials vended by the catalog, expiring"),
        "{out}"
    );
    renewed.sync();
    refused.sync();
    for t in [&renewed_topic, &refused_topic] {
        produce(t, &versioned_messages(10..30, "b"));
    }
    // Both syncs load their tables (and credentials), drain, and wait at
    // their commit until every credential vended before has expired.
    let (mut a, a_report, a_log, a_release) = paused_sync(&renewed);
    let (mut b, b_report, _b_log, b_release) = paused_sync(&refused);
    // The scenario is time passing: the credentials both syncs hold were
    // vended before they paused, so they are all expired a TTL later.
    let ttl: u64 = get("TESTBED_VENDING_TTL_S").parse().unwrap();
    let expired = std::time::Instant::now() + std::time::Duration::from_secs(ttl + 5);
    crate::support::wait_until(
        "the vended credentials to expire",
        std::time::Duration::from_secs(ttl + 30),
        || std::time::Instant::now() >= expired,
    );
    // The refused job's catalog now answers nothing about credentials.
    proxy.add(
        crate::fault_proxy::Rule::new(crate::fault_proxy::Fault::Status(503))
            .path_contains("/tables/")
            .until_reset(),
    );
    std::fs::write(&a_release, "").unwrap();
    std::fs::write(&b_release, "").unwrap();

    assert!(
        a.wait().unwrap().success(),
        "{}",
        std::fs::read_to_string(&a_log).unwrap()
    );
    let log = std::fs::read_to_string(&a_log).unwrap();
    assert!(
        log.contains("storage credentials renewed from the catalog"),
        "{log}"
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&a_report).unwrap()).unwrap();
    assert_eq!(
        table_report(&report, &renewed.table(&renewed_topic))["records"],
        20
    );
    let rows = read_named("pyiceberg", "vending", &renewed.table(&renewed_topic));
    assert_eq!(rows.lines().count(), 30);
    assert_eq!(
        rows,
        read_named("spark", "vending", &renewed.table(&renewed_topic))
    );

    assert!(!b.wait().unwrap().success());
    let report: Value = serde_json::from_slice(&std::fs::read(&b_report).unwrap()).unwrap();
    let t = table_report(&report, &refused.table(&refused_topic));
    assert_eq!(t["status"], "failed", "{t}");
    let error = t["error"].as_str().unwrap();
    assert!(
        error.contains("expired and could not be renewed"),
        "{error}"
    );
    proxy.reset();
    let rows = read_named("pyiceberg", "vending", &refused.table(&refused_topic));
    assert_eq!(
        rows.lines().count(),
        20,
        "nothing of the failed sync is committed"
    );
}

#[test]
fn unity_contract_bearer_token_v3_deletion_vectors_and_other_deletes_refused() {
    let dv_topic = unique_name("unity_dv");
    let eq_topic = unique_name("unity_eq");
    for t in [&dv_topic, &eq_topic] {
        create_topic(t, 1);
        produce(t, &versioned_messages(0..20, "a"));
    }
    let destination = format!(
        "catalog = \"rest\"\nuri = \"{}\"\nwarehouse = \"{}\"\ntoken = \"{}\"\nformat_version = 3\n",
        get("TESTBED_UNITY_URI"),
        get("TESTBED_UNITY_WAREHOUSE"),
        get("TESTBED_UNITY_TOKEN"),
    );
    let upsert = |t: &str, extra: &str| {
        format!("[[streams]]\ntopic = \"{t}\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n{extra}")
    };
    // Deletion vectors, as target_engines = ["databricks"] chooses.
    let dv = job_with_destination(&[&dv_topic], &destination, &upsert(&dv_topic, ""));
    let text = std::fs::read_to_string(&dv.path).unwrap();
    std::fs::write(
        &dv.path,
        text.replacen('\n', "\ntarget_engines = [\"databricks\"]\n", 1),
    )
    .unwrap();
    // Equality deletes, which Unity refuses.
    let eq = job_with_destination(
        &[&eq_topic],
        &destination,
        &upsert(&eq_topic, "delete_format = \"equality\"\n"),
    );
    dv.sync();
    eq.sync();
    for t in [&dv_topic, &eq_topic] {
        produce(t, &versioned_messages(10..30, "b"));
    }
    let report = dv.sync();
    let t = table_report(&report, &dv.table(&dv_topic));
    assert_eq!(t["commit"]["addedDVs"], 1, "{t}");
    let rows = read_named("pyiceberg", "unity", &dv.table(&dv_topic));
    assert_eq!(rows.lines().count(), 30);
    assert_eq!(rows, read_named("spark", "unity", &dv.table(&dv_topic)));

    let path = eq.scratch_file("report.json");
    let out = eq.run("sync", &["--report-json", path.to_str().unwrap()], &[]);
    assert!(!out.status.success(), "the equality-delete table fails");
    let report: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let t = table_report(&report, &eq.table(&eq_topic));
    assert_eq!(t["status"], "failed", "{t}");
    assert!(
        t["error"].as_str().unwrap().contains("deletion vectors"),
        "{t}"
    );
    assert_eq!(
        read_named("pyiceberg", "unity", &eq.table(&eq_topic))
            .lines()
            .count(),
        20
    );
}

/// A CA and a certificate for 127.0.0.1 it signed, made with openssl in
/// `dir`: (ca.pem, cert.pem, key.pem).
fn private_ca(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let run = |args: &[&str]| {
        let out = crate::testbed::command("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=topicberg test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "key.pem",
        "-out",
        "cert.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "cert.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "cert.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    )
}

/// A TLS front (socat) for the plain-HTTP `upstream` (`http://host:port`);
/// killed on drop.
struct TlsFront {
    child: std::process::Child,
    url: String,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_front(upstream: &str, cert: &std::path::Path, key: &std::path::Path) -> TlsFront {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let target = upstream.trim_start_matches("http://").trim_end_matches('/');
    let child = crate::testbed::command("socat")
        .arg(format!(
            "OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,verify=0,cert={},key={}",
            cert.display(),
            key.display()
        ))
        .arg(format!("TCP:{target}"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("socat");
    crate::support::wait_until(
        "the TLS front to listen",
        std::time::Duration::from_secs(20),
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    TlsFront {
        child,
        url: format!("https://127.0.0.1:{port}"),
    }
}

#[test]
fn a_catalog_and_store_behind_a_private_ca_need_ca_pem_and_say_so_without_it() {
    let topic = unique_name("private_ca");
    create_topic(&topic, 1);
    produce(&topic, &versioned_messages(0..10, "a"));
    let dir = std::env::temp_dir().join(unique_name("ca"));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, cert, key) = private_ca(&dir);
    let catalog = tls_front(&get("TESTBED_FIXTURE_URI"), &cert, &key);
    let store = tls_front(&get("TESTBED_S3_ENDPOINT"), &cert, &key);
    let destination = |ca: Option<&std::path::Path>| {
        format!(
            "catalog = \"rest\"\nuri = \"{}\"\nwarehouse = \"{}\"\ncredential = \"{}\"\n\
             s3_endpoint = \"{}\"\ns3_region = \"us-east-1\"\ns3_access_key = \"{}\"\n\
             s3_secret_key = \"{}\"\n{}",
            catalog.url,
            get("TESTBED_FIXTURE_WAREHOUSE"),
            get("TESTBED_FIXTURE_CREDENTIAL"),
            store.url,
            get("TESTBED_S3_ACCESS_KEY"),
            get("TESTBED_S3_SECRET_KEY"),
            ca.map(|p| format!("ca_pem = \"{}\"\n", p.display()))
                .unwrap_or_default(),
        )
    };
    let without = job_with_destination(&[&topic], &destination(None), "");
    let check = without.run("check", &[], &[]);
    let out = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(!check.status.success(), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("catalog"))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.starts_with("FAIL") && line.contains("destination.ca_pem"),
        "{out}"
    );

    let with = job_with_destination(&[&topic], &destination(Some(&ca)), "");
    let check = with.run("check", &[], &[]);
    let out = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(out.contains("wrote s3://"), "{out}");
    let report = with.sync();
    let table = with.table(&topic);
    assert_eq!(table_report(&report, &table)["records"], 10);
    assert_eq!(
        read_lines("duckdb", Catalog::Fixture, &table)
            .lines()
            .count(),
        10
    );
}
