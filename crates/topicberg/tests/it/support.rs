//! Shared pieces of the end-to-end tests: topics with messages, job files,
//! running the real `topicberg` binary, reading tables with the readers.

use std::path::PathBuf;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;
use topicberg_kafka::KafkaConnection;

use crate::testbed::{command, get, repo_root, unique_name};

pub mod cdc;

/// The PLAINTEXT listener.
pub fn plaintext() -> KafkaConnection {
    KafkaConnection::plaintext(get("TESTBED_KAFKA_BOOTSTRAP"))
}

/// Creates a topic with `partitions` partitions.
pub fn create_topic(topic: &str, partitions: i32) {
    create_topic_with_config(topic, partitions, &[]);
}

/// Creates a topic whose messages are kept `retention_ms` milliseconds.
pub fn create_topic_with_retention(topic: &str, partitions: i32, retention_ms: i64) {
    create_topic_with_config(
        topic,
        partitions,
        &[("retention.ms", &retention_ms.to_string())],
    );
}

fn create_topic_with_config(topic: &str, partitions: i32, config: &[(&str, &str)]) {
    let admin: AdminClient<DefaultClientContext> =
        plaintext().client_config().create().expect("admin client");
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    for (key, value) in config {
        new_topic = new_topic.set(key, value);
    }
    let results = rt
        .block_on(admin.create_topics(&[new_topic], &options))
        .expect("create_topics request");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
}

