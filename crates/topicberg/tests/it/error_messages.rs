//! Golden tests of the 30 messages users meet most, across the product:
//! job-file problems, Kafka, the catalog, storage, the schema registry,
//! invalid messages, overlapping syncs and the service's refusals. Each is
//! made through the path a user takes (the `topicberg` binary on a job
//! file, or the service's API) against the test bed's real servers, and the
//! WHOLE message is compared with its exact text. Only what changes from
//! run to run is masked ([`mask`]): generated names, test-bed addresses,
//! temporary paths, durations. A change of wording fails here: these
//! messages are meant to stay as good as they are.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::serve_support::{temp_data_dir, Client, Server, ADMIN_PASSWORD};
use crate::support::{
    create_topic, create_topic_on, produce, table_report, wait_until, Catalog, Job,
};
use crate::sync_invalid::produce_raw;
use crate::testbed::{get, unique_name};
use mask::mask;

mod mask;

/// Asserts `actual`, masked, is exactly `expected`; shows both otherwise.
#[track_caller]
fn assert_message(actual: &str, extra: &[(&str, &str)], expected: &str) {
    let masked = mask(actual, extra);
    assert!(
        masked == expected,
        "the message changed.\n--- expected:\n{expected}\n--- actual (masked):\n{masked}\n--- actual:\n{actual}\n---"
    );
}

// --- running the binary ---