/// Produces `(key, value)` messages (default partitioner: by key) and waits
/// until the broker acknowledged every one.
pub fn produce(topic: &str, messages: &[(String, String)]) {
    let producer: BaseProducer = plaintext().client_config().create().expect("producer");
    for (key, value) in messages {
        loop {
            match producer.send(BaseRecord::to(topic).key(key).payload(value)) {
                Ok(()) => break,
                Err((e, _)) if e.to_string().contains("QueueFull") => {
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => panic!("producing to {topic}: {e}"),
            }
        }
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("every message acknowledged");
}

/// The first `count` raw values of a partition, from its start.
pub fn fetch_values(topic: &str, partition: i32, count: usize) -> Vec<Vec<u8>> {
    use rdkafka::Message;
    let consumer: BaseConsumer = plaintext()
        .client_config()
        .set("group.id", unique_name("fetch"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let mut values = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while values.len() < count && std::time::Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message.expect("a message");
            values.push(message.payload().unwrap_or_default().to_vec());
        }
    }
    assert_eq!(values.len(), count, "{topic}[{partition}]: messages read");
    values
}

/// The seeds' sample messages (`scripts/demo.d/sample_messages.py`).
pub fn sample_messages(topic_shape: &str, batch: &str) -> Vec<(String, String)> {
    let script = repo_root().join("scripts/demo.d/sample_messages.py");
    let out = command("python3")
        .arg(&script)
        .args([topic_shape, batch])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once('\t').expect("key<TAB>value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// Which test-bed catalog a job writes to.
#[derive(Clone, Copy, Debug)]
pub enum Catalog {
    /// SeaweedFS's REST catalog.
    Seaweed,
    /// Apache Iceberg's reference REST catalog.
    Fixture,
}

impl Catalog {
    /// The readers' `--catalog` value.
    pub fn reader_name(self) -> &'static str {
        match self {
            Catalog::Seaweed => "seaweed",
            Catalog::Fixture => "fixture",
        }
    }

    /// The prefix of its `TESTBED_<PREFIX>_*` variables.
    pub fn prefix(self) -> &'static str {
        match self {
            Catalog::Seaweed => "SEAWEED",
            Catalog::Fixture => "FIXTURE",
        }
    }
}

/// A job file in a fresh folder.
pub struct Job {
    /// The job name (namespace `<name>_topics`).
    pub name: String,
    /// The job file.
    pub path: PathBuf,
}

impl Job {
    /// A job reading exactly `topics` into `catalog`, with `source_extra`
    /// lines appended to `[source]` and `extra` to the end of the file.
    pub fn new(catalog: Catalog, topics: &[&str], source_extra: &str, extra: &str) -> Job {
        let name = unique_name("it_job");
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let pattern = format!(
            "^({})$",
            topics
                .iter()
                .map(|t| regex_escape(t))
                .collect::<Vec<_>>()
                .join("|")
        );
        let p = catalog.prefix();
        let text = format!(
            r#"name = "{name}"
[source]
bootstrap_servers = "{bootstrap}"
topic_pattern = '{pattern}'
max_threads = 3
{source_extra}
[destination]
catalog = "rest"
uri = "{uri}"
warehouse = "{warehouse}"
credential = "{credential}"
s3_endpoint = "{s3}"
s3_region = "us-east-1"
s3_access_key = "{s3_key}"
s3_secret_key = "${{TESTBED_S3_SECRET_KEY}}"
{extra}
"#,
            bootstrap = get("TESTBED_KAFKA_BOOTSTRAP"),
            uri = get(&format!("TESTBED_{p}_URI")),
            warehouse = get(&format!("TESTBED_{p}_WAREHOUSE")),
            credential = get(&format!("TESTBED_{p}_CREDENTIAL")),
            s3 = get("TESTBED_S3_ENDPOINT"),
            s3_key = get("TESTBED_S3_ACCESS_KEY"),
        );
        let path = dir.join("job.toml");
        std::fs::write(&path, text).unwrap();
        Job { name, path }
    }

    /// A job writing into the embedded catalog (a fresh local folder).
    pub fn embedded(topics: &[&str]) -> Job {
        let job = Job::new(Catalog::Seaweed, topics, "", "");
        let text = std::fs::read_to_string(&job.path).unwrap();
        let source = text.split("[destination]").next().unwrap().to_string();
        let warehouse = job.path.with_file_name("warehouse");
        std::fs::write(
            &job.path,
            format!(
                "{source}[destination]\ncatalog = \"sql\"\npath = \"{}\"\n",
                warehouse.display()
            ),
        )
        .unwrap();
        job
    }

    /// Reads a table of an embedded-catalog job with an independent reader.
    pub fn read_embedded(&self, engine: &str, table: &str) -> String {
        let read = format!("{}/read", get("TESTBED_READERS"));
        let warehouse = self.path.with_file_name("warehouse");
        let out = command(&read)
            .args([
                engine,
                "--catalog",
                "sql",
                "--sql-path",
                warehouse.to_str().unwrap(),
                table,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{engine} could not read {table}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `<namespace>.<table>` for a topic.
    pub fn table(&self, topic: &str) -> String {
        format!("{}_topics.{}", self.name, topic.to_lowercase())
    }

    /// Runs `topicberg <command> -c <job> [args]` with `env` set.
    pub fn run(&self, subcommand: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = command(env!("CARGO_BIN_EXE_topicberg"));
        cmd.arg(subcommand).arg("-c").arg(&self.path).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("running topicberg")
    }

    /// Runs `topicberg <subcommand> --report-json` that must succeed (with
    /// `env`); its JSON report.
    pub fn run_reported(&self, subcommand: &str, env: &[(&str, &str)]) -> Value {
        let report = self.scratch_file(&format!("{subcommand}.json"));
        let out = self.run(
            subcommand,
            &["--report-json", report.to_str().unwrap()],
            env,
        );
        assert!(
            out.status.success(),
            "{subcommand} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&std::fs::read(&report).expect("report written"))
            .expect("report JSON")
    }

    /// Runs `topicberg maintain` that must succeed (with `env`); its JSON
    /// report.
    pub fn maintain(&self, env: &[(&str, &str)]) -> Value {
        self.run_reported("maintain", env)
    }

    /// Runs a sync that must succeed with its log (stderr) written to
    /// `log`; returns its JSON report.
    pub fn sync_logged(&self, log: &std::path::Path) -> Value {
        let report = self.scratch_file("report.json");
        let out = self.run("sync", &["--report-json", report.to_str().unwrap()], &[]);
        std::fs::write(log, &out.stderr).unwrap();
        assert!(
            out.status.success(),
            "sync failed ({}):\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&std::fs::read(&report).expect("report written"))
            .expect("report JSON")
    }

    /// Runs a sync that must succeed; returns its JSON report.
    pub fn sync(&self) -> Value {
        self.run_reported("sync", &[])
    }

    /// Runs a sync that must fail; returns what it wrote to stderr.
    pub fn sync_failing(&self) -> String {
        let out = self.run("sync", &[], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "the sync succeeded:\n{stderr}");
        stderr
    }
}

/// `{"id":<i>,"v":"<version><i>"}` keyed by `<i>`, for each id: the same
/// ids with another `version` update those rows.
pub fn versioned_messages(ids: std::ops::Range<i64>, version: &str) -> Vec<(String, String)> {
    ids.map(|i| (i.to_string(), format!(r#"{{"id":{i},"v":"{version}{i}"}}"#)))
        .collect()
}

/// A table's entry in a sync report.
pub fn table_report<'a>(report: &'a Value, table: &str) -> &'a Value {
    report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["table"] == table)
        .unwrap_or_else(|| panic!("{table} missing from report {report}"))
}

/// Runs an independent reader on a table, whatever it answers (exit code
/// 4: no such table).
pub fn try_read(engine: &str, catalog: Catalog, table: &str) -> Output {
    let read = format!("{}/read", get("TESTBED_READERS"));
    command(&read)
        .args([engine, "--catalog", catalog.reader_name(), table])
        .output()
        .unwrap()
}

/// Every independent reader of the test bed; all of them read format v2
/// tables with position deletes.
pub const READERS: [&str; 8] = [
    "duckdb",
    "pyiceberg",
    "spark",
    "polars",
    "datafusion",
    "chdb",
    "trino",
    "daft",
];

/// The readers that read v3 deletion vectors (chDB, Trino 476 and Daft
/// refuse them: `sync_upsert`).
pub const DV_READERS: [&str; 5] = ["duckdb", "pyiceberg", "spark", "polars", "datafusion"];

/// Reads a table with an independent reader: raw canonical lines.
pub fn read_lines(engine: &str, catalog: Catalog, table: &str) -> String {
    let read = format!("{}/read", get("TESTBED_READERS"));
    let out = command(&read)
        .args([engine, "--catalog", catalog.reader_name(), table])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{engine} could not read {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A table's files as PyIceberg and pyarrow see them
/// (`scripts/readers/metadata_files.py`, through `catalog`): its metadata
/// JSON files (the current one, its metadata log, every one in the
/// bucket's metadata folder), manifest lists, the data and delete files
/// its snapshots name and the files under its `data/`; `set` commits
/// table properties first.
pub fn metadata_files(catalog: Catalog, table: &str, set: &[&str]) -> Value {
    let mut command = command(&get("TESTBED_PYTHON"));
    command
        .arg(repo_root().join("scripts/readers/metadata_files.py"))
        .args(["--catalog", catalog.reader_name()]);
    for property in set {
        command.args(["--set", property]);
    }
    let out = command.arg(table).output().unwrap();
    assert!(
        out.status.success(),
        "metadata_files {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A JSON array of strings.
pub fn json_strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Reads a table with an independent reader: parsed rows.
pub fn read_rows(engine: &str, catalog: Catalog, table: &str) -> Vec<Value> {
    read_lines(engine, catalog, table)
        .lines()
        .map(|l| serde_json::from_str(l).expect("reader line is JSON"))
        .collect()
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}

// --- Kafka faults (tests/it/kafka_faults.rs; reusable by other fault tests) ---

/// The fault-test broker (`kafka_faults`, PLAINTEXT): a single-node cluster
/// of its own that tests may restart without disturbing the shared broker.
pub fn faults_broker() -> KafkaConnection {
    KafkaConnection::plaintext(get("TESTBED_KAFKA_FAULTS_BOOTSTRAP"))
}

/// Restarts the fault-test broker (`scripts/testbed restart-kafka-faults`:
/// SIGTERM, wait until its ports are closed, start, wait until it answers a
/// metadata request). Returns how long it took.
pub fn restart_kafka_faults() -> Duration {
    let started = std::time::Instant::now();
    let out = command(repo_root().join("scripts/testbed").to_str().unwrap())
        .arg("restart-kafka-faults")
        .output()
        .expect("scripts/testbed restart-kafka-faults");
    assert!(
        out.status.success(),
        "restarting the fault-test broker failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    started.elapsed()
}

fn admin_on(connection: &KafkaConnection) -> AdminClient<DefaultClientContext> {
    connection.client_config().create().expect("admin client")
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Creates a topic with `partitions` partitions on `connection`'s cluster.
pub fn create_topic_on(connection: &KafkaConnection, topic: &str, partitions: i32) {
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let results = block_on(admin_on(connection).create_topics(
        &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
        &options,
    ))
    .expect("create_topics request");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
}

/// Grows a topic of the shared broker to `total` partitions.
pub fn add_partitions(topic: &str, total: usize) {
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let results = block_on(
        admin_on(&plaintext()).create_partitions(&[NewPartitions::new(topic, total)], &options),
    )
    .expect("create_partitions request");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("adding partitions to {t}: {e}"));
    }
}

/// Deletes the records of `topic[partition]` (shared broker) below `offset`
/// (Kafka's DeleteRecords, what retention does): the log start offset
/// becomes `offset`.
pub fn delete_records_before(topic: &str, partition: i32, offset: i64) {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
        .unwrap();
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(20)));
    let result = block_on(admin_on(&plaintext()).delete_records(&tpl, &options))
        .unwrap_or_else(|e| panic!("deleting records of {topic}[{partition}]: {e}"));
    for e in result.elements() {
        if let Err(err) = e.error() {
            panic!("deleting records of {topic}[{}]: {err}", e.partition());
        }
    }
}

/// Produces `(partition, key, value)` messages to explicit partitions on
/// `connection`'s cluster and waits until the broker acknowledged every one.
/// Within a partition, messages get consecutive offsets in slice order.
pub fn produce_to_partitions(
    connection: &KafkaConnection,
    topic: &str,
    messages: &[(i32, String, String)],
) {
    let timed: Vec<(i32, &str, &str, Option<i64>)> = messages
        .iter()
        .map(|(p, k, v)| (*p, k.as_str(), v.as_str(), None))
        .collect();
    produce_timed(connection, topic, &timed);
}

/// [`produce_to_partitions`] with each message's timestamp (milliseconds
/// since the epoch; `None`: the producer's clock).
pub fn produce_timed(
    connection: &KafkaConnection,
    topic: &str,
    messages: &[(i32, &str, &str, Option<i64>)],
) {
    let producer: BaseProducer = connection
        .client_config()
        .set("enable.idempotence", "true")
        .set("linger.ms", "20")
        .create()
        .expect("producer");
    for (partition, key, value, timestamp) in messages {
        loop {
            let mut record = BaseRecord::to(topic)
                .partition(*partition)
                .key(*key)
                .payload(*value);
            if let Some(ms) = timestamp {
                record = record.timestamp(*ms);
            }
            match producer.send(record) {
                Ok(()) => break,
                Err((e, _)) if e.to_string().contains("QueueFull") => {
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => panic!("producing to {topic}[{partition}]: {e}"),
            }
        }
    }
    producer
        .flush(Duration::from_secs(120))
        .expect("every message acknowledged");
}

/// A partition's (low, high) watermarks on `connection`'s cluster.
pub fn watermarks(connection: &KafkaConnection, topic: &str, partition: i32) -> (i64, i64) {
    let consumer: BaseConsumer = connection.client_config().create().expect("consumer");
    consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("watermarks of {topic}[{partition}]: {e}"))
}

/// The consumer group's committed next offset for each of `partitions`
/// (`None`: no offset committed).
pub fn group_offsets(
    connection: &KafkaConnection,
    group: &str,
    topic: &str,
    partitions: i32,
) -> Vec<Option<i64>> {
    let consumer: BaseConsumer = connection
        .client_config()
        .set("group.id", group)
        .create()
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    // Right after a broker restart the group coordinator may not be ready
    // yet (NotCoordinator, CoordinatorLoadInProgress): ask again, for a
    // bounded time.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let committed = loop {
        match consumer.committed_offsets(tpl.clone(), Duration::from_secs(20)) {
            Ok(committed) => break committed,
            Err(e)
                if std::time::Instant::now() < deadline
                    && (e.to_string().contains("Not coordinator")
                        || e.to_string().contains("Coordinator load in progress")
                        || e.to_string().contains("Coordinator not available")) =>
            {
                std::thread::sleep(Duration::from_millis(250));
            }
            Err(e) => panic!("committed offsets of group {group}: {e}"),
        }
    };
    (0..partitions)
        .map(
            |p| match committed.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) if o >= 0 => Some(o),
                _ => None,
            },
        )
        .collect()
}

impl Job {
    /// The job's consumer group (the default, `topicberg_<name>`).
    pub fn group(&self) -> String {
        format!("topicberg_{}", self.name)
    }

    /// Points the job at another Kafka cluster (e.g. the fault-test broker).
    pub fn set_bootstrap(&self, bootstrap: &str) {
        let text = std::fs::read_to_string(&self.path).unwrap();
        let old = format!("bootstrap_servers = \"{}\"", get("TESTBED_KAFKA_BOOTSTRAP"));
        assert!(text.contains(&old), "{text}");
        let text = text.replace(&old, &format!("bootstrap_servers = \"{bootstrap}\""));
        std::fs::write(&self.path, text).unwrap();
    }

    /// Appends lines (e.g. a `[[streams]]` entry) to the end of the job file.
    pub fn append(&self, lines: &str) {
        let mut text = std::fs::read_to_string(&self.path).unwrap();
        text.push_str(lines);
        std::fs::write(&self.path, text).unwrap();
    }

    /// A fresh path beside the job file for a `--report-json` or a log.
    pub fn scratch_file(&self, what: &str) -> PathBuf {
        self.path
            .with_file_name(format!("{what}-{}", uuid::Uuid::new_v4().simple()))
    }

    /// Starts `topicberg sync -c <job> --report-json <report>` in the
    /// background with its stderr (the log) going to `log`.
    pub fn spawn_sync(&self, report: &std::path::Path, log: &std::path::Path) -> Running {
        self.spawn_sync_with(report, log, &[])
    }

    /// [`Job::spawn_sync`] with `env` set (e.g. a test hook).
    pub fn spawn_sync_with(
        &self,
        report: &std::path::Path,
        log: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Running {
        self.spawn_syncing(&[], report, log, env)
    }

    /// Starts `topicberg sync --follow` like [`Job::spawn_sync_with`]; it
    /// runs until it is sent SIGTERM or SIGINT (or killed).
    pub fn spawn_follow(
        &self,
        report: &std::path::Path,
        log: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Running {
        self.spawn_syncing(&["--follow"], report, log, env)
    }

    /// Starts `topicberg sync -c <job> <args> --report-json <report>`.
    pub fn spawn_syncing(
        &self,
        args: &[&str],
        report: &std::path::Path,
        log: &std::path::Path,
        env: &[(&str, &str)],
    ) -> Running {
        let mut cmd = command(env!("CARGO_BIN_EXE_topicberg"));
        cmd.arg("sync")
            .arg("-c")
            .arg(&self.path)
            .args(args)
            .arg("--report-json")
            .arg(report)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).expect("log file"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        Running(cmd.spawn().expect("starting topicberg sync"))
    }
}

/// A process a test started, killed when the test ends or fails: a test
/// that panics must not leave a follower (or a server) running into the
/// next tests and the next CI run. Dereferences to its [`Child`].
pub struct Running(pub Child);

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Sets (or with 0 removes) a broker quota on how fast the client id
/// `client_id` may fetch from the cluster at `bootstrap`, in bytes per
/// second. A sync's consumers use the consumer group as client id
/// ([`Job::group`]), so a test can make one job's drain last long enough to
/// inject a fault in its middle without slowing anybody else.
pub fn throttle_consumer(bootstrap: &str, client_id: &str, bytes_per_second: u64) {
    let out = command(repo_root().join("scripts/testbed").to_str().unwrap())
        .args([
            "throttle-consumer",
            bootstrap,
            client_id,
            &bytes_per_second.to_string(),
        ])
        .output()
        .expect("scripts/testbed throttle-consumer");
    assert!(
        out.status.success(),
        "setting the quota of {client_id} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Removes terminal colour sequences (`ESC [ ... m`) from log text.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The highest `records=` of the `sync in progress` lines in a sync's log
/// (0 before the first one).
pub fn sync_progress(log: &std::path::Path) -> u64 {
    most_in_log(log, "sync in progress", "records")
}

/// The largest `key=N` figure on the log's lines that contain `event` (0
/// when there is none).
pub fn most_in_log(log: &std::path::Path, event: &str, key: &str) -> u64 {
    figures_in_log(log, 0, event, key)
        .into_iter()
        .max()
        .unwrap_or(0)
}

/// Every `key=N` figure of the log's `event` lines, from byte `from` on.
pub fn figures_in_log(log: &std::path::Path, from: usize, event: &str, key: &str) -> Vec<u64> {
    let prefix = format!("{key}=");
    let text = std::fs::read_to_string(log).unwrap_or_default();
    strip_ansi(text.get(from..).unwrap_or_default())
        .lines()
        .filter(|l| l.contains(event))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix(prefix.as_str()))
                .and_then(|n| n.parse().ok())
        })
        .collect()
}

/// Polls `condition` every 50 ms until it holds; panics with `what` after
/// `deadline`.
pub fn wait_until(what: &str, deadline: Duration, mut condition: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < deadline,
            "timed out after {deadline:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs another engine's maintenance (`scripts/readers/maintain`: Spark)
/// with `args` (catalog options, `--steps`) on `tables`; it must succeed.
/// Its stdout.
pub fn spark_maintain(args: &[&str], tables: &[String]) -> String {
    let out = command(&format!("{}/maintain", get("TESTBED_READERS")))
        .args(args)
        .args(tables)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Spark maintenance {args:?} of {tables:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A small deterministic generator (xorshift64*) for the randomized tests.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from the environment variable `var` when set (to replay a
    /// run), else from the clock; the seed is printed with how to replay it.
    pub fn seeded(var: &str, what: &str) -> Rng {
        let seed: u64 = std::env::var(var)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("{what} seed: {seed} ({var}={seed} replays it)");
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