/// Runs `topicberg <command> -c <job>` with the log off (stderr holds only
/// the error a command ends with) and `env`.
fn run(job: &Job, command: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut env = env.to_vec();
    env.push(("TOPICBERG_LOG", "off"));
    job.run(command, args, &env)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A job file of `text` in a fresh folder (`${...}` in `text` is literal).
fn job_file(text: &str) -> Job {
    let name = unique_name("golden");
    let dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("job.toml");
    std::fs::write(&path, text).unwrap();
    Job { name, path }
}

/// A job file with `streams` appended to a valid job (embedded catalog,
/// nothing contacted before validation); `top` goes before `[source]`.
fn job_file_with(top: &str, streams: &str) -> Job {
    job_file(&format!(
        "name = \"golden_job\"\n{top}[source]\nbootstrap_servers = \"127.0.0.1:9\"\n\
         topic_pattern = \"^orders$\"\n[destination]\ncatalog = \"sql\"\npath = \"warehouse\"\n{streams}"
    ))
}

/// Runs `check` on a job file that does not load: exit code 2 and the
/// error on stderr.
fn refused_job_file(job: &Job) -> String {
    let out = run(job, "check", &[], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");
    stderr(&out)
}

fn job_path(job: &Job) -> String {
    job.path.display().to_string()
}

// --- job files ---

#[test]
fn error_messages_job_file_unknown_key_names_its_near_match() {
    let job = job_file_with(
        "",
        "[[streams]]\ntopic = \"orders\"\nmode = \"upsert\"\ndedup_key = [\"id\"]\n",
    );
    assert_message(
        &refused_job_file(&job),
        &[(&job_path(&job), "<job>")],
        r#"error: <job> is not a valid job file (2 problems):
  - [[streams]] #1: unknown field "dedup_key", did you mean "dedup_keys"? (line 11; rename or remove it)
  - streams[0].dedup_keys: upsert stream "orders" needs dedup_keys: the payload field(s) that identify a row, e.g. dedup_keys = ["id"], or ["_kafka_key"] to key on the message key
"#,
    );
}

#[test]
fn error_messages_job_file_missing_required_field() {
    let job = job_file(
        "name = \"golden_job\"\n[source]\ntopic_pattern = \"^orders$\"\n[destination]\ncatalog = \"sql\"\n",
    );
    assert_message(
        &refused_job_file(&job),
        &[(&job_path(&job), "<job>")],
        r#"error: <job>: line 2, column 1: missing field `bootstrap_servers` (in [source])
"#,
    );
}

#[test]
fn error_messages_job_file_bad_stream_mode() {
    let job = job_file_with("", "[[streams]]\ntopic = \"orders\"\nmode = \"upsrt\"\n");
    assert_message(
        &refused_job_file(&job),
        &[(&job_path(&job), "<job>")],
        r#"error: <job>: line 10, column 8: unknown variant `upsrt`, expected `append` or `upsert` (in [streams.mode])
"#,
    );
}

#[test]
fn error_messages_job_file_bad_format_version() {
    let job = job_file_with("", "format_version = 4\n");
    assert_message(
        &refused_job_file(&job),
        &[(&job_path(&job), "<job>")],
        r#"error: <job> is not a valid job file (1 problem):
  - destination.format_version: is 4; Iceberg format version must be 2 or 3
"#,
    );
}

#[test]
fn error_messages_job_file_delete_format_no_target_engine_reads() {
    let job = job_file_with(
        "target_engines = [\"databricks\", \"spark\"]\n",
        "[[streams]]\ntopic = \"orders\"\nmode = \"upsert\"\ndedup_keys = [\"id\"]\n\
         delete_format = \"equality\"\n",
    );
    assert_message(
        &refused_job_file(&job),
        &[(&job_path(&job), "<job>")],
        r#"error: <job> is not a valid job file (1 problem):
  - streams[0].delete_format: delete_format "equality" (equality deletes on format v2) cannot be read by databricks (reads only deletion vectors (v3)); remove databricks from target_engines, or set delete_format = "dv" (or remove delete_format to let target_engines decide)
"#,
    );
}

#[test]
fn error_messages_job_file_bad_partition_by() {
    let job = job_file_with(
        "",
        "[[streams]]\ntopic = \"orders\"\npartition_by = [\"day(ts\", \"bucket(0, id)\"]\n",
    );
    assert_message(
        &refused_job_file(&job),
        &[(&job_path(&job), "<job>")],
        r#"error: <job> is not a valid job file (2 problems):
  - streams[0].partition_by: "day(ts" is not a transform of a column; write one of identity(col), bucket(N, col), truncate(W, col), year(col), month(col), day(col), hour(col)
  - streams[0].partition_by: "bucket(0, id)": bucket's first argument must be a positive whole number, e.g. bucket(16, id)
"#,
    );
}

#[test]
fn error_messages_job_file_bad_sort_by() {
    let job = job_file_with(
        "",
        "[[streams]]\ntopic = \"orders\"\nsort_by = [\"ts sideways\"]\n",
    );
    assert_message(
        &refused_job_file(&job),
        &[(&job_path(&job), "<job>")],
        r#"error: <job> is not a valid job file (1 problem):
  - streams[0].sort_by: "ts sideways" is not a sort key; write "column", "column asc" or "column desc", optionally followed by "nulls first" or "nulls last"
"#,
    );
}

#[test]
fn error_messages_job_file_environment_variable_not_set() {
    let job = job_file(
        "name = \"golden_job\"\n[source]\nbootstrap_servers = \"127.0.0.1:9\"\n\
         topic_pattern = \"^orders$\"\nsasl_password = \"${GOLDEN_UNSET_PASSWORD}\"\n\
         security_protocol = \"SASL_PLAINTEXT\"\nsasl_mechanism = \"PLAIN\"\nsasl_username = \"u\"\n",
    );
    assert_message(
        &refused_job_file(&job),
        &[(&job_path(&job), "<job>")],
        r#"error: <job> is not a valid job file (1 problem):
  - source.sasl_password: environment variable GOLDEN_UNSET_PASSWORD is not set (line 5); export GOLDEN_UNSET_PASSWORD, or write $${ for a literal ${
"#,
    );
}

// --- Kafka ---

/// `check`'s whole output (stdout: one line per step); the check must
/// fail (exit code 1).
fn failed_check(job: &Job) -> String {
    let out = run(job, "check", &[], &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// A job reading `topics` from `bootstrap` into the embedded catalog, with
/// `source` lines added to `[source]`.
fn kafka_job(bootstrap: &str, source: &str, topics: &[&str]) -> Job {
    let job = Job::embedded(topics);
    job.set_bootstrap(bootstrap);
    let text = std::fs::read_to_string(&job.path).unwrap().replacen(
        "max_threads = 3\n",
        &format!("max_threads = 3\n{source}"),
        1,
    );
    std::fs::write(&job.path, text).unwrap();
    job
}

/// Nothing listens at the bootstrap address: the connection is refused,
/// and the check fails at once (within `source.connect_timeout`), naming
/// the address and why.
#[test]
fn error_messages_kafka_unreachable() {
    let job = kafka_job("127.0.0.1:9", "", &["orders"]);
    let started = std::time::Instant::now();
    let failure = failed_check(&job);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{failure}"
    );
    assert_message(
        &failure,
        &[],
        r#"FAIL  kafka         failed to ping kafka brokers: no bootstrap server accepted a connection within 10 s (source.connect_timeout): 127.0.0.1:9: Connection refused (os error 111) (check bootstrap_servers and that the brokers advertise an address this machine can reach)
"#,
    );
}

#[test]
fn error_messages_kafka_wrong_sasl_password() {
    let source = format!(
        "security_protocol = \"SASL_PLAINTEXT\"\nsasl_mechanism = \"SCRAM-SHA-512\"\n\
         sasl_username = \"{}\"\nsasl_password = \"wrong-password\"\n",
        get("TESTBED_KAFKA_SCRAM_USER")
    );
    let job = kafka_job(&get("TESTBED_KAFKA_SASL_BOOTSTRAP"), &source, &["orders"]);
    assert_message(
        &failed_check(&job),
        &[],
        r#"FAIL  kafka         failed to ping kafka brokers: authentication failed for user "tb-scram" with mechanism SCRAM-SHA-512 on bootstrap <kafka-sasl> (SASL_PLAINTEXT): [thrd:sasl_plaintext://<kafka-sasl>/bootstrap]: sasl_plaintext://<kafka-sasl>/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after <n>ms in state AUTH_REQ); check sasl_username and sasl_password (and that the brokers enable sasl_mechanism SCRAM-SHA-512)
"#,
    );
}

#[test]
fn error_messages_kafka_tls_certificate_of_an_unknown_ca() {
    let source = format!(
        "security_protocol = \"SSL\"\nssl_ca_pem = \"{}\"\n",
        get("TESTBED_KAFKA_TLS_OTHER_CA")
    );
    let job = kafka_job(&get("TESTBED_KAFKA_TLS_BOOTSTRAP"), &source, &["orders"]);
    assert_message(
        &failed_check(&job),
        &[],
        r#"FAIL  kafka         failed to ping kafka brokers: TLS handshake failed with <kafka-tls>: the broker's certificate is signed by an unknown CA (self-signed certificate in certificate chain); set ssl_ca_pem to the CA certificate that signed the brokers' certificates (PEM text or the path of its file) - the one set did not sign them
"#,
    );
}

/// The test bed's ACLs deny `tls_denied*` topics to every user.
#[test]
fn error_messages_kafka_topic_not_authorized() {
    let admin =
        topicberg_kafka::KafkaConnection::plaintext(get("TESTBED_KAFKA_TLS_ADMIN_BOOTSTRAP"));
    let topic = unique_name(&format!("{}_topic", get("TESTBED_KAFKA_TLS_DENIED_PREFIX")));
    create_topic_on(&admin, &topic, 1);
    let source = format!(
        "security_protocol = \"SASL_SSL\"\nssl_ca_pem = \"{}\"\nsasl_mechanism = \"SCRAM-SHA-512\"\n\
         sasl_username = \"{}\"\nsasl_password = \"{}\"\n",
        get("TESTBED_KAFKA_TLS_CA"),
        get("TESTBED_KAFKA_SCRAM_USER"),
        get("TESTBED_KAFKA_SCRAM_PASSWORD"),
    );
    let job = kafka_job(&get("TESTBED_KAFKA_SASL_SSL_BOOTSTRAP"), &source, &[&topic]);
    let out = run(&job, "sync", &[], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_message(
        &stderr(&out),
        &[],
        r#"error: describing topic tls_denied_topic_<hex>: not authorized: the cluster's ACLs do not let user "tb-scram" describe topic tls_denied_topic_<hex> (TOPIC_AUTHORIZATION_FAILED); ask the cluster's admin to allow DESCRIBE and READ on topic tls_denied_topic_<hex> for this principal, or leave the topic out of topic_pattern
"#,
    );
}

// --- catalog and storage ---

/// A Seaweed job whose destination has `from` replaced by `to`.
fn seaweed_job_with(from: &str, to: &str) -> Job {
    // An empty topic: `check` fails a topic the cluster lacks.
    let topic = unique_name("golden_empty");
    create_topic(&topic, 1);
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    let text = std::fs::read_to_string(&job.path).unwrap();
    assert!(text.contains(from), "{text}");
    std::fs::write(&job.path, text.replace(from, to)).unwrap();
    job
}

/// Retried 4 times (3.5 s) before `check` names it.
#[test]
fn error_messages_catalog_unreachable() {
    let job = seaweed_job_with(&get("TESTBED_SEAWEED_URI"), "http://127.0.0.1:9");
    assert_message(
        &failed_check(&job),
        &[],
        r#"ok    kafka         1 broker(s) answered at <kafka>
ok    topics        1 topic(s) match: golden_empty_<hex>
ok    consumer group group topicberg_it_job_<hex> and 1 partition(s)' offsets readable
FAIL  catalog       token exchange at http://127.0.0.1:9/v1/oauth/tokens: the catalog's token endpoint is unreachable: error sending request for url (http://127.0.0.1:9/v1/oauth/tokens): client error (Connect): tcp connect error: Connection refused (os error 111) (gave up after 4 attempts in <n> s)
"#,
    );
}

#[test]
fn error_messages_catalog_credential_refused() {
    let credential = get("TESTBED_SEAWEED_CREDENTIAL");
    let id = credential.split(':').next().unwrap();
    let job = seaweed_job_with(&credential, &format!("{id}:wrong-secret"));
    assert_message(
        &failed_check(&job),
        &[],
        r#"ok    kafka         1 broker(s) answered at <kafka>
ok    topics        1 topic(s) match: golden_empty_<hex>
ok    consumer group group topicberg_it_job_<hex> and 1 partition(s)' offsets readable
FAIL  catalog       token exchange at <seaweed>/v1/oauth/tokens: HTTP 401 Unauthorized: invalid_client: Invalid client credentials (check the client id and secret) (wrong client id or secret)
"#,
    );
}

/// SeaweedFS has no such table bucket: its namespace cannot be created.
#[test]
fn error_messages_catalog_warehouse_namespace_does_not_exist() {
    let warehouse = get("TESTBED_SEAWEED_WAREHOUSE");
    let job = seaweed_job_with(
        &format!("warehouse = \"{warehouse}\""),
        "warehouse = \"golden-no-such-bucket\"",
    );
    assert_message(
        &failed_check(&job),
        &[],
        r#"ok    kafka         1 broker(s) answered at <kafka>
ok    topics        1 topic(s) match: golden_empty_<hex>
ok    consumer group group topicberg_it_job_<hex> and 1 partition(s)' offsets readable
ok    catalog       credential exchanged, catalog configuration read
FAIL  create table  creating namespace it_job_<hex>_topics (POST <seaweed>/v1/golden-no-such-bucket/namespaces): HTTP 404 Not Found: NoSuchNamespaceException: table bucket golden-no-such-bucket not found: each table bucket is a separate catalog, select one with warehouse=s3://<table-bucket>/ or /v1/<table-bucket>/ (check the catalog URI and warehouse name) (check the warehouse name)
"#,
    );
}

#[test]
fn error_messages_storage_refuses_the_secret_key() {
    let job = seaweed_job_with("${TESTBED_S3_SECRET_KEY}", "wrong-secret-key");
    assert_message(
        &failed_check(&job),
        &[],
        r#"ok    kafka         1 broker(s) answered at <kafka>
ok    topics        1 topic(s) match: golden_empty_<hex>
ok    consumer group group topicberg_it_job_<hex> and 1 partition(s)' offsets readable
ok    catalog       credential exchanged, catalog configuration read
ok    create table  created it_job_<hex>_topics.topicberg_check_<hex>
ok    storage credentials the job file's keys (s3_access_key, s3_secret_key)
FAIL  write file    closing data files of s3://lakehouse/it_job_<hex>_topics/topicberg_check_<hex>: Failed to finish parquet writer.: External: Unexpected => writing s3://lakehouse/it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet: The operation lacked the necessary privileges to complete for path it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet: Error performing PUT <s3>/lakehouse/it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet in <n>ms - Server returned non-2xx status code: 403 Forbidden: <?xml version="1.0" encoding="UTF-8"?>: writing s3://lakehouse/it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet: The operation lacked the necessary privileges to complete for path it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet: Error performing PUT <s3>/lakehouse/it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet in <n>ms - Server returned non-2xx status code: 403 Forbidden: <?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match the signature you provided. Check your key and signing method.</Message><Resource>/lakehouse/it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet</Resource><RequestId><n></RequestId><Key>it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet</Key><BucketName>lakehouse</BucketName></Error>: a transient storage failure (check s3_endpoint, s3_region, the storage credentials named above and that the bucket exists and is writable)
ok    drop table    dropped it_job_<hex>_topics.topicberg_check_<hex>
"#,
    );
}

// --- schema registry ---

/// Retried 5 times (7.5 s) before `check` names it.
#[test]
fn error_messages_schema_registry_unreachable() {
    let topic = unique_name("golden_empty");
    create_topic(&topic, 1);
    let job = kafka_job(
        &get("TESTBED_KAFKA_BOOTSTRAP"),
        "schema_registry_url = \"http://127.0.0.1:9\"\n",
        &[&topic],
    );
    assert_message(
        &failed_check(&job),
        &[],
        r#"ok    kafka         1 broker(s) answered at <kafka>
ok    topics        1 topic(s) match: golden_empty_<hex>
ok    consumer group group topicberg_it_job_<hex> and 1 partition(s)' offsets readable
FAIL  registry      schema registry http://127.0.0.1:9: GET /subjects: error sending request for url (http://127.0.0.1:9/subjects): client error (Connect): tcp connect error: Connection refused (os error 111) (gave up after 5 attempt(s) in <n> s) (check schema_registry_url and that the registry is running and reachable from this machine)
ok    catalog       embedded catalog opened
ok    create table  created it_job_<hex>_topics.topicberg_check_<hex>
ok    storage credentials a local folder (no credentials)
ok    write file    wrote file://<tmp>/it_job_<hex>/warehouse/it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet
ok    drop table    dropped it_job_<hex>_topics.topicberg_check_<hex>
"#,
    );
}

/// `value_format = "avro"` but the registry has no `<topic>-value`
/// subject: a warning of `check`, which succeeds.
#[test]
fn error_messages_schema_registry_subject_missing() {
    let topic = unique_name("golden_avro");
    create_topic(&topic, 1);
    let job = kafka_job(
        &get("TESTBED_KAFKA_BOOTSTRAP"),
        &format!(
            "schema_registry_url = \"{}\"\n",
            get("TESTBED_SCHEMA_REGISTRY_URL")
        ),
        &[&topic],
    );
    job.append(&format!(
        "[[streams]]\ntopic = \"{topic}\"\nvalue_format = \"avro\"\n"
    ));
    let out = run(&job, "check", &[], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_message(
        &stdout(&out),
        &[],
        r#"ok    kafka         1 broker(s) answered at <kafka>
ok    topics        1 topic(s) match: golden_avro_<hex>
ok    consumer group group topicberg_it_job_<hex> and 1 partition(s)' offsets readable
ok    registry      <registry> answered: <n> subject(s)
ok    format        golden_avro_<hex>: values avro (set in the job; no subject golden_avro_<hex>-value), keys auto
WARN  format        golden_avro_<hex>: value_format = "avro" but the registry has no subject golden_avro_<hex>-value; fine if the producers register under another subject name strategy (RecordNameStrategy, TopicRecordNameStrategy), otherwise check the topic name
ok    catalog       embedded catalog opened
ok    create table  created it_job_<hex>_topics.topicberg_check_<hex>
ok    storage credentials a local folder (no credentials)
ok    write file    wrote file://<tmp>/it_job_<hex>/warehouse/it_job_<hex>_topics/topicberg_check_<hex>/data/<uuid>-00000.parquet
ok    drop table    dropped it_job_<hex>_topics.topicberg_check_<hex>
"#,
    );
}

// --- messages and syncs ---

/// A sync's whole report text (stdout); it must end with exit code `code`.
fn sync_report(job: &Job, code: i32) -> String {
    let out = run(job, "sync", &[], &[]);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// A topic whose first message (offset 0) made the table, then
/// `messages` at offsets 1...; `stream` lines go into its `[[streams]]`.
fn synced_topic(stream: &str, messages: &[&str]) -> (Job, String) {
    let topic = unique_name("golden_msgs");
    create_topic(&topic, 1);
    let job = Job::embedded(&[&topic]);
    job.append(&format!("[[streams]]\ntopic = \"{topic}\"\n{stream}"));
    produce_raw(
        &topic,
        &[(
            Some(b"0".to_vec()),
            Some(br#"{"id": 0, "amount": 1.5}"#.to_vec()),
        )],
    );
    job.sync();
    let raw: Vec<_> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            (
                Some(format!("{}", i + 1).into_bytes()),
                Some(m.as_bytes().to_vec()),
            )
        })
        .collect();
    produce_raw(&topic, &raw);
    (job, topic)
}

/// The default `on_invalid` ("fail"): the table stops at the first invalid
/// message, named by topic, partition and offset.
#[test]
fn error_messages_invalid_message_names_topic_partition_and_offset() {
    let (job, _) = synced_topic("", &[r#"{"id": 1, "amount": 2.5}"#, "{not json"]);
    assert_message(
        &sync_report(&job, 1),
        &[],
        r#"it_job_<hex>_topics.golden_msgs_<hex> failed     records=0 bytes=0 data_files=0 snapshot=- duration=<n>s
    error: golden_msgs_<hex>[0]@2: value is not JSON: key must be a string at line 1 column 2
sync FAILED in <n>s; consumer group topicberg_it_job_<hex> offsets not moved
"#,
    );
}

#[test]
fn error_messages_value_type_does_not_fit_its_column() {
    let (job, _) = synced_topic("", &[r#"{"id": 1, "amount": "lots"}"#]);
    assert_message(
        &sync_report(&job, 1),
        &[],
        r#"it_job_<hex>_topics.golden_msgs_<hex> failed     records=0 bytes=0 data_files=0 snapshot=- duration=<n>s
    error: golden_msgs_<hex>[0]@1: field "amount": expected double, found string "lots"
sync FAILED in <n>s; consumer group topicberg_it_job_<hex> offsets not moved
"#,
    );
}

/// `on_invalid = "fail"` on an upsert stream: a message without its dedup
/// key stops that table; the job's other table commits.
#[test]
fn error_messages_on_invalid_fail_stops_the_table_naming_the_field() {
    let (job, _) = synced_topic(
        "mode = \"upsert\"\ndedup_keys = [\"id\"]\non_invalid = \"fail\"\n",
        &[r#"{"id": null, "amount": 2.5}"#],
    );
    assert_message(
        &sync_report(&job, 1),
        &[],
        r#"it_job_<hex>_topics.golden_msgs_<hex> failed     records=0 bytes=0 data_files=0 snapshot=- duration=<n>s
    error: golden_msgs_<hex>[0]@1: field "id": dedup key value is null
sync FAILED in <n>s; consumer group topicberg_it_job_<hex> offsets not moved
"#,
    );
}

/// The job's lock is held (as by a sync still running on this machine):
/// the sync stops at once with exit code 75, naming the holder.
#[test]
fn error_messages_another_sync_holds_the_job_lock() {
    let job = Job::embedded(&[&unique_name("golden_none")]);
    let locks = job.path.with_file_name(".topicberg-state").join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let path = locks.join(format!("{}.lock", job.group()));
    let mut file = std::fs::File::create(&path).unwrap();
    std::io::Write::write_all(&mut file, b"pid 4242, started 2026-12-04T08:00:00Z").unwrap();
    file.try_lock().expect("the job's lock");
    let out = run(&job, "sync", &[], &[]);
    assert_eq!(out.status.code(), Some(75), "{}", stderr(&out));
    assert_message(
        &stderr(&out),
        &[(&job.name, "<job>")],
        r#"topicberg sync: another sync of this job (consumer group topicberg_<job>) is already running elsewhere on this machine (pid 4242, started 2026-12-04T08:00:00Z; lock <tmp>/<job>/.topicberg-state/locks/topicberg_<job>.lock); this run did nothing. That sync ends by itself; the next run goes on from where it stops
"#,
    );
    drop(file);
}

#[test]
fn error_messages_two_topics_into_one_table() {
    // Kafka refuses topics that differ only in `.` and `_`; upper and
    // lower case are two topics, and one table name.
    let base = unique_name("golden_twins");
    let (upper, lower) = (format!("{base}_Orders"), format!("{base}_orders"));
    create_topic(&upper, 1);
    create_topic(&lower, 1);
    let job = Job::embedded(&[&upper, &lower]);
    let out = run(&job, "sync", &[], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert_message(
        &stderr(&out),
        &[],
        r#"error: topics "golden_twins_<hex>_Orders" and "golden_twins_<hex>_orders" would both write table "golden_twins_<hex>_orders"; add a [[streams]] entry with a distinct `table = "..."` for one of them (or name the table in both entries to write it from both topics); nothing was read or written
"#,
    );
}

/// A sync paused before its commit while another sync of the job (another
/// state folder, as on another machine) commits the same messages.
#[test]
fn error_messages_commit_superseded_by_another_sync() {
    let topic = unique_name("golden_superseded");
    create_topic(&topic, 1);
    produce(
        &topic,
        &(0..5)
            .map(|i| (i.to_string(), format!(r#"{{"id":{i}}}"#)))
            .collect::<Vec<_>>(),
    );
    let job = Job::new(Catalog::Seaweed, &[&topic], "", "");
    let other_dir = job.path.parent().unwrap().join("other-machine");
    std::fs::create_dir_all(&other_dir).unwrap();
    let other = Job {
        name: job.name.clone(),
        path: other_dir.join("job.toml"),
    };
    std::fs::copy(&job.path, &other.path).unwrap();
    let release = job.scratch_file("release");
    let pause = format!("before_iceberg_commit:{}", release.display());
    let report = job.scratch_file("report.json");
    let log = job.scratch_file("sync.log");
    let mut paused = job.spawn_sync_with(&report, &log, &[("TOPICBERG_PAUSE", &pause)]);
    let ready = release.with_extension("ready");
    wait_until(
        "the paused sync to reach its commit",
        Duration::from_secs(120),
        || ready.exists(),
    );
    other.sync();
    std::fs::write(&release, b"").unwrap();
    assert!(
        paused.wait().unwrap().success(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let table = table_report(&report, &job.table(&topic));
    assert_eq!(table["status"], "superseded", "{table}");
    assert_message(
        table["note"].as_str().unwrap(),
        &[],
        r#"another sync of this job committed first (partition 0: offsets the start..5 (this sync read up to 5)); those messages are in the table already, so this sync's snapshot was not committed (it would duplicate them). The next sync goes on from the new offsets"#,
    );
}

// --- the service's API ---

/// A service with the admin password set, and a client logged in.
fn service() -> (Server, Client) {
    let server = Server::start(&temp_data_dir(), Some(ADMIN_PASSWORD));
    let mut client = server.client();
    client.login(ADMIN_PASSWORD).expect(200);
    (server, client)
}

/// Asserts an API answer: its status and its whole body.
#[track_caller]
fn assert_answer(reply: crate::serve_support::Reply, status: u16, expected: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_message(&reply.body, &[], expected);
}

#[test]
fn error_messages_serve_login_with_a_wrong_password() {
    let (server, _) = service();
    let mut client = server.client();
    assert_answer(
        client.login("not-the-password"),
        401,
        r#"{"error":"wrong username or password"}"#,
    );
}

#[test]
fn error_messages_serve_request_without_a_session() {
    let (server, _) = service();
    assert_answer(
        server.client().get("/api/jobs"),
        401,
        r#"{"error":"log in first: POST /api/login"}"#,
    );
}

#[test]
fn error_messages_serve_job_that_does_not_exist() {
    let (_server, client) = service();
    assert_answer(
        client.get("/api/jobs/4242"),
        404,
        r#"{"error":"job 4242 not found"}"#,
    );
}

#[test]
fn error_messages_serve_import_of_an_invalid_job_file() {
    let (_server, client) = service();
    let text = "name = \"golden_import\"\n[source]\nbootstrap_servers = \"127.0.0.1:9\"\n\
                topic_pattern = \"^t$\"\nmax_threads = 0\n[[streams]]\ntopic = \"t\"\n\
                mode = \"upsert\"\ndedup_key = [\"id\"]\n";
    assert_answer(
        client.post_text("/api/jobs/import", text),
        400,
        r#"{"error":"job is not a valid job file (3 problems):\n  - [[streams]] #1: unknown field \"dedup_key\", did you mean \"dedup_keys\"? (line 9; rename or remove it)\n  - source.max_threads: is 0; set at least 1 (partitions read in parallel)\n  - streams[0].dedup_keys: upsert stream \"t\" needs dedup_keys: the payload field(s) that identify a row, e.g. dedup_keys = [\"id\"], or [\"_kafka_key\"] to key on the message key","problems":["[[streams]] #1: unknown field \"dedup_key\", did you mean \"dedup_keys\"? (line 9; rename or remove it)","source.max_threads: is 0; set at least 1 (partitions read in parallel)","streams[0].dedup_keys: upsert stream \"t\" needs dedup_keys: the payload field(s) that identify a row, e.g. dedup_keys = [\"id\"], or [\"_kafka_key\"] to key on the message key"]}"#,
    );
}

#[test]
fn error_messages_serve_delete_of_a_source_a_job_uses() {
    let (_server, client) = service();
    let name = unique_name("golden");
    let job = Job::new(Catalog::Seaweed, &["orders"], "", "");
    let text = std::fs::read_to_string(&job.path)
        .unwrap()
        .replace(&job.name, &name);
    let imported = client
        .post_text("/api/jobs/import", &text)
        .expect(201)
        .json();
    let source = imported["source_id"].clone();
    assert_answer(
        client.json("DELETE", &format!("/api/sources/{source}"), None),
        409,
        r#"{"error":"source 1 is used by job(s) golden_<hex>; delete or change them first"}"#,
    );
}

/// The page of a table no sync has made yet (SeaweedFS answers 404).
#[test]
fn error_messages_serve_table_not_synced_yet() {
    let (_server, client) = service();
    let job = Job::new(Catalog::Seaweed, &["orders"], "", "");
    // The storage keys left out: the table's page asks the catalog only.
    let text: String = std::fs::read_to_string(&job.path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("s3_access_key") && !l.starts_with("s3_secret_key"))
        .map(|l| format!("{l}\n"))
        .collect();
    let imported = client
        .post_text("/api/jobs/import", &text)
        .expect(201)
        .json();
    let id = imported["id"].clone();
    assert_answer(
        client.get(&format!("/api/jobs/{id}/tables/orders")),
        404,
        r#"{"error":"table it_job_<hex>_topics.orders does not exist (yet)"}"#,
    );
}
